// The control plane on etcd with real processes: ps-scheduler --etcd,
// ps-server, and a real etcd (EtcdCluster), all on loopback.
#include <signal.h>

#include <vector>

#include "absl/strings/str_cat.h"
#include "rpc/client/cluster_worker.h"
#include "rpc/client/remote_client.h"
#include "store/table_spec.h"
#include "tests/rpc/control/etcd_cluster.h"
#include "tests/testing/child_process.h"
#include "tests/testing/test_util.h"

namespace psdb::rpc {
namespace {

using ::psdb::testing::BuiltBinary;
using ::psdb::testing::ChildOptions;
using ::psdb::testing::ChildProcess;
using ::psdb::testing::ClusterServerOptions;
using ::psdb::testing::EtcdCluster;
using ::psdb::testing::FreeLoopbackPort;
using ::psdb::testing::PsSchedulerOptions;
using ::psdb::testing::RunShell;
using ::psdb::testing::ScratchDir;
using ::testing::HasSubstr;

// ps-scheduler on `port` keeping cluster `name` in `etcd`.
ChildOptions EtcdScheduler(const EtcdCluster& etcd, int port, int servers,
                           int workers, const std::string& name) {
  ChildOptions o = PsSchedulerOptions(port, servers, workers);
  o.args = {"--heartbeat_interval_ms=200",
            absl::StrCat("--etcd=", etcd.endpoints()),
            absl::StrCat("--cluster=", name), "--lease_ttl_s=2"};
  return o;
}

std::string Health(int port) {
  return absl::StrCat(BuiltBinary("tools/ps-scheduler"),
                      " --health --sched_port=", port);
}

TEST(EtcdProcessTest, EtcdDownFailsTheHealthCheckButServersKeepServing) {
  ASSERT_OK_AND_ASSIGN(auto etcd, EtcdCluster::Start(1));
  ScratchDir dir;
  const int port = FreeLoopbackPort();
  ASSERT_OK_AND_ASSIGN(auto sched, ChildProcess::Start(
                                       EtcdScheduler(*etcd, port, 1, 0, "hc")));
  ASSERT_OK_AND_ASSIGN(auto server,
                       ChildProcess::Start(ClusterServerOptions(
                           port, "server-0", dir.Sub("s0"))));
  psdb::testing::ShellResult ok = RunShell(Health(port));
  EXPECT_EQ(ok.exit_code, 0) << ok.output;
  EXPECT_THAT(ok.output, HasSubstr("healthy: scheduler"));
  EXPECT_THAT(ok.output, HasSubstr("etcd cluster 'hc', leader"));

  RemoteClientOptions options;
  options.call_timeout = absl::Seconds(5);
  ASSERT_OK_AND_ASSIGN(
      auto client, OpenSchedulerRemoteClient(sched->ready_value(), options,
                                             absl::Seconds(60)));
  TableSpec spec;
  spec.name = "emb";
  spec.dim = 2;
  spec.initializer.kind = InitKind::kZeros;
  spec.optimizer.learning_rate = 0.5f;
  ASSERT_OK(client->CreateTable(spec));
  const std::vector<uint64_t> keys = {1, 2, 3};
  const std::vector<float> grads = {1, 1, 2, 2, 3, 3};
  ASSERT_OK(client->Push("emb", keys, grads, {}));

  etcd->Kill(0);
  psdb::testing::ShellResult down = RunShell(Health(port));
  EXPECT_EQ(down.exit_code, 1) << down.output;
  EXPECT_THAT(down.output, HasSubstr("unhealthy"));
  EXPECT_THAT(down.output, HasSubstr(etcd->endpoints()));
  // The data plane does not go through etcd: pushes and pulls go on.
  for (int i = 0; i < 3; ++i) ASSERT_OK(client->Push("emb", keys, grads, {}));
  std::vector<float> rows(6);
  ASSERT_OK(client->Pull("emb", keys, absl::MakeSpan(rows), {}));
  // SGD from zero rows: four pushes of g at rate 0.5 give -2g.
  EXPECT_EQ(rows, (std::vector<float>{-2, -2, -4, -4, -6, -6}));
  EXPECT_EQ(kill(server->pid(), 0), 0) << "ps-server exited without etcd";
}

}  // namespace
}  // namespace psdb::rpc
