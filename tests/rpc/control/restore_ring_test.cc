// ps-server --restore_from onto a cluster of another size, on real
// processes: 3 ps-servers (a static --servers list) train a table and write
// one cluster checkpoint; 2 ps-servers, and then 5, restore from it, each
// gathering the rows its ring gives it (checkpoint/restore.h); a
// client of each new cluster reads every row, optimizer state and header
// exactly as the 3 servers held them, and further pushes leave them
// bit-identical to those of 3 servers restored from the same checkpoint.
// The same in sync (BSP) mode with 2 workers, the checkpoint resharded
// offline by the real `ps-dump reshard` into 2 and into 5 shards.
#include <cstring>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/types/span.h"
#include "psdb/client_url.h"
#include "psdb/table_spec.h"
#include "rpc/client/remote_client.h"
#include "rpc/control/cluster_checkpoint.h"
#include "shard/cluster_map.h"
#include "tests/testing/child_process.h"
#include "tests/testing/test_util.h"

namespace psdb::rpc {
namespace {

using ::psdb::testing::BuiltBinary;
using ::psdb::testing::ChildProcess;
using ::psdb::testing::ReservedPort;
using ::psdb::testing::RunShell;
using ::psdb::testing::ScratchDir;
using ::psdb::testing::ShellResult;
using ::psdb::testing::StartPsServer;
using ::testing::HasSubstr;
using ::testing::Not;

struct StaticCluster {
  std::vector<std::string> addresses;
  std::vector<std::unique_ptr<ChildProcess>> servers;
  std::unique_ptr<ParameterClient> client;
};

// n ps-servers on loopback knowing each other (--servers, --shard_id),
// each with `extra` arguments.
void Start(const ScratchDir& dir, const std::string& name, int n,
           const std::vector<std::string>& extra, StaticCluster* c) {
  std::vector<std::unique_ptr<ReservedPort>> ports;
  for (int i = 0; i < n; ++i) {
    ports.push_back(std::make_unique<ReservedPort>());
    c->addresses.push_back(absl::StrCat("127.0.0.1:", ports.back()->port()));
  }
  const std::string list = absl::StrJoin(c->addresses, ",");
  for (int i = 0; i < n; ++i) {
    std::vector<std::string> args = {
        absl::StrCat("--data_dir=", dir.Sub(absl::StrCat(name, i))),
        absl::StrCat("--port=", ports[i]->port()),
        absl::StrCat("--servers=", list), absl::StrCat("--shard_id=", i),
        "--threads=2"};
    args.insert(args.end(), extra.begin(), extra.end());
    ASSERT_OK_AND_ASSIGN(auto server, StartPsServer(args));
    c->servers.push_back(std::move(server));
  }
  ASSERT_OK_AND_ASSIGN(c->client,
                       OpenParameterClient(absl::StrCat("servers:", list)));
}

TEST(RestoreRingTest, ThreeShardsRestoreOntoTwoAndOntoFiveServers) {
  ScratchDir dir;
  StaticCluster three;
  ASSERT_NO_FATAL_FAILURE(Start(dir, "three-", 3, {}, &three));
  TableSpec spec;
  spec.name = "emb";
  spec.dim = 4;
  spec.optimizer.kind = optim::OptimizerKind::kAdagrad;
  spec.optimizer.learning_rate = 0.1f;
  ASSERT_OK(three.client->CreateTable(spec));
  std::vector<uint64_t> keys;
  for (uint64_t k = 0; k < 500; ++k) keys.push_back(k * 7919 + 3);
  auto push = [&](ParameterClient* client, int step) {
    std::vector<float> grads(keys.size() * spec.dim);
    for (size_t i = 0; i < grads.size(); ++i) {
      grads[i] = 0.01f * static_cast<float>((i * 7 + step) % 13) - 0.05f;
    }
    PushOptions p;
    p.step = step;
    return client->Push("emb", keys, grads, p);
  };
  for (int step = 1; step <= 3; ++step)
    ASSERT_OK(push(three.client.get(), step));
  RowBatch before;
  ASSERT_OK(three.client->PullRows("emb", keys, &before));
  // The checkpoint holds the rows as `before` shows them; pulling them
  // again below counts one more sighting each.
  RowBatch expected = before;
  for (RowHeader& h : expected.headers) ++h.frequency;
  ASSERT_OK_AND_ASSIGN(ClusterMap map,
                       ClusterMap::FromAddresses(three.addresses));
  ASSERT_OK_AND_ASSIGN(ClusterCheckpointInfo ckpt,
                       WriteClusterCheckpoint(map, dir.Sub("ckpt"), 3));

  for (int m : {2, 5}) {
    SCOPED_TRACE(absl::StrCat(m, " servers"));
    StaticCluster next;
    ASSERT_NO_FATAL_FAILURE(Start(dir, absl::StrCat("m", m, "-"), m,
                                  {absl::StrCat("--restore_from=", ckpt.path)},
                                  &next));
    for (const auto& s : next.servers) {
      EXPECT_THAT(s->Stderr(), HasSubstr("(cut for another ring)"));
    }
    RowBatch after;
    ASSERT_OK(next.client->PullRows("emb", keys, &after));
    EXPECT_EQ(after.values, before.values);
    EXPECT_EQ(after.state, before.state);
    EXPECT_EQ(after.headers, expected.headers);
    // Every row was found, none created by PullRows' get-or-create.
    ASSERT_OK_AND_ASSIGN(StoreStats stats, next.client->Stats());
    uint64_t created = 0;
    for (const TableStats& t : stats.tables) created += t.created;
    EXPECT_EQ(created, 0u);
    // Training goes on from there as if nothing had moved: the same pushes
    // on the 2 or 5 servers and on a fresh 3-server restore of the same
    // checkpoint give bit-identical rows.
    StaticCluster same;
    ASSERT_NO_FATAL_FAILURE(Start(dir, absl::StrCat("same", m, "-"), 3,
                                  {absl::StrCat("--restore_from=", ckpt.path)},
                                  &same));
    for (int step = 4; step <= 5; ++step) {
      ASSERT_OK(push(next.client.get(), step));
      ASSERT_OK(push(same.client.get(), step));
    }
    RowBatch moved, stayed;
    ASSERT_OK(next.client->PullRows("emb", keys, &moved));
    ASSERT_OK(same.client->PullRows("emb", keys, &stayed));
    EXPECT_EQ(moved.values, stayed.values);
    EXPECT_EQ(moved.state, stayed.state);
    EXPECT_NE(moved.values, before.values);  // steps 4 and 5 did train
  }
}

// One worker's push of a step in sync mode: keys (overlapping between the
// two workers, some touched by one worker only, one duplicate) and
// gradients that differ per worker and per step.
struct WorkerBatch {
  std::vector<uint64_t> keys;
  std::vector<float> grads;
};

WorkerBatch MakeWorkerBatch(absl::Span<const uint64_t> keys, int dim,
                            int worker, int step) {
  WorkerBatch b;
  for (size_t i = 0; i < keys.size(); ++i) {
    if ((i + worker) % 3 != 0) b.keys.push_back(keys[i]);
  }
  b.keys.push_back(b.keys.front());
  for (size_t i = 0; i < b.keys.size() * dim; ++i) {
    b.grads.push_back(
        0.0625f * static_cast<float>((i * 7 + worker * 5 + step) % 11) - 0.3f);
  }
  return b;
}

// The two workers' clients of a sync cluster: a push goes to every server
// (empty where a server owns none of its keys) under the worker's id.
std::vector<std::unique_ptr<ParameterClient>> OpenWorkers(
    const StaticCluster& c) {
  std::vector<std::unique_ptr<ParameterClient>> workers;
  for (int w = 0; w < 2; ++w) {
    RemoteClientOptions ro;
    ro.push_to_every_server = true;
    ro.worker_id = w;
    auto client = OpenParameterClient(
        absl::StrCat("servers:", absl::StrJoin(c.addresses, ",")), ro);
    EXPECT_OK(client);
    if (!client.ok()) return {};
    workers.push_back(*std::move(client));
  }
  return workers;
}

// One BSP step: worker 0 pushes (recorded, not applied), then worker 1,
// whose push to each server completes the step there and returns after it
// is applied.
absl::Status SyncStep(absl::Span<const std::unique_ptr<ParameterClient>> w,
                      absl::Span<const uint64_t> keys, int dim, int step) {
  for (int worker = 0; worker < 2; ++worker) {
    const WorkerBatch b = MakeWorkerBatch(keys, dim, worker, step);
    PushOptions p;
    p.step = step;
    absl::Status s = w[worker]->Push("emb", b.keys, b.grads, p);
    if (!s.ok()) return s;
  }
  return absl::OkStatus();
}

// ps-dump reshard of a sync training run's cluster checkpoint (3 shards)
// into 2 and into 5 shards: verify passes, the export is the same file, and
// M servers restored from the resharded checkpoint continue the 2-worker
// BSP training to the same rows, bit for bit, as 3 servers restored from
// the original one.
TEST(RestoreRingTest, ReshardedCheckpointContinuesSyncTrainingBitIdentically) {
  ScratchDir dir;
  const std::vector<std::string> sync = {"--sync_mode=sync", "--worker_num=2"};
  StaticCluster three;
  ASSERT_NO_FATAL_FAILURE(Start(dir, "sync-three-", 3, sync, &three));
  auto workers = OpenWorkers(three);
  ASSERT_EQ(workers.size(), 2u);
  TableSpec spec;
  spec.name = "emb";
  spec.dim = 8;
  spec.seed = 7;
  spec.optimizer.kind = optim::OptimizerKind::kAdam;
  spec.optimizer.learning_rate = 0.05f;
  ASSERT_OK(three.client->CreateTable(spec));
  std::vector<uint64_t> keys;
  for (uint64_t k = 0; k < 300; ++k) keys.push_back(k * 104729 + 11);
  for (int step = 1; step <= 3; ++step) {
    ASSERT_OK(SyncStep(workers, keys, spec.dim, step));
  }
  RowBatch trained;
  ASSERT_OK(three.client->PullRows("emb", keys, &trained));
  ASSERT_OK_AND_ASSIGN(ClusterMap map,
                       ClusterMap::FromAddresses(three.addresses));
  ASSERT_OK_AND_ASSIGN(ClusterCheckpointInfo ckpt,
                       WriteClusterCheckpoint(map, dir.Sub("sync-ckpt"), 3));
  EXPECT_EQ(ckpt.rows, keys.size());

  const std::string dump = BuiltBinary("tools/ps-dump");
  const std::string original_tsv = dir.Sub("original.tsv");
  ShellResult exported = RunShell(absl::StrCat(
      dump, " export --table=emb --with-state --out=", original_tsv, " ",
      ckpt.path));
  ASSERT_EQ(exported.exit_code, 0) << exported.output;
  for (int m : {2, 5}) {
    SCOPED_TRACE(absl::StrCat(m, " servers"));
    const std::string out = dir.Sub(absl::StrCat("resharded-", m));
    ShellResult r = RunShell(absl::StrCat(dump, " reshard --servers=", m,
                                          " --out=", out, " ", ckpt.path),
                             /*merge_stderr=*/false);
    ASSERT_EQ(r.exit_code, 0) << r.output;
    EXPECT_THAT(r.output, HasSubstr(absl::StrCat("resharded ", keys.size(),
                                                 " rows of 3 shards into ", m,
                                                 " shards at ", out)));
    r = RunShell(absl::StrCat(dump, " verify ", out));
    EXPECT_EQ(r.exit_code, 0) << r.output;
    const std::string resharded_tsv =
        dir.Sub(absl::StrCat("resharded-", m, ".tsv"));
    r = RunShell(absl::StrCat(dump, " export --table=emb --with-state --out=",
                              resharded_tsv, " ", out));
    ASSERT_EQ(r.exit_code, 0) << r.output;
    r = RunShell(absl::StrCat("cmp ", original_tsv, " ", resharded_tsv));
    EXPECT_EQ(r.exit_code, 0) << r.output;

    // M servers on the resharded checkpoint (each loads its own shard: the
    // rings match, nothing is cut) and 3 on the original one, both in sync
    // mode for the same 2 workers.
    StaticCluster moved;
    std::vector<std::string> args = sync;
    args.push_back(absl::StrCat("--restore_from=", out));
    ASSERT_NO_FATAL_FAILURE(
        Start(dir, absl::StrCat("sync-m", m, "-"), m, args, &moved));
    for (const auto& s : moved.servers) {
      EXPECT_THAT(s->Stderr(), Not(HasSubstr("(cut for another ring)")));
    }
    StaticCluster stayed;
    args = sync;
    args.push_back(absl::StrCat("--restore_from=", ckpt.path));
    ASSERT_NO_FATAL_FAILURE(
        Start(dir, absl::StrCat("sync-same", m, "-"), 3, args, &stayed));
    auto moved_workers = OpenWorkers(moved);
    auto stayed_workers = OpenWorkers(stayed);
    ASSERT_EQ(moved_workers.size(), 2u);
    ASSERT_EQ(stayed_workers.size(), 2u);
    for (int step = 4; step <= 6; ++step) {
      ASSERT_OK(SyncStep(moved_workers, keys, spec.dim, step));
      ASSERT_OK(SyncStep(stayed_workers, keys, spec.dim, step));
    }
    RowBatch a, b;
    ASSERT_OK(moved.client->PullRows("emb", keys, &a));
    ASSERT_OK(stayed.client->PullRows("emb", keys, &b));
    ASSERT_EQ(a.values.size(), keys.size() * spec.dim);
    ASSERT_EQ(a.state.size(), b.state.size());
    EXPECT_EQ(0, std::memcmp(a.values.data(), b.values.data(),
                             a.values.size() * sizeof(float)));
    EXPECT_EQ(0, std::memcmp(a.state.data(), b.state.data(),
                             a.state.size() * sizeof(float)));
    EXPECT_EQ(a.headers, b.headers);
    // Steps 4 to 6 did train: every key is pushed by at least one worker.
    EXPECT_NE(a.values, trained.values);
    EXPECT_NE(a.state, trained.state);
    // And no row of the resharded cluster was created afresh by a pull.
    ASSERT_OK_AND_ASSIGN(StoreStats stats, moved.client->Stats());
    uint64_t created = 0;
    for (const TableStats& t : stats.tables) created += t.created;
    EXPECT_EQ(created, 0u);
  }
}

}  // namespace
}  // namespace psdb::rpc
