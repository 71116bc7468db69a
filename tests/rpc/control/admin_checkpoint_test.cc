// `ps-server checkpoint` (the admin call, rpc/control/admin_checkpoint.h) on
// real processes: ps-scheduler, 2 ps-servers joined through it, a worker that
// writes rows. The admin process checkpoints the cluster (through the
// scheduler and through a static --servers list); ps-dump verify accepts
// the result; with a server killed it exits 1 naming that server and leaves
// no manifest.
#include "rpc/control/admin_checkpoint.h"

#include <signal.h>
#include <sys/wait.h>

#include <filesystem>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "manifest/manifest.h"
#include "psdb/table_spec.h"
#include "rpc/client/cluster_worker.h"
#include "rpc/control/scheduler_client.h"
#include "rpc/wire/cluster_map_proto.h"
#include "tests/testing/child_process.h"
#include "tests/testing/test_util.h"

namespace psdb::rpc {
namespace {

using ::psdb::testing::ChildOptions;
using ::psdb::testing::ChildProcess;
using ::psdb::testing::ClusterServerOptions;
using ::psdb::testing::PsSchedulerOptions;
using ::psdb::testing::ReservedPort;
using ::psdb::testing::ScratchDir;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

struct Cluster {
  const ReservedPort sched_port;  // held for the processes' life
  std::unique_ptr<ChildProcess> sched;
  std::vector<std::unique_ptr<ChildProcess>> servers;
  std::unique_ptr<RemoteClient> client;
};

// 1 scheduler, 2 servers joined through it, 1 worker (the client).
void StartCluster(const ScratchDir& dir, Cluster* c) {
  const int port = c->sched_port.port();
  ASSERT_OK_AND_ASSIGN(c->sched,
                       ChildProcess::Start(PsSchedulerOptions(port, 2, 1)));
  const std::string sched_address = c->sched->ready_value();

  ClusterWorkerOptions worker;
  worker.scheduler = sched_address;
  worker.node_id = "worker-0";
  worker.worker_num = 1;
  worker.sync = false;
  worker.wait_ready = absl::Seconds(60);
  absl::StatusOr<std::unique_ptr<ClusterWorker>> joined;
  std::thread opener([&] { joined = ClusterWorker::Join(worker); });
  std::vector<absl::StatusOr<std::unique_ptr<ChildProcess>>> started(2);
  std::vector<std::thread> threads;
  for (int s = 0; s < 2; ++s) {
    threads.emplace_back([&, s] {
      started[s] = ChildProcess::Start(ClusterServerOptions(
          port, absl::StrCat("server-", s), dir.Sub(absl::StrCat("s", s))));
    });
  }
  for (auto& t : threads) t.join();
  opener.join();
  for (auto& s : started) {
    ASSERT_OK(s);
    c->servers.push_back(*std::move(s));
  }
  ASSERT_OK(joined);
  c->client = (*joined)->ReleaseClient();
}

// Runs a tool to completion; its exit code (-1 if it did not exit).
struct ToolRun {
  int exit_code = -1;
  std::string ready_value;  // the rest of the line after ready_prefix
  std::string stderr_text;
};
ToolRun RunTool(const std::string& binary, std::vector<std::string> args,
                std::map<std::string, std::string> env,
                const std::string& ready_prefix) {
  ToolRun run;
  ChildOptions o;
  o.binary = ::psdb::testing::BuiltBinary(binary);
  o.args = std::move(args);
  o.env = std::move(env);
  o.ready_prefix = ready_prefix;
  auto child = ChildProcess::Start(o);
  if (!child.ok()) {
    run.stderr_text = std::string(child.status().message());
    // Start fails when the child exits before printing the prefix.
    return run;
  }
  run.ready_value = (*child)->ready_value();
  auto status = (*child)->Wait();
  run.stderr_text = (*child)->Stderr();
  if (status.ok() && WIFEXITED(*status)) run.exit_code = WEXITSTATUS(*status);
  return run;
}

TEST(AdminCheckpointTest, PsServerCheckpointWritesVerifiableClusterCheckpoint) {
  ScratchDir dir;
  Cluster cluster;
  ASSERT_NO_FATAL_FAILURE(StartCluster(dir, &cluster));

  TableSpec spec;
  spec.name = "emb";
  spec.dim = 4;
  ASSERT_OK(cluster.client->CreateTable(spec));
  std::vector<uint64_t> keys;
  for (uint64_t k = 0; k < 40; ++k) keys.push_back(k * 7919 + 3);
  std::vector<float> grads(keys.size() * 4, 0.25f);
  PushOptions push;
  push.step = 3;
  ASSERT_OK(cluster.client->Push("emb", keys, grads, push));

  SchedulerClientOptions so;
  so.address = cluster.sched->ready_value();
  ASSERT_OK_AND_ASSIGN(auto sched_client, SchedulerClient::Open(so));
  ASSERT_OK_AND_ASSIGN(v1::ClusterMap map, sched_client->GetClusterMap());
  ASSERT_EQ(map.servers_size(), 2);

  // Through the scheduler (PS_SCHED_* variables).
  const std::string root = dir.Sub("ckpt");
  const std::map<std::string, std::string> sched_env = {
      {"PS_SCHED_HOST", "127.0.0.1"},
      {"PS_SCHED_PORT", absl::StrCat(cluster.sched_port.port())}};
  ToolRun run =
      RunTool("tools/ps-server",
              {"checkpoint", absl::StrCat("--root=", root), "--step=3"},
              sched_env, "checkpoint ");
  ASSERT_EQ(run.exit_code, 0) << run.stderr_text;
  const std::string path = absl::StrCat(root, "/ckpt-000000000003-000001");
  EXPECT_EQ(run.ready_value, path);
  ASSERT_OK_AND_ASSIGN(v1::Manifest manifest, ReadManifest(path));
  EXPECT_EQ(manifest.checkpoint_id(), "ckpt-000000000003-000001");
  EXPECT_EQ(manifest.step(), 3);
  EXPECT_EQ(manifest.cluster_epoch(), 1u);
  EXPECT_THAT(manifest.ring().server_ids(), ElementsAre(0, 1));
  ASSERT_EQ(manifest.shards_size(), 2);
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(manifest.shards(r).shard_id(), r);
    EXPECT_EQ(manifest.shards(r).server(), map.servers(r).address());
    EXPECT_TRUE(
        std::filesystem::is_directory(absl::StrCat(path, "/shard-", r)));
  }
  ASSERT_EQ(manifest.tables_size(), 1);
  EXPECT_EQ(manifest.tables(0).spec().name(), "emb");
  EXPECT_EQ(manifest.tables(0).rows(), 40u);
  ASSERT_EQ(manifest.tables(0).shard_rows_size(), 2);
  EXPECT_GT(manifest.tables(0).shard_rows(0), 0u);
  EXPECT_GT(manifest.tables(0).shard_rows(1), 0u);

