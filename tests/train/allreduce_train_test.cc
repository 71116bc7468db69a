// The parameter-server + AllReduce hybrid on real processes (issue 17):
// ps-scheduler, 2 sync ps-servers and two ps-train workers. With
// --dense=allreduce (the default for 2 sync workers) the dense weights are
// replicated on both workers and averaged with gloo, whose group forms
// through the scheduler; embeddings still go through psdb. The replicas'
// fingerprints agree after every step, and the final model (rank 0 writes
// the dense rows back before the cluster checkpoint) equals, to 1e-6, the
// --dense=ps sync run on the same data.
#include <sys/wait.h>

#include <cmath>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "psdb/checkpoint_reader.h"
#include "rocksdb/iterator.h"
#include "tests/testing/child_process.h"
#include "tests/testing/test_util.h"

namespace psdb::train {
namespace {

using ::psdb::testing::ChildOptions;
using ::psdb::testing::ChildProcess;
using ::psdb::testing::ClusterServerOptions;
using ::psdb::testing::PsSchedulerOptions;
using ::psdb::testing::ReservedPort;
using ::psdb::testing::ScratchDir;
using ::testing::HasSubstr;

constexpr int kWorkers = 2;

struct TrainRun {
  std::string ckpt;
  std::vector<std::string> logs;  // per worker rank
};

// Every row of every table of a cluster checkpoint, by table and key.
std::map<std::string, std::map<uint64_t, ckpt::DecodedRow>> ReadModel(
    const std::string& ckpt) {
  std::map<std::string, std::map<uint64_t, ckpt::DecodedRow>> model;
  auto reader = ckpt::CheckpointReader::Open(ckpt);
  EXPECT_OK(reader);
  if (!reader.ok()) return model;
  for (const ckpt::TableInfo& t : (*reader)->tables()) {
    for (size_t s = 0; s < (*reader)->shards().size(); ++s) {
      auto it = (*reader)->NewIterator(s, t.spec.name);
      EXPECT_OK(it);
      if (!it.ok()) continue;
      for ((*it)->SeekToFirst(); (*it)->Valid(); (*it)->Next()) {
        ckpt::DecodedRow row;
        EXPECT_OK((*reader)->Decode(
            s, t, absl::string_view((*it)->key().data(), (*it)->key().size()),
            absl::string_view((*it)->value().data(), (*it)->value().size()),
            &row));
        model[t.spec.name][row.key] = row;
      }
    }
  }
  return model;
}

// step -> fingerprint from a worker's "dense: step N fingerprint X" lines.
std::map<int, std::string> Fingerprints(const std::string& log) {
  std::map<int, std::string> out;
  for (absl::string_view line : absl::StrSplit(log, '\n')) {
    if (!absl::StartsWith(line, "dense: step ")) continue;
    std::vector<std::string> words = absl::StrSplit(line, ' ');
    int step = 0;
    if (words.size() == 5 && absl::SimpleAtoi(words[2], &step)) {
      out[step] = words[4];
    }
  }
  return out;
}

class AllReduceTrainTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ChildOptions gen;
    gen.binary = ::psdb::testing::BuiltBinary("tools/ps-train");
    // 2 files of 320 rows: one per worker, 5 steps of 64 each.
    gen.args = {"gen", "--out",         data_, "--seed",
                "3",   "--train_rows",  "640", "--test_rows",
                "64",  "--train_files", "2",   "--min_vocab",
                "20",  "--max_vocab",   "400"};
    ASSERT_OK_AND_ASSIGN(auto child, ChildProcess::Start(gen));
    ASSERT_OK(child->WaitForSuccess(absl::Minutes(1)));
  }

