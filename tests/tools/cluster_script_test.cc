// tools/cluster.sh on real processes: starts a serving-only cluster (1
// scheduler, 2 servers, 0 workers) with one log per process, serves through
// the scheduler's map, and stops everything cleanly.
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "rpc/client/cluster_worker.h"
#include "rpc/control/scheduler_client.h"
#include "store/table_spec.h"
#include "tests/testing/child_process.h"
#include "tests/testing/test_util.h"

namespace psdb::rpc {
namespace {

using ::psdb::testing::FreeLoopbackPort;
using ::psdb::testing::RunShell;
using ::psdb::testing::ScratchDir;
using ::psdb::testing::ShellResult;
using ::testing::HasSubstr;

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

TEST(ClusterScriptTest, StartsServesAndStopsAServingOnlyCluster) {
  ScratchDir dir;
  const std::string script = absl::StrCat(PSDB_SOURCE_DIR, "/tools/cluster.sh");
  const std::string bin = ::psdb::testing::BuiltBinary("tools");
  const int port = FreeLoopbackPort();
  const std::string common =
      absl::StrCat(" --dir ", dir.Sub("c"), " --bin ", bin);

  // A worker count without a worker command is refused at once.
  ShellResult bad =
      RunShell(absl::StrCat(script, " start --servers 1 --workers 2", common));
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_THAT(bad.output, HasSubstr("needs the worker command after --"));

  ShellResult start = RunShell(absl::StrCat(
      script, " start --servers 2 --workers 0 --port ", port, common));
  ASSERT_EQ(start.exit_code, 0) << start.output;
  EXPECT_THAT(start.output,
              HasSubstr("cluster ready: 2 servers, 0 workers, epoch 1"));
  const std::string sched_log = ReadFile(dir.Sub("c/logs/scheduler.log"));
  EXPECT_THAT(sched_log, HasSubstr("server node id:server-0 addr:127.0.0.1:"));
  EXPECT_THAT(sched_log, HasSubstr("server node id:server-1 addr:127.0.0.1:"));

  // Clients find the servers through the scheduler.
  ASSERT_OK_AND_ASSIGN(
      auto client, OpenSchedulerRemoteClient(absl::StrCat("127.0.0.1:", port),
                                             {}, absl::Seconds(60)));
  TableSpec spec;
  spec.name = "serving";
  spec.dim = 2;
  ASSERT_OK(client->CreateTable(spec));
  std::vector<uint64_t> keys = {1, 2, 3, 1000, 99999};
  std::vector<float> out(keys.size() * 2);
  PullOptions serving;
  serving.serving = true;
  ASSERT_OK(client->Pull("serving", keys, absl::MakeSpan(out), serving));

  ShellResult status = RunShell(absl::StrCat(script, " status", common));
  EXPECT_THAT(status.output, HasSubstr("server-1 pid"));
  EXPECT_THAT(status.output, HasSubstr("running"));

  ShellResult stop = RunShell(absl::StrCat(script, " stop", common));
  ASSERT_EQ(stop.exit_code, 0) << stop.output;
  EXPECT_THAT(stop.output, HasSubstr("cluster.sh: stopped"));
  EXPECT_THAT(ReadFile(dir.Sub("c/logs/server_0.log")),
              HasSubstr("stopped cleanly"));
  EXPECT_THAT(ReadFile(dir.Sub("c/logs/server_1.log")),
              HasSubstr("stopped cleanly"));
  EXPECT_THAT(ReadFile(dir.Sub("c/logs/scheduler.log")),
              HasSubstr("stopped cleanly"));
  EXPECT_NE(access(dir.Sub("c/pids").c_str(), F_OK), 0);
}

}  // namespace
}  // namespace psdb::rpc
