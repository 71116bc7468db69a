// ps-train as a cluster worker on real processes (issue 6): ps-scheduler,
// 3 ps-servers started with --sync_mode=sync and one `ps-train --store
// scheduler:HOST:PORT --mode sync` process. Its cluster checkpoint (3 shards)
// exports, table by table with optimizer state and row headers, exactly as
// the embedded run's with the same seed and data: without the worker cache
// and with it. A worker whose --mode disagrees with the servers'
// --sync_mode is refused at its first push, and nothing is applied.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "psdb/checkpoint_reader.h"
#include "rpc/client/cluster_worker.h"
#include "tests/testing/child_process.h"
#include "tests/testing/test_util.h"
#include "tools/dump/dump_cli.h"
#include "tools/train/train_cli.h"

namespace psdb::train {
namespace {

using ::psdb::testing::ChildOptions;
using ::psdb::testing::ChildProcess;
using ::psdb::testing::ClusterServerOptions;
using ::psdb::testing::PsSchedulerOptions;
using ::psdb::testing::ReservedPort;
using ::psdb::testing::ScratchDir;
using ::testing::HasSubstr;
using ::testing::Not;

int RunCli(int (*fn)(int, const char* const*, std::ostream&, std::ostream&),
           std::vector<std::string> args, std::string* out_text,
           std::string* err_text) {
  std::vector<const char*> argv;
  for (const auto& a : args) argv.push_back(a.c_str());
  std::ostringstream out, err;
  const int rc = fn(static_cast<int>(argv.size()), argv.data(), out, err);
  *out_text = out.str();
  *err_text = err.str();
  return rc;
}

// The model and data flags both runs share: small, several steps, dense
// tables of several blocks (so every server owns some).
std::vector<std::string> TrainFlags(const std::string& data,
                                    const std::string& ckpt, int cache_rows) {
  return {"--data",           data,
          "--checkpoint_dir", ckpt,
          "--mode",           "sync",
          "--batch_size",     "64",
          "--deep_dim",       "4",
          "--hidden",         "8,4",
          "--block_dim",      "16",
          "--seed",           "7",
          "--log_every",      "1000",
          "--cache_rows",     absl::StrCat(cache_rows),
          "--no_progress",    "--no_plot",
          "--valid_fraction", "0"};
}

// The wide table's optimizer in the checkpoint at `ckpt`.
optim::OptimizerSpec WideOptimizer(const std::string& ckpt) {
  auto reader = ckpt::CheckpointReader::Open(ckpt);
  EXPECT_OK(reader);
  if (!reader.ok()) return {};
  absl::StatusOr<const ckpt::TableInfo*> wide = (*reader)->FindTable("wide");
  EXPECT_OK(wide);
  return wide.ok() ? (*wide)->spec.optimizer : optim::OptimizerSpec{};
}

// Every table's `ps-dump export --with-state` text, in table order.
std::vector<std::pair<std::string, std::string>> ExportAll(
    const std::string& ckpt) {
  std::vector<std::pair<std::string, std::string>> exports;
  auto reader = ckpt::CheckpointReader::Open(ckpt);
  EXPECT_OK(reader);
  if (!reader.ok()) return exports;
  for (const ckpt::TableInfo& t : (*reader)->tables()) {
    std::string out, err;
    const int rc = RunCli(&dump::RunDump,
                          {"ps-dump", "export", "--table=" + t.spec.name,
                           "--format=tsv", "--with-state", ckpt},
                          &out, &err);
    EXPECT_EQ(rc, 0) << err;
    exports.emplace_back(t.spec.name, out);
  }
  return exports;
}

// `ps-dump export --with-state` text without its last column, the header's
// frequency: the cache fetches rows with PullRows, which does not count a
// sighting as Pull does.
std::string WithoutFrequency(const std::string& tsv) {
  std::string out;
  for (absl::string_view line : absl::StrSplit(tsv, '\n', absl::SkipEmpty())) {
    absl::StrAppend(&out, line.substr(0, line.rfind('\t')), "\n");
  }
  return out;
}

// Every table of `got` equals `want`'s (ExportAll texts, in table order),
// with or without the header's frequency column.
void ExpectSameTables(
    const std::vector<std::pair<std::string, std::string>>& want,
    const std::vector<std::pair<std::string, std::string>>& got,
    bool with_frequency, absl::string_view run) {
  ASSERT_EQ(got.size(), want.size());
  ASSERT_GE(want.size(), 4u);  // wide, deep, linear and MLP tables
  for (size_t t = 0; t < want.size(); ++t) {
    EXPECT_EQ(got[t].first, want[t].first);
    EXPECT_GT(want[t].second.size(), 0u);
    EXPECT_TRUE(with_frequency ? got[t].second == want[t].second
                               : WithoutFrequency(got[t].second) ==
                                     WithoutFrequency(want[t].second))
        << "table " << want[t].first << " differs (" << run << ")";
  }
}

class ClusterTrainTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string out, err;
    ASSERT_EQ(
        RunCli(&RunTrain,
               {"ps-train", "gen", "--out", data_, "--seed", "3",
                "--train_rows", "640", "--test_rows", "64", "--train_files",
                "2", "--min_vocab", "20", "--max_vocab", "400"},
               &out, &err),
        0)
        << err;
  }

