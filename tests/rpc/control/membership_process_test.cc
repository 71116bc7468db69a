// Live resharding with real processes: ps-scheduler, ps-servers (one
// started with --join) and the admin commands `ps-scheduler add-server` /
// `drain-server`: their refusals and exit codes, and (once ps-server
// answers Reshard) a whole add and drain with every row read back.
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "grpcpp/grpcpp.h"
#include "psdb/table_spec.h"
#include "rpc/client/cluster_worker.h"
#include "rpc/client/remote_client.h"
#include "rpc/wire/psdb.grpc.pb.h"
#include "tests/testing/certificates.h"
#include "tests/testing/child_process.h"
#include "tests/testing/test_util.h"

namespace psdb::rpc {
namespace {

using ::psdb::testing::BuiltBinary;
using ::psdb::testing::ChildOptions;
using ::psdb::testing::ChildProcess;
using ::psdb::testing::ClusterServerOptions;
using ::psdb::testing::MakeTestCertificates;
using ::psdb::testing::PsSchedulerOptions;
using ::psdb::testing::ReservedPort;
using ::psdb::testing::RunShell;
using ::psdb::testing::ScratchDir;
using ::psdb::testing::ShellResult;
using ::psdb::testing::WaitFor;
using ::testing::HasSubstr;

class MembershipProcessTest : public ::testing::Test {
 protected:
  // The scheduler of a 2-server cluster; `tls` are the TLS flags every
  // process of the test gets (empty: plaintext on loopback).
  void StartScheduler(std::vector<std::string> tls = {}) {
    tls_ = std::move(tls);
    ChildOptions o = PsSchedulerOptions(sched_port_.port(), 2, 0);
    o.args.insert(o.args.end(), tls_.begin(), tls_.end());
    ASSERT_OK_AND_ASSIGN(sched_, ChildProcess::Start(o));
  }

  absl::StatusOr<std::unique_ptr<ChildProcess>> StartServer(
      const std::string& id, std::vector<std::string> extra = {}) {
    extra.insert(extra.end(), tls_.begin(), tls_.end());
    return ChildProcess::Start(ClusterServerOptions(
        sched_port_.port(), id, dir_.Sub(id), std::move(extra)));
  }

  // Both servers of the cluster, started together (each waits for the
  // other to register).
  void FormCluster() {
    absl::StatusOr<std::unique_ptr<ChildProcess>> a, b;
    std::thread t([&] { a = StartServer("s0"); });
    b = StartServer("s1");
    t.join();
    ASSERT_OK(a);
    ASSERT_OK(b);
    servers_.push_back(*std::move(a));
    servers_.push_back(*std::move(b));
  }

  ShellResult Admin(const std::string& command, const std::string& node_id,
                    const std::string& extra = "") {
    return RunShell(absl::StrCat(
        BuiltBinary("tools/ps-scheduler"), " ", command,
        " --scheduler=", sched_->ready_value(), " --node_id=", node_id, " ",
        absl::StrJoin(tls_, " "), " ", extra));
  }

  // Rows pushed through a client, s2 joined and added, s0 drained and
  // stopped: every row reads back as before.
  void AddThenDrain(const RemoteClientOptions& ro);