  // 1 scheduler + 2 sync servers + 2 ps-train workers with `dense_flags`.
  void Train(const std::string& name, std::vector<std::string> dense_flags,
             TrainRun* run) {
    const std::string root = dir_.Sub(name);
    run->ckpt = root + "/ckpt";
    const ReservedPort held;  // for the processes' life
    const int port = held.port();
    ASSERT_OK_AND_ASSIGN(std::unique_ptr<ChildProcess> sched,
                         ChildProcess::Start(PsSchedulerOptions(port, 2, 2)));
    std::vector<std::unique_ptr<ChildProcess>> servers, workers;
    for (int s = 0; s < 2; ++s) {
      ChildOptions o = ClusterServerOptions(port, absl::StrCat("server-", s),
                                            absl::StrCat(root, "/server-", s),
                                            {"--sync_mode=sync"});
      o.ready_prefix.clear();  // blocks until the cluster is complete
      ASSERT_OK_AND_ASSIGN(auto server, ChildProcess::Start(o));
      servers.push_back(std::move(server));
    }
    for (int w = 0; w < kWorkers; ++w) {
      ChildOptions o;
      o.binary = ::psdb::testing::BuiltBinary("tools/ps-train");
      o.env = {{"PS_NODE_ID", absl::StrCat("worker-", w)}};
      o.args = {
          "--data",           data_,
          "--checkpoint_dir", run->ckpt,
          "--mode",           "sync",
          "--batch_size",     "64",
          "--deep_dim",       "4",
          "--hidden",         "8,4",
          "--block_dim",      "16",
          "--seed",           "7",
          "--log_every",      "1",
          "--cache_rows",     "0",
          "--valid_fraction", "0",
          "--no_progress",    "--no_plot",
          "--store",          absl::StrCat("scheduler:", sched->ready_value())};
      o.args.insert(o.args.end(), dense_flags.begin(), dense_flags.end());
      ASSERT_OK_AND_ASSIGN(auto worker, ChildProcess::Start(o));
      workers.push_back(std::move(worker));
    }
    // Ranks follow registration order, not the node ids: take the rank
    // from each worker's log.
    run->logs.assign(kWorkers, "");
    for (auto& worker : workers) {
      ASSERT_OK_AND_ASSIGN(int status, worker->Wait(absl::Minutes(3)));
      ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0)
          << worker->Stderr();
      const std::string log = worker->Stderr();
      const int rank = absl::StrContains(log, "rank 0 of 2") ? 0 : 1;
      EXPECT_THAT(log, HasSubstr(absl::StrCat("rank ", rank, " of 2")));
      run->logs[rank] = log;
    }
    for (auto& server : servers) {
      server->Signal(SIGTERM);
      ASSERT_OK_AND_ASSIGN(int st, server->Wait());
      EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0) << server->Stderr();
    }
  }

  ScratchDir dir_;
  const std::string data_ = dir_.Sub("data");
};