  // The embedded run: returns its checkpoint root.
  std::string Embedded(int cache_rows) {
    const std::string ckpt = dir_.Sub(absl::StrCat("embedded-", cache_rows));
    std::vector<std::string> args = {"ps-train"};
    for (auto& a : TrainFlags(data_, ckpt, cache_rows)) args.push_back(a);
    std::string out, err;
    EXPECT_EQ(RunCli(&RunTrain, args, &out, &err), 0) << err << out;
    return ckpt;
  }

  // 1 scheduler + 3 sync servers + `workers` ps-train processes; sets
  // *ckpt to the cluster's checkpoint root.
  void Cluster(int cache_rows, std::string* ckpt, int workers = 1) {
    const std::string root =
        dir_.Sub(absl::StrCat("cluster-", cache_rows, "-", workers));
    *ckpt = root + "/ckpt";
    const ReservedPort held;  // for the processes' life
    const int port = held.port();
    ASSERT_OK_AND_ASSIGN(
        std::unique_ptr<ChildProcess> sched,
        ChildProcess::Start(PsSchedulerOptions(port, 3, workers)));
    std::vector<std::unique_ptr<ChildProcess>> servers;
    for (int s = 0; s < 3; ++s) {
      // Servers block until the cluster is complete: start them without
      // waiting for "listening on".
      ChildOptions o = ClusterServerOptions(port, absl::StrCat("server-", s),
                                            absl::StrCat(root, "/server-", s),
                                            {"--sync_mode=sync"});
      o.ready_prefix.clear();
      ASSERT_OK_AND_ASSIGN(auto server, ChildProcess::Start(o));
      servers.push_back(std::move(server));
    }
    std::vector<std::unique_ptr<ChildProcess>> trainers;
    for (int w = 0; w < workers; ++w) {
      ChildOptions wo;
      wo.binary = ::psdb::testing::BuiltBinary("tools/ps-train");
      wo.env = {{"PS_NODE_ID", absl::StrCat("worker-", w)}};
      wo.args = TrainFlags(data_, *ckpt, cache_rows);
      wo.args.insert(
          wo.args.end(),
          {"--store", absl::StrCat("scheduler:", sched->ready_value()),
           "--dense", "ps"});
      ASSERT_OK_AND_ASSIGN(auto worker, ChildProcess::Start(wo));
      trainers.push_back(std::move(worker));
    }
    for (auto& worker : trainers) {
      ASSERT_OK_AND_ASSIGN(int status, worker->Wait(absl::Minutes(3)));
      ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0)
          << worker->Stderr();
    }
    for (auto& server : servers) {
      server->Signal(SIGTERM);
      ASSERT_OK_AND_ASSIGN(int st, server->Wait());
      EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0) << server->Stderr();
    }
  }

  void ExpectSameExports(int cache_rows) {
    const std::string embedded = Embedded(cache_rows);
    std::string cluster;
    ASSERT_NO_FATAL_FAILURE(Cluster(cache_rows, &cluster));
    ASSERT_OK_AND_ASSIGN(auto reader, ckpt::CheckpointReader::Open(cluster));
    EXPECT_EQ(reader->shards().size(), 3u);
    // verify: rows decode, counts match, every key on its ring's shard.
    std::string vout, verr;
    EXPECT_EQ(
        RunCli(&dump::RunDump, {"ps-dump", "verify", cluster}, &vout, &verr), 0)
        << vout << verr;
    ExpectSameTables(ExportAll(embedded), ExportAll(cluster),
                     /*with_frequency=*/true,
                     absl::StrCat("cache_rows ", cache_rows));
  }

  // 1 scheduler, 2 servers (--sync_mode=sync when `sync_servers`) and one
  // ps-train in `mode`, whose modes disagree: ps-train fails at its first
  // push with `want` (what the servers say, up to the table's name) and
  // no server applied anything.
  void ExpectModesRefused(bool sync_servers, const std::string& mode,
                          const std::string& want) {
    const std::string root = dir_.Sub(absl::StrCat("disagree-", mode));
    const ReservedPort held;  // for the processes' life
    const int port = held.port();
    ASSERT_OK_AND_ASSIGN(std::unique_ptr<ChildProcess> sched,
                         ChildProcess::Start(PsSchedulerOptions(port, 2, 1)));
    std::vector<std::unique_ptr<ChildProcess>> servers;
    for (int s = 0; s < 2; ++s) {
      ChildOptions o = ClusterServerOptions(
          port, absl::StrCat("server-", s), absl::StrCat(root, "/server-", s),
          sync_servers ? std::vector<std::string>{"--sync_mode=sync"}
                       : std::vector<std::string>{});
      o.ready_prefix.clear();  // blocks until the cluster is complete
      ASSERT_OK_AND_ASSIGN(auto server, ChildProcess::Start(o));
      servers.push_back(std::move(server));
    }
    ChildOptions wo;
    wo.binary = ::psdb::testing::BuiltBinary("tools/ps-train");
    wo.env = {{"PS_NODE_ID", "worker-0"}};
    wo.args = TrainFlags(data_, root + "/ckpt", 0);
    for (size_t i = 0; i < wo.args.size(); ++i) {
      if (wo.args[i] == "--mode") wo.args[i + 1] = mode;
    }
    wo.args.insert(wo.args.end(),
                   {"--store", absl::StrCat("scheduler:", sched->ready_value()),
                    "--dense", "ps"});
    ASSERT_OK_AND_ASSIGN(auto worker, ChildProcess::Start(wo));
    ASSERT_OK_AND_ASSIGN(int status, worker->Wait(absl::Minutes(3)));
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 1)
        << worker->Stderr();
    // "ps-train: FAILED_PRECONDITION: server 127.0.0.1:P: <want>T': push
    // refused, nothing applied", T the first table pushed.
    EXPECT_THAT(worker->Stderr(),
                HasSubstr("ps-train: FAILED_PRECONDITION: server 127.0.0.1:"));
    EXPECT_THAT(worker->Stderr(), HasSubstr(want));
    EXPECT_THAT(worker->Stderr(),
                HasSubstr("': push refused, nothing applied"));
    EXPECT_THAT(worker->Stderr(), Not(HasSubstr("empty batch")));
    // Nothing applied: every table of both servers is still at step 0.
    ASSERT_OK_AND_ASSIGN(auto reader,
                         rpc::OpenSchedulerRemoteClient(sched->ready_value()));
    ASSERT_OK_AND_ASSIGN(StoreStats stats, reader->Stats());
    EXPECT_GE(stats.tables.size(), 4u);  // wide, deep, linear and MLP tables
    for (const TableStats& t : stats.tables) EXPECT_EQ(t.step, 0) << t.name;
    for (auto& server : servers) {
      server->Signal(SIGTERM);
      ASSERT_OK_AND_ASSIGN(int st, server->Wait());
      EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0) << server->Stderr();
    }
  }

  ScratchDir dir_;
  const std::string data_ = dir_.Sub("data");
};