  const ReservedPort sched_port_;
  std::vector<std::string> tls_;
  ScratchDir dir_;
  std::unique_ptr<ChildProcess> sched_;
  std::vector<std::unique_ptr<ChildProcess>> servers_;
};

TEST_F(MembershipProcessTest, JoinAndRefusals) {
  StartScheduler();
  // --join before the cluster is ready: exit 1, saying why.
  auto early = StartServer("s9", {"--join"});
  EXPECT_THAT(early, StatusIs(absl::StatusCode::kFailedPrecondition));
  EXPECT_THAT(std::string(early.status().message()), HasSubstr("not ready"));

  FormCluster();
  ASSERT_OK_AND_ASSIGN(auto joined, StartServer("s2", {"--join"}));
  ASSERT_TRUE(WaitFor([&] {
    return absl::StrContains(sched_->Stderr(), "server node id:s2 addr:") &&
           absl::StrContains(sched_->Stderr(), "joining as rank 2");
  }));
  EXPECT_THAT(joined->Stderr(),
              HasSubstr("rank 2 of 3 servers, epoch 1 (joining: no keys until "
                        "add-server)"));
  // A new server without --join once the cluster is formed: exit 1.
  auto extra = StartServer("s3");
  EXPECT_THAT(extra, StatusIs(absl::StatusCode::kFailedPrecondition));
  EXPECT_THAT(std::string(extra.status().message()), HasSubstr("--join"));

  ShellResult add = Admin("add-server", "s0");
  EXPECT_EQ(add.exit_code, 1) << add.output;
  EXPECT_THAT(add.output, HasSubstr("add-server s0: failed: "
                                    "FAILED_PRECONDITION"));
  EXPECT_THAT(add.output, HasSubstr("already on the ring"));
  ShellResult drain = Admin("drain-server", "nobody");
  EXPECT_EQ(drain.exit_code, 1) << drain.output;
  EXPECT_THAT(drain.output,
              HasSubstr("drain-server nobody: failed: NOT_FOUND"));
  ShellResult bad = Admin("add-server", "s2", "--batch_rows=-1");
  EXPECT_EQ(bad.exit_code, 1) << bad.output;
  EXPECT_THAT(bad.output, HasSubstr("INVALID_ARGUMENT"));
  ShellResult unknown = Admin("grow", "s2");
  EXPECT_EQ(unknown.exit_code, 1);
  EXPECT_THAT(unknown.output, HasSubstr("unknown command 'grow'"));
  ShellResult help =
      RunShell(absl::StrCat(BuiltBinary("tools/ps-scheduler"), " --helpfull"));
  EXPECT_THAT(help.output, HasSubstr("ps-scheduler add-server"));
  EXPECT_THAT(help.output, HasSubstr("max_rows_per_second"));
}

void MembershipProcessTest::AddThenDrain(const RemoteClientOptions& ro) {
  FormCluster();
  ASSERT_OK_AND_ASSIGN(
      auto client,
      OpenSchedulerRemoteClient(sched_->ready_value(), ro, absl::Seconds(30)));
  TableSpec spec;
  spec.name = "emb";
  spec.dim = 2;
  spec.optimizer.kind = optim::OptimizerKind::kAdagrad;
  spec.seed = 3;
  ASSERT_OK(client->CreateTable(spec));
  std::vector<uint64_t> keys;
  for (uint64_t k = 0; k < 300; ++k) keys.push_back(k * 7919 + 1);
  std::vector<float> grads(keys.size() * 2);
  for (size_t i = 0; i < grads.size(); ++i) grads[i] = 0.01f * (i % 13);
  ASSERT_OK(client->Push("emb", keys, grads, {}));
  RowBatch before;
  ASSERT_OK(client->PullRows("emb", keys, &before));

  ASSERT_OK_AND_ASSIGN(auto joined, StartServer("s2", {"--join"}));
  ShellResult add = Admin("add-server", "s2", "--batch_rows=50");
  ASSERT_EQ(add.exit_code, 0) << add.output;
  EXPECT_THAT(add.output, HasSubstr("add-server s2: done, epoch 1 -> 2, "));
  ShellResult drain = Admin("drain-server", "s0");
  ASSERT_EQ(drain.exit_code, 0) << drain.output;
  EXPECT_THAT(drain.output, HasSubstr("drain-server s0: done, epoch 2 -> 3, "));
  ASSERT_TRUE(WaitFor(
      [&] {
        return absl::StrContains(
            servers_[0]->Stderr(),
            "drained: this server owns no keys and may be stopped");
      },
      absl::Seconds(30)));
  // Every row, through the map of epoch 3 (s1 and s2), as before. (Each
  // PullRows counts a sighting: the frequency moves by one.) The client
  // learns epoch 3 from the drained server's refusal; stopped first, that
  // server could not tell it (RemoteClient refreshes its map on
  // FAILED_PRECONDITION, not on UNAVAILABLE), so it stops after.
  RowBatch after;
  ASSERT_OK(client->PullRows("emb", keys, &after));
  EXPECT_EQ(client->epoch(), 3u);
  ASSERT_OK(servers_[0]->Stop());
  RowBatch again;
  ASSERT_OK(client->PullRows("emb", keys, &again));
  EXPECT_EQ(again.values, before.values);
  EXPECT_EQ(after.values, before.values);
  EXPECT_EQ(after.state, before.state);
  ASSERT_EQ(after.headers.size(), before.headers.size());
  for (size_t i = 0; i < after.headers.size(); ++i) {
    EXPECT_EQ(after.headers[i].update_count, before.headers[i].update_count);
    EXPECT_EQ(after.headers[i].last_update_step,
              before.headers[i].last_update_step);
  }
}

TEST_F(MembershipProcessTest, AddThenDrainThroughTheCommands) {
  StartScheduler();
  RemoteClientOptions ro;
  ro.call_timeout = absl::Seconds(60);
  AddThenDrain(ro);
}

// The same over TLS: the scheduler reaches the servers (Reshard) and the
// servers reach each other (Migrate) with the CA of their certificates.
TEST_F(MembershipProcessTest, AddThenDrainOverTls) {
  ASSERT_OK(MakeTestCertificates(dir_.path()));
  StartScheduler({absl::StrCat("--tls_cert=", dir_.Sub("server.pem")),
                  absl::StrCat("--tls_key=", dir_.Sub("server.key")),
                  absl::StrCat("--tls_ca=", dir_.Sub("ca1.pem"))});
  RemoteClientOptions ro;
  ro.call_timeout = absl::Seconds(60);
  ro.tls.ca_file = dir_.Sub("ca1.pem");
  AddThenDrain(ro);
}

}  // namespace
}  // namespace psdb::rpc