  ToolRun verify = RunTool("tools/ps-dump", {"verify", path}, {}, "");
  EXPECT_EQ(verify.exit_code, 0) << verify.stderr_text;

  // Through a static server list (--sched_* absent): the next seq.
  ToolRun by_list =
      RunTool("tools/ps-server",
              {"checkpoint", absl::StrCat("--root=", root), "--step=3",
               absl::StrCat("--servers=", map.servers(0).address(), ",",
                            map.servers(1).address())},
              {}, "checkpoint ");
  ASSERT_EQ(by_list.exit_code, 0) << by_list.stderr_text;
  EXPECT_EQ(by_list.ready_value,
            absl::StrCat(root, "/ckpt-000000000003-000002"));
  ToolRun verify2 =
      RunTool("tools/ps-dump", {"verify", by_list.ready_value}, {}, "");
  EXPECT_EQ(verify2.exit_code, 0) << verify2.stderr_text;

  // Neither a scheduler nor --servers: a usage error, nothing written.
  ToolRun neither =
      RunTool("tools/ps-server", {"checkpoint", absl::StrCat("--root=", root)},
              {}, "checkpoint ");
  EXPECT_EQ(neither.exit_code, -1);  // never printed "checkpoint "
  EXPECT_THAT(neither.stderr_text, HasSubstr("exactly one"));

  // Rank 1 killed: exit 1, the error names it, no manifest is left.
  int victim = 0;
  for (int s = 0; s < 2; ++s) {
    if (cluster.servers[s]->ready_value() == map.servers(1).address()) {
      victim = s;
    }
  }
  cluster.servers[victim]->Signal(SIGKILL);
  ASSERT_OK(cluster.servers[victim]->Wait());
  ChildOptions fo;
  fo.binary = ::psdb::testing::BuiltBinary("tools/ps-server");
  fo.args = {"checkpoint", absl::StrCat("--root=", root), "--step=4",
             "--checkpoint_timeout_seconds=20"};
  fo.env = sched_env;
  ASSERT_OK_AND_ASSIGN(auto failing, ChildProcess::Start(fo));
  ASSERT_OK_AND_ASSIGN(int wait_status, failing->Wait());
  ASSERT_TRUE(WIFEXITED(wait_status));
  EXPECT_EQ(WEXITSTATUS(wait_status), 1);
  EXPECT_THAT(failing->Stderr(),
              HasSubstr(absl::StrCat("abandoned (no manifest): server rank 1 "
                                     "(node id:",
                                     map.servers(1).node_id(),
                                     " addr:", map.servers(1).address())));
  EXPECT_FALSE(
      std::filesystem::exists(absl::StrCat(root, "/ckpt-000000000004-000003")));
  ASSERT_OK_AND_ASSIGN(auto complete, ListCheckpoints(root));
  EXPECT_EQ(complete.size(), 2u);
  ASSERT_OK_AND_ASSIGN(auto incomplete, ListIncompleteCheckpoints(root));
  EXPECT_TRUE(incomplete.empty());

  cluster.servers[1 - victim]->Signal(SIGTERM);
  ASSERT_OK(cluster.servers[1 - victim]->Wait());
}

}  // namespace
}  // namespace psdb::rpc
