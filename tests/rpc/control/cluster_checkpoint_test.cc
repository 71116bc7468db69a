// Cluster checkpoints on real processes: ps-scheduler, 2 ps-servers joined
// through it, a worker joined through ClusterWorker. One
// checkpoint id, one shard per server, the cluster manifest written last;
// a failed shard leaves no manifest.
#include "rpc/control/cluster_checkpoint.h"

#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "manifest/manifest.h"
#include "psdb/table_spec.h"
#include "rpc/client/cluster_worker.h"
#include "rpc/control/scheduler_client.h"
#include "rpc/wire/cluster_map_proto.h"
#include "tests/testing/child_process.h"
#include "tests/testing/test_util.h"

namespace psdb::rpc {
namespace {

using ::psdb::testing::ChildProcess;
using ::psdb::testing::ClusterServerOptions;
using ::psdb::testing::PsSchedulerOptions;
using ::psdb::testing::ReservedPort;
using ::psdb::testing::ScratchDir;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

// 1 scheduler, 2 servers (joined through it), 1 worker joined through
// ClusterWorker (its client).
struct Cluster {
  const ReservedPort sched_port;  // held for the processes' life
  std::unique_ptr<ChildProcess> sched;
  std::string sched_address;
  std::vector<std::unique_ptr<ChildProcess>> servers;
  std::unique_ptr<RemoteClient> client;
};

void StartCluster(const ScratchDir& dir, const std::string& name,
                  const std::vector<std::string>& server_args, Cluster* c) {
  const int port = c->sched_port.port();
  ASSERT_OK_AND_ASSIGN(c->sched,
                       ChildProcess::Start(PsSchedulerOptions(port, 2, 1)));
  c->sched_address = c->sched->ready_value();

  // The worker registers through the client it trains with; that blocks
  // until the servers have joined, so it opens on a thread.
  ClusterWorkerOptions worker;
  worker.scheduler = c->sched_address;
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
          port, absl::StrCat("server-", s),
          dir.Sub(absl::StrCat(name, "-s", s)), server_args));
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

TEST(ClusterCheckpointTest, AllShardsUnderOneIdManifestLastFailureLeavesNone) {
  ScratchDir dir;
  Cluster cluster;
  ASSERT_NO_FATAL_FAILURE(StartCluster(dir, "a", {}, &cluster));
  auto& client = cluster.client;
  auto& servers = cluster.servers;
  const std::string sched_address = cluster.sched_address;

  TableSpec spec;
  spec.name = "emb";
  spec.dim = 4;
  ASSERT_OK(client->CreateTable(spec));
  std::vector<uint64_t> keys;
  for (uint64_t k = 0; k < 50; ++k) keys.push_back(k * 7919 + 1);
  std::vector<float> grads(keys.size() * 4, 0.5f);
  PushOptions push;
  push.step = 1;
  ASSERT_OK(client->Push("emb", keys, grads, push));

  SchedulerClientOptions so;
  so.address = sched_address;
  ASSERT_OK_AND_ASSIGN(auto sched_client, SchedulerClient::Open(so));
  ASSERT_OK_AND_ASSIGN(v1::ClusterMap map, sched_client->GetClusterMap());
  ASSERT_OK_AND_ASSIGN(ClusterMap routed, ClusterMapFromProto(map));
  const std::string root = dir.Sub("ckpt");
  ASSERT_OK_AND_ASSIGN(ClusterCheckpointInfo info,
                       WriteClusterCheckpoint(routed, root, 1));
  EXPECT_EQ(info.id, "ckpt-000000000001-000001");
  EXPECT_EQ(info.rows, 50u);
  ASSERT_OK_AND_ASSIGN(v1::Manifest manifest, ReadManifest(info.path));
  EXPECT_EQ(manifest.checkpoint_id(), info.id);
  EXPECT_EQ(manifest.cluster_epoch(), 1u);
  EXPECT_EQ(manifest.step(), 1);
  EXPECT_THAT(manifest.ring().server_ids(), ElementsAre(0, 1));
  EXPECT_EQ(manifest.ring().vnodes_per_server(), 256);
  ASSERT_EQ(manifest.shards_size(), 2);
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(manifest.shards(r).shard_id(), r);
    EXPECT_EQ(manifest.shards(r).dir(), absl::StrCat("shard-", r));
    EXPECT_EQ(manifest.shards(r).server(), map.servers(r).address());
    EXPECT_TRUE(
        std::filesystem::is_directory(absl::StrCat(info.path, "/shard-", r)));
    // Each server listed its shard's files for the manifest
    // (store/shard_files.h): exactly the directory's files.
    std::vector<std::string> present, listed;
    for (const auto& e : std::filesystem::directory_iterator(
             absl::StrCat(info.path, "/shard-", r))) {
      if (e.is_regular_file()) present.push_back(e.path().filename());
    }
    std::sort(present.begin(), present.end());
    for (const v1::ShardFile& f : manifest.shards(r).files()) {
      listed.push_back(f.name());
      EXPECT_EQ(f.crc32c().size(), 8u) << f.name();
    }
    EXPECT_THAT(present, ::testing::Contains("CURRENT"));
    EXPECT_EQ(listed, present);
  }
  EXPECT_EQ(manifest.format_version(), 2u);
  ASSERT_EQ(manifest.tables_size(), 1);
  EXPECT_EQ(manifest.tables(0).spec().name(), "emb");
  EXPECT_EQ(manifest.tables(0).rows(), 50u);
  ASSERT_EQ(manifest.tables(0).shard_rows_size(), 2);
  EXPECT_EQ(manifest.tables(0).shard_rows(0) + manifest.tables(0).shard_rows(1),
            50u);
  EXPECT_GT(manifest.tables(0).shard_rows(0), 0u);
  EXPECT_GT(manifest.tables(0).shard_rows(1), 0u);