// ps-train's default --mode sync against servers started without
// --sync_mode=sync: refused at the first push, naming both modes and the
// flags (it failed mid-run with "table wide_linear: empty batch" before,
// or with one server trained as async without a word).
TEST_F(ClusterTrainTest, SyncWorkerAgainstAsyncServersIsRefusedAtItsFirstPush) {
  ExpectModesRefused(
      /*sync_servers=*/false, "sync",
      "ps-server runs --sync_mode=async but this worker pushes synchronously "
      "(ps-train --mode sync, or push_to_every_server): start every "
      "ps-server with --sync_mode=sync, or run ps-train with --mode async; "
      "table '");
}

// The reverse: ps-train --mode async against servers started with
// --sync_mode=sync (which would hold its pushes for steps that other
// servers never complete).
TEST_F(ClusterTrainTest, AsyncWorkerAgainstSyncServersIsRefusedAtItsFirstPush) {
  ExpectModesRefused(
      /*sync_servers=*/true, "async",
      "ps-server runs --sync_mode=sync but this worker pushes "
      "asynchronously (ps-train --mode async, or no push_to_every_server): "
      "start every ps-server with --sync_mode=async, or run ps-train with "
      "--mode sync and --store scheduler:HOST:PORT; table '");
}

TEST_F(ClusterTrainTest, SyncOneWorkerThreeServersEqualsEmbeddedNoCache) {
  ExpectSameExports(0);
}