TEST_F(AllReduceTrainTest, ReplicasAgreeEveryStepAndTheModelEqualsThePsRun) {
  TrainRun ps, allreduce;
  ASSERT_NO_FATAL_FAILURE(Train("ps", {"--dense=ps"}, &ps));
  // No --dense: allreduce is the default for 2 sync workers.
  ASSERT_NO_FATAL_FAILURE(
      Train("allreduce", {"--collective_host=127.0.0.1"}, &allreduce));

  for (int w = 0; w < kWorkers; ++w) {
    EXPECT_THAT(ps.logs[w], HasSubstr("; dense ps;"));
    EXPECT_THAT(ps.logs[w], ::testing::Not(HasSubstr("dense: step")));
    EXPECT_THAT(allreduce.logs[w],
                HasSubstr("; dense allreduce (gloo (tcp, 2 ranks));"));
  }
  // The replicas are identical after every step.
  const std::map<int, std::string> fp0 = Fingerprints(allreduce.logs[0]);
  const std::map<int, std::string> fp1 = Fingerprints(allreduce.logs[1]);
  ASSERT_EQ(fp0.size(), 5u) << allreduce.logs[0];
  EXPECT_EQ(fp0.begin()->first, 1);
  EXPECT_EQ(fp0.rbegin()->first, 5);
  EXPECT_EQ(fp0, fp1);
  // ... and they train: no two steps leave the same weights.
  EXPECT_NE(fp0.at(1), fp0.at(5));

  // The final models: every table, every key, values and optimizer state
  // to 1e-6 (the dense tables included: rank 0 wrote them back).
  const auto want = ReadModel(ps.ckpt);
  const auto got = ReadModel(allreduce.ckpt);
  ASSERT_EQ(got.size(), want.size());
  ASSERT_TRUE(want.contains("mlp.w0") && want.contains("wide_linear"));
  double max_diff = 0;
  for (const auto& [table, rows] : want) {
    ASSERT_TRUE(got.contains(table)) << table;
    const auto& got_rows = got.at(table);
    ASSERT_EQ(got_rows.size(), rows.size()) << table;
    for (const auto& [key, row] : rows) {
      ASSERT_TRUE(got_rows.contains(key)) << table << " key " << key;
      const ckpt::DecodedRow& g = got_rows.at(key);
      ASSERT_EQ(g.values.size(), row.values.size());
      ASSERT_EQ(g.state.size(), row.state.size());
      for (size_t i = 0; i < row.values.size(); ++i) {
        max_diff =
            std::max<double>(max_diff, std::fabs(g.values[i] - row.values[i]));
        ASSERT_NEAR(g.values[i], row.values[i], 1e-6)
            << table << " key " << key << " value " << i;
      }
      for (size_t i = 0; i < row.state.size(); ++i) {
        ASSERT_NEAR(g.state[i], row.state[i], 1e-6)
            << table << " key " << key << " state " << i;
      }
    }
  }
  std::printf("largest value difference between the runs: %g\n", max_diff);
  // The dense tables did train: the last step is recorded in their rows.
  EXPECT_EQ(got.at("mlp.w0").begin()->second.header.last_update_step, 5);
}

// --model dcn: the cross layers are dense tensors too, replicated and
// averaged with the MLP, and end equal to the --dense=ps run's.
TEST_F(AllReduceTrainTest, DcnCrossLayersAreReplicatedToo) {
  TrainRun ps, allreduce;
  ASSERT_NO_FATAL_FAILURE(
      Train("dcn-ps", {"--dense=ps", "--model=dcn", "--cross_layers=1"}, &ps));
  ASSERT_NO_FATAL_FAILURE(
      Train("dcn-allreduce",
            {"--dense=allreduce", "--model=dcn", "--cross_layers=1",
             "--collective_host=127.0.0.1"},
            &allreduce));
  const std::map<int, std::string> fp0 = Fingerprints(allreduce.logs[0]);
  ASSERT_EQ(fp0.size(), 5u) << allreduce.logs[0];
  EXPECT_EQ(fp0, Fingerprints(allreduce.logs[1]));
  const auto want = ReadModel(ps.ckpt);
  const auto got = ReadModel(allreduce.ckpt);
  for (const char* table : {"cross.w0", "cross.b0", "cross.out"}) {
    ASSERT_TRUE(want.contains(table) && got.contains(table)) << table;
    ASSERT_EQ(got.at(table).size(), want.at(table).size()) << table;
    for (const auto& [key, row] : want.at(table)) {
      ASSERT_TRUE(got.at(table).contains(key)) << table << " key " << key;
      const ckpt::DecodedRow& g = got.at(table).at(key);
      ASSERT_EQ(g.values.size(), row.values.size());
      for (size_t i = 0; i < row.values.size(); ++i) {
        ASSERT_NEAR(g.values[i], row.values[i], 1e-6)
            << table << " key " << key << " value " << i;
      }
      EXPECT_EQ(g.header.last_update_step, 5) << table << " key " << key;
    }
  }
}

}  // namespace
}  // namespace psdb::train