  // A new cluster of the same size restores from it: each server opens the
  // shard of its rank, and every row reads back bit for bit.
  std::vector<float> saved(keys.size() * 4);
  ASSERT_OK(client->Pull("emb", keys, absl::MakeSpan(saved), {}));
  {
    Cluster restored;
    ASSERT_NO_FATAL_FAILURE(StartCluster(
        dir, "b", {absl::StrCat("--restore_from=", info.path)}, &restored));
    std::vector<float> got(keys.size() * 4);
    PullOptions serving;
    serving.serving = true;  // creates nothing: a lost row would read as init
    ASSERT_OK(restored.client->Pull("emb", keys, absl::MakeSpan(got), serving));
    EXPECT_EQ(got, saved);
    ASSERT_OK_AND_ASSIGN(StoreStats stats, restored.client->Stats());
    ASSERT_EQ(stats.tables.size(), 1u);
    EXPECT_EQ(stats.tables[0].created, 0u);
  }

  // One shard fails: the checkpoint is abandoned, nothing is left.
  // (Ranks follow registration order: find the process of rank 1.)
  int victim = 0;
  for (int s = 0; s < 2; ++s) {
    if (servers[s]->ready_value() == map.servers(1).address()) victim = s;
  }
  servers[victim]->Signal(SIGKILL);
  ASSERT_OK(servers[victim]->Wait());
  auto failed = WriteClusterCheckpoint(routed, root, 2, {}, absl::Seconds(20));
  EXPECT_FALSE(failed.ok());
  EXPECT_THAT(std::string(failed.status().message()),
              HasSubstr(absl::StrCat("abandoned (no manifest): server rank 1 "
                                     "(node id:",
                                     map.servers(1).node_id(),
                                     " addr:", map.servers(1).address())));
  ASSERT_OK_AND_ASSIGN(auto complete, ListCheckpoints(root));
  ASSERT_EQ(complete.size(), 1u);
  EXPECT_EQ(complete[0].id, info.id);
  ASSERT_OK_AND_ASSIGN(auto incomplete, ListIncompleteCheckpoints(root));
  EXPECT_TRUE(incomplete.empty());
  EXPECT_FALSE(
      std::filesystem::exists(absl::StrCat(root, "/ckpt-000000000002-000002")));

  servers[1 - victim]->Signal(SIGTERM);
  ASSERT_OK(servers[1 - victim]->Wait());
}

}  // namespace
}  // namespace psdb::rpc