TEST_F(ClusterTrainTest, SyncOneWorkerThreeServersEqualsEmbeddedWithCache) {
  ExpectSameExports(4096);
}

// Two sync workers with the worker cache train exactly what two without it
// do (values, optimizer state, update steps and counts): with 2+ workers a
// cache (--cache_rows given; none by default) pushes every step's gradients
// through to the servers, where a write-back cache would write each
// worker's copy of a row back over the other's updates.
TEST_F(ClusterTrainTest, TwoSyncWorkersWithTheCacheEqualTwoWithout) {
  std::string cached, uncached;
  ASSERT_NO_FATAL_FAILURE(Cluster(4096, &cached, 2));
  ASSERT_NO_FATAL_FAILURE(Cluster(0, &uncached, 2));
  ExpectSameTables(ExportAll(uncached), ExportAll(cached),
                   /*with_frequency=*/false, "2 sync workers, cache 4096");
  // The servers average the two workers' batch means: the wide FTRL is at
  // the per-example scale of 2 x 64 examples, beta 1 (train/wide_deep.h).
  EXPECT_EQ(WideOptimizer(cached).initial_accumulator, 1.0f / (128 * 128));
}

// Two async workers with SSP staleness 1 against 2 (async) servers: both
// finish, each trains its half of the data, rank 0 writes one verified
// cluster checkpoint and rank 1 its reports under CDIR/rank-1.
TEST_F(ClusterTrainTest, TwoAsyncWorkersWithStalenessShareOneCheckpoint) {
  const ReservedPort held;  // for the processes' life
  const int port = held.port();
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<ChildProcess> sched,
                       ChildProcess::Start(PsSchedulerOptions(port, 2, 2)));
  std::vector<std::unique_ptr<ChildProcess>> servers, workers;
  for (int s = 0; s < 2; ++s) {
    ChildOptions o = ClusterServerOptions(port, absl::StrCat("server-", s),
                                          dir_.Sub(absl::StrCat("as-", s)));
    o.ready_prefix.clear();  // blocks until the cluster is complete
    ASSERT_OK_AND_ASSIGN(auto server, ChildProcess::Start(o));
    servers.push_back(std::move(server));
  }
  const std::string ckpt = dir_.Sub("async-ckpt");
  for (int w = 0; w < 2; ++w) {
    ChildOptions o;
    o.binary = ::psdb::testing::BuiltBinary("tools/ps-train");
    o.env = {{"PS_NODE_ID", absl::StrCat("worker-", w)}};
    o.args = TrainFlags(data_, ckpt, 0);
    for (size_t i = 0; i < o.args.size(); ++i) {
      if (o.args[i] == "--mode") o.args[i + 1] = "async";
    }
    o.args.insert(o.args.end(),
                  {"--staleness", "1", "--store",
                   absl::StrCat("scheduler:", sched->ready_value())});
    ASSERT_OK_AND_ASSIGN(auto worker, ChildProcess::Start(o));
    workers.push_back(std::move(worker));
  }
  for (auto& worker : workers) {
    ASSERT_OK_AND_ASSIGN(int status, worker->Wait(absl::Minutes(3)));
    ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0)
        << worker->Stderr();
  }
  std::string out, err;
  EXPECT_EQ(RunCli(&dump::RunDump, {"ps-dump", "verify", ckpt}, &out, &err), 0)
      << out << err;
  ASSERT_OK_AND_ASSIGN(auto reader, ckpt::CheckpointReader::Open(ckpt));
  EXPECT_EQ(reader->shards().size(), 2u);
  // Each async push is applied alone: the wide FTRL is at the per-example
  // scale of one worker's 64 examples.
  EXPECT_EQ(WideOptimizer(ckpt).initial_accumulator, 1.0f / (64 * 64));
  // 640 rows in 2 files, one file per rank: 320 samples each.
  for (const std::string& summary :
       {ckpt + "/summary.json", ckpt + "/rank-1/summary.json"}) {
    std::ifstream in(summary);
    std::stringstream ss;
    ss << in.rdbuf();
    EXPECT_THAT(ss.str(), HasSubstr("\"samples\": 320,")) << summary;
  }
  for (auto& server : servers) {
    server->Signal(SIGTERM);
    ASSERT_OK_AND_ASSIGN(int st, server->Wait());
    EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0) << server->Stderr();
  }
}

}  // namespace
}  // namespace psdb::train
