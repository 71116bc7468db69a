// Read-only serving replicas (rpc/server/checkpoint_follower.h, PsServer::
// StartServing) over checkpoints a real training Store writes: the values
// served are the checkpoint's, newer checkpoints are swapped in (warm),
// half-written ones are ignored and corrupt ones refused, concurrent
// readers never see a mix of two checkpoints, writes are refused and no
// file of the checkpoint root changes.
#include <signal.h>
#include <sys/stat.h>

#include <atomic>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "gmock/gmock.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "manifest/manifest.h"
#include "psdb/client_url.h"
#include "psdb/store.h"
#include "rpc/control/cluster_checkpoint.h"
#include "rpc/server/checkpoint_follower.h"
#include "rpc/server/server.h"
#include "rpc/wire/psdb.grpc.pb.h"
#include "tests/testing/child_process.h"
#include "tests/testing/test_util.h"
#include "util/status_macros.h"

namespace psdb::rpc {
namespace {

namespace fs = std::filesystem;
using ::psdb::testing::ScratchDir;
using ::psdb::testing::WaitFor;
using ::testing::HasSubstr;

constexpr int kDim = 8;
constexpr int kKeys = 64;

TableSpec Spec() {
  TableSpec spec;
  spec.name = "emb";
  spec.dim = kDim;
  spec.optimizer.kind = optim::OptimizerKind::kAdagrad;
  spec.optimizer.learning_rate = 0.1f;
  return spec;
}

std::vector<uint64_t> Keys() {
  std::vector<uint64_t> keys;
  for (int i = 0; i < kKeys; ++i) keys.push_back(1000 + 7 * i);
  return keys;
}

// A training store under dir/train writing checkpoints into dir/ckpt.
class Trainer {
 public:
  explicit Trainer(const ScratchDir& dir) : root_(dir.Sub("ckpt")) {
    auto store = Store::Open({}, dir.Sub("train"));
    EXPECT_TRUE(store.ok()) << store.status();
    store_ = *std::move(store);
    EXPECT_TRUE(store_->CreateTable(Spec()).ok());
  }

  // One push of gradient g to every key (every row changes), then a
  // checkpoint; returns the rows as the checkpoint holds them.
  std::vector<float> StepAndCheckpoint(float g) {
    const std::vector<uint64_t> keys = Keys();
    std::vector<float> grads(keys.size() * kDim);
    for (size_t i = 0; i < grads.size(); ++i) grads[i] = g * (1 + i % 5);
    PushOptions push;
    push.step = ++step_;
    EXPECT_TRUE(store_->Push("emb", keys, grads, push).ok());
    auto info = store_->Checkpoint(root_, checkpoint_options_);
    EXPECT_TRUE(info.ok()) << info.status();
    last_dir_ = info->path;
    return Values(*store_);
  }

  static std::vector<float> Values(Store& store) {
    std::vector<float> out(kKeys * kDim);
    PullOptions serving;
    serving.serving = true;
    EXPECT_TRUE(store.Pull("emb", Keys(), absl::MakeSpan(out), serving).ok());
    return out;
  }

  const std::string& root() const { return root_; }
  const std::string& last_dir() const { return last_dir_; }
  // The id of the last checkpoint written (its directory's name).
  std::string last_id() const { return fs::path(last_dir_).filename(); }
  int64_t step() const { return step_; }
  // Checkpoints kept under the root (CheckpointOptions::keep_last).
  void set_keep_last(int n) { checkpoint_options_.keep_last = n; }

 private:
  std::string root_;
  CheckpointOptions checkpoint_options_;
  std::unique_ptr<Store> store_;
  int64_t step_ = 0;
  std::string last_dir_;
};

FollowerOptions Follow(const std::string& root) {
  FollowerOptions options;
  options.root = root;
  options.interval = absl::ZeroDuration();  // the tests call Poll
  options.store.memory_budget_bytes = 64ull << 20;
  return options;
}

// Every key's row as the follower's snapshot serves it now.
std::vector<float> Served(CheckpointFollower& f) {
  std::vector<float> out(kKeys * kDim);
  EXPECT_OK(f.Acquire()->Pull("emb", Keys(), absl::MakeSpan(out)));
  return out;
}

bool SameBits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() &&
         std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

// Path -> (size, mtime ns, contents) of every regular file under `root`.
std::map<std::string, std::string> Fingerprint(const std::string& root) {
  std::map<std::string, std::string> out;
  for (const auto& e : fs::recursive_directory_iterator(root)) {
    if (!e.is_regular_file()) continue;
    struct stat st {};
    stat(e.path().c_str(), &st);
    std::ifstream in(e.path(), std::ios::binary);
    std::stringstream bytes;
    bytes << in.rdbuf();
    out[e.path().string()] =
        absl::StrCat(st.st_size, "/", st.st_mtim.tv_sec, ".",
                     st.st_mtim.tv_nsec, "/", bytes.str());
  }
  return out;
}

// A checkpoint opened whole (here: every one, as no delta may be held over
// a base) is warmed from the one served before.
TEST(CheckpointFollowerTest, ServesTheNewestCheckpointAndSwapsWarm) {
  ScratchDir dir;
  Trainer trainer(dir);
  const std::vector<float> v1 = trainer.StepAndCheckpoint(0.5f);
  FollowerOptions options = Follow(trainer.root());
  options.max_delta_bytes = 1;
  ASSERT_OK_AND_ASSIGN(auto follower, CheckpointFollower::Start(options));
  EXPECT_TRUE(SameBits(Served(*follower), v1));
  ServingStatus status = follower->status();
  EXPECT_EQ(status.step, 1);
  EXPECT_EQ(status.swaps, 0u);
  EXPECT_EQ(status.checkpoint_id, fs::path(trainer.last_dir()).filename());
  ASSERT_OK_AND_ASSIGN(bool swapped, follower->Poll());
  EXPECT_FALSE(swapped);  // nothing newer

  // The first pulls read every row from the files.
  TableStats before = follower->Acquire()->stores.at(0)->Stats().tables.at(0);
  EXPECT_EQ(before.misses, static_cast<uint64_t>(kKeys));
  EXPECT_EQ(before.created, 0u);
  EXPECT_EQ(before.step, 1);

  const std::vector<float> v2 = trainer.StepAndCheckpoint(-0.25f);
  ASSERT_FALSE(SameBits(v1, v2));
  ASSERT_OK_AND_ASSIGN(swapped, follower->Poll());
  EXPECT_TRUE(swapped);
  status = follower->status();
  EXPECT_EQ(status.step, 2);
  EXPECT_EQ(status.swaps, 1u);
  EXPECT_FALSE(status.last_swap.delta);
  // Warmed: the rows the old checkpoint held in memory were loaded before
  // the swap, so the next pulls are all hits.
  const TableStats warmed =
      follower->Acquire()->stores.at(0)->Stats().tables.at(0);
  EXPECT_EQ(warmed.memory_rows, static_cast<uint64_t>(kKeys));
  EXPECT_EQ(warmed.step, 2);
  EXPECT_TRUE(SameBits(Served(*follower), v2));
  const TableStats after =
      follower->Acquire()->stores.at(0)->Stats().tables.at(0);
  EXPECT_EQ(after.hits - warmed.hits, static_cast<uint64_t>(kKeys));
  EXPECT_EQ(after.misses, warmed.misses);
}

TEST(CheckpointFollowerTest, MissingKeysGetTheServingDefaultAndCreateNothing) {
  ScratchDir dir;
  Trainer trainer(dir);
  trainer.StepAndCheckpoint(0.5f);
  ASSERT_OK_AND_ASSIGN(auto follower,
                       CheckpointFollower::Start(Follow(trainer.root())));
  std::shared_ptr<ServingSnapshot> snap = follower->Acquire();
  const std::vector<uint64_t> missing = {5, 6};
  std::vector<float> got(2 * kDim), want(2 * kDim);
  // A non-serving pull is served as a serving one by a read-only store.
  ASSERT_OK(snap->stores.at(0)->Pull("emb", missing, absl::MakeSpan(got)));
  for (int i = 0; i < 2; ++i) {
    DefaultRow(Spec(), missing[i],
               absl::MakeSpan(want).subspan(i * kDim, kDim));
  }
  EXPECT_TRUE(SameBits(got, want));
  RowBatch rows;
  ASSERT_OK(snap->stores.at(0)->PullRows("emb", missing, &rows));
  EXPECT_EQ(rows.values, want);
  const TableStats stats = snap->stores.at(0)->Stats().tables.at(0);
  EXPECT_EQ(stats.created, 0u);
  EXPECT_EQ(stats.memory_rows, 0u);
}

// Breaks the hard link and flips one byte in the middle of the newest SST
// of `ckpt_dir` that `older_dir` does not share, so only this checkpoint
// is damaged.
void CorruptNewSst(const std::string& ckpt_dir, const std::string& older_dir) {
  std::string victim;
  for (const auto& e : fs::directory_iterator(ckpt_dir + "/shard-0")) {
    const std::string name = e.path().filename();
    if (!absl::EndsWith(name, ".sst")) continue;
    if (fs::exists(older_dir + "/shard-0/" + name)) continue;
    if (victim.empty() || name > fs::path(victim).filename().string()) {
      victim = e.path();
    }
  }
  ASSERT_FALSE(victim.empty()) << "no SST of its own in " << ckpt_dir;
  std::string bytes;
  {
    std::ifstream in(victim, std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    bytes = ss.str();
  }
  ASSERT_GT(bytes.size(), 100u);
  bytes[bytes.size() / 3] ^= 0x5a;
  const std::string tmp = victim + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary);
    out << bytes;
  }
  fs::rename(tmp, victim);
}

TEST(CheckpointFollowerTest, IgnoresHalfWrittenAndRefusesCorruptCheckpoints) {
  ScratchDir dir;
  Trainer trainer(dir);
  const std::vector<float> v1 = trainer.StepAndCheckpoint(0.5f);
  const std::string first = trainer.last_dir();
  ASSERT_OK_AND_ASSIGN(auto follower,
                       CheckpointFollower::Start(Follow(trainer.root())));

  // Half-written: a checkpoint directory with no manifest.
  fs::create_directories(trainer.root() + "/ckpt-000000000099-000099/shard-0");
  ASSERT_OK_AND_ASSIGN(bool swapped, follower->Poll());
  EXPECT_FALSE(swapped);
  EXPECT_EQ(follower->status().refused, 0u);
  fs::remove_all(trainer.root() + "/ckpt-000000000099-000099");

  // Corrupt: a flipped byte in an SST only the new checkpoint has.
  trainer.StepAndCheckpoint(-0.25f);
  const std::string corrupt = trainer.last_dir();
  CorruptNewSst(corrupt, first);
  ASSERT_OK_AND_ASSIGN(swapped, follower->Poll());
  EXPECT_FALSE(swapped);
  ServingStatus status = follower->status();
  EXPECT_EQ(status.refused, 1u);
  EXPECT_THAT(status.last_refusal, HasSubstr(corrupt));
  EXPECT_EQ(status.step, 1);
  EXPECT_TRUE(SameBits(Served(*follower), v1));
  // Refused once, not re-verified at every look.
  ASSERT_OK_AND_ASSIGN(swapped, follower->Poll());
  EXPECT_FALSE(swapped);
  EXPECT_EQ(follower->status().refused, 1u);

  // A good newer one is taken.
  const std::vector<float> v3 = trainer.StepAndCheckpoint(0.125f);
  ASSERT_OK_AND_ASSIGN(swapped, follower->Poll());
  EXPECT_TRUE(swapped);
  EXPECT_EQ(follower->status().step, 3);
  EXPECT_TRUE(SameBits(Served(*follower), v3));
}

// The files of `ckpt_dir`'s shard 0 as the manifest lists them, split by
// whether `older_dir`'s shard 0 has the same file (the same inode: shared
// by hard link): {shared count, new count, new bytes}.
struct FileSplit {
  uint64_t shared = 0, fresh = 0, fresh_bytes = 0;
};
FileSplit SplitFiles(const std::string& ckpt_dir, const std::string& older) {
  absl::StatusOr<v1::Manifest> m = ReadManifest(ckpt_dir);
  EXPECT_TRUE(m.ok()) << m.status();
  FileSplit out;
  for (const v1::ShardFile& f : m->shards(0).files()) {
    struct stat a {
    }, b{};
    const bool both =
        stat((ckpt_dir + "/shard-0/" + f.name()).c_str(), &a) == 0 &&
        stat((older + "/shard-0/" + f.name()).c_str(), &b) == 0 &&
        a.st_ino == b.st_ino;
    if (both) {
      ++out.shared;
    } else {
      ++out.fresh;
      out.fresh_bytes += f.size();
    }
  }
  return out;
}

// After the first checkpoint (verified whole), a swap reads only the files
// the replica has not verified: those the new checkpoint does not share by
// hard link with the one served. Their rows are all checked.
TEST(CheckpointFollowerTest, VerifiesOnlyTheFilesItHasNotSeen) {
  ScratchDir dir;
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<Store> store,
                       Store::Open({}, dir.Sub("train")));
  ASSERT_OK(store->CreateTable(Spec()));
  const std::string root = dir.Sub("ckpt");
  auto push = [&](uint64_t first, uint64_t n, int64_t step) {
    std::vector<uint64_t> keys;
    for (uint64_t k = first; k < first + n; ++k) keys.push_back(k);
    std::vector<float> grads(keys.size() * kDim, 0.5f);
    PushOptions options;
    options.step = step;
    ASSERT_OK(store->Push("emb", keys, grads, options));
  };
  push(0, 1000, 1);
  ASSERT_OK_AND_ASSIGN(CheckpointInfo first, store->Checkpoint(root));
  ASSERT_OK_AND_ASSIGN(auto follower, CheckpointFollower::Start(Follow(root)));
  SwapReport report = follower->status().last_swap;
  ASSERT_OK_AND_ASSIGN(v1::Manifest m1, ReadManifest(first.path));
  EXPECT_EQ(report.rows_verified, 1000u);
  EXPECT_EQ(report.files_verified,
            static_cast<uint64_t>(m1.shards(0).files_size()));
  EXPECT_EQ(report.files_reused, 0u);
  EXPECT_GT(report.bytes_read, report.bytes_verified);  // + RocksDB's open

  push(500, 10, 2);  // 10 rows change
  ASSERT_OK_AND_ASSIGN(CheckpointInfo second, store->Checkpoint(root));
  const FileSplit split = SplitFiles(second.path, first.path);
  ASSERT_GT(split.shared, 0u);
  ASSERT_OK_AND_ASSIGN(bool swapped, follower->Poll());
  ASSERT_TRUE(swapped);
  report = follower->status().last_swap;
  EXPECT_EQ(report.checkpoint_id, fs::path(second.path).filename());
  EXPECT_EQ(report.step, 2);
  EXPECT_EQ(report.rows_verified, 10u);
  EXPECT_EQ(report.files_verified, split.fresh);
  EXPECT_EQ(report.bytes_verified, split.fresh_bytes);
  EXPECT_EQ(report.files_reused, split.shared);
  EXPECT_GT(report.bytes_read, 0u);
  std::vector<float> want(kDim), got(kDim);
  PullOptions serving;
  serving.serving = true;
  ASSERT_OK(store->Pull("emb", {505}, absl::MakeSpan(want), serving));
  ASSERT_OK(follower->Acquire()->Pull("emb", {505}, absl::MakeSpan(got)));
  EXPECT_TRUE(SameBits(got, want));
}

// Every row (values, state and header) of `keys` in table `table` as the
// snapshot serves it, against the same checkpoint opened afresh.
void ExpectServesTheCheckpoint(const ServingSnapshot& snap,
                               const std::string& table,
                               const std::vector<uint64_t>& keys) {
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<Store> fresh,
                       Store::OpenCheckpoint({}, snap.dir, 0));
  ASSERT_OK_AND_ASSIGN(TableSpec spec, fresh->GetTable(table));
  std::vector<float> want(keys.size() * spec.dim), got(want.size());
  PullOptions serving;
  serving.serving = true;
  ASSERT_OK(fresh->Pull(table, keys, absl::MakeSpan(want), serving));
  ASSERT_OK(snap.Pull(table, keys, absl::MakeSpan(got)));
  EXPECT_TRUE(SameBits(got, want)) << table << " at " << snap.dir;
  RowBatch want_rows, got_rows;
  ASSERT_OK(fresh->PullRows(table, keys, &want_rows));
  ASSERT_OK(snap.PullRows(table, keys, &got_rows));
  EXPECT_EQ(got_rows.values, want_rows.values) << table << " at " << snap.dir;
  EXPECT_EQ(got_rows.state, want_rows.state);
  EXPECT_EQ(got_rows.headers, want_rows.headers);
}

// A training store with tables "emb" and "wide" checkpointing under
// dir/ckpt after pushes that change some rows and add others.
class TwoTableTrainer {
 public:
  TwoTableTrainer(const ScratchDir& dir, int64_t wide_ttl_steps)
      : root_(dir.Sub("ckpt")) {
    auto store = Store::Open({}, dir.Sub("train"));
    EXPECT_OK(store.status());
    store_ = *std::move(store);
    TableSpec wide = Spec();
    wide.name = "wide";
    wide.dim = 3;
    wide.optimizer.kind = optim::OptimizerKind::kSgd;
    wide.ttl_steps = wide_ttl_steps;
    EXPECT_OK(store_->CreateTable(Spec()));
    EXPECT_OK(store_->CreateTable(wide));
    for (uint64_t k = 0; k < 2400; ++k) keys_.push_back(k * 13 + 5);
  }

  // Step 1 writes 1500 "emb" and 1000 "wide" rows; each later step
  // changes 60 and 40 spread over those and past them (new rows).
  void StepAndCheckpoint(int64_t step) {
    if (step == 1) {
      Push("emb", kDim, 0, 1500, 1, step);
      Push("wide", 3, 0, 1000, 1, step);
    } else {
      Push("emb", kDim, static_cast<uint64_t>(step) * 37, 60, 31, step);
      Push("wide", 3, static_cast<uint64_t>(step) * 11, 40, 29, step);
    }
    EXPECT_OK(store_->Checkpoint(root_).status());
  }

  const std::string& root() const { return root_; }
  // Every key ever pushed, and some never.
  const std::vector<uint64_t>& keys() const { return keys_; }

 private:
  void Push(const std::string& table, int dim, uint64_t first, uint64_t n,
            uint64_t stride, int64_t step) {
    std::vector<uint64_t> keys;
    for (uint64_t i = 0; i < n; ++i) keys.push_back(keys_[first + i * stride]);
    std::vector<float> grads(keys.size() * dim);
    for (size_t i = 0; i < grads.size(); ++i) grads[i] = 0.01f * (i % 7 + step);
    EXPECT_OK(store_->Push(table, keys, grads, {.step = step}));
  }

  std::string root_;
  std::unique_ptr<Store> store_;
  std::vector<uint64_t> keys_;
};

// Checkpoints that add files are laid over the base store; when RocksDB
// compacts the added files into the last level (here every eighth flush:
// the table is small), whose rows' sequence numbers it zeroes, the
// checkpoint is opened whole. Either way every swap serves exactly what a
// fresh open of its checkpoint serves (changed rows, new rows, untouched
// rows, keys no checkpoint holds, in two tables). (Compacted files the
// replica skips need a table deep enough for non-last levels:
// lay_over_test.cc covers them.)
TEST(CheckpointFollowerTest, LaysCheckpointsOverTheBaseExactly) {
  ScratchDir dir;
  TwoTableTrainer trainer(dir, /*wide_ttl_steps=*/0);
  trainer.StepAndCheckpoint(1);
  ASSERT_OK_AND_ASSIGN(auto follower,
                       CheckpointFollower::Start(Follow(trainer.root())));
  int deltas = 0;
  for (int64_t step = 2; step <= 16; ++step) {
    trainer.StepAndCheckpoint(step);
    ASSERT_OK_AND_ASSIGN(bool swapped, follower->Poll());
    ASSERT_TRUE(swapped);
    const SwapReport report = follower->status().last_swap;
    EXPECT_EQ(report.step, step);
    deltas += report.delta ? 1 : 0;
    std::shared_ptr<ServingSnapshot> snap = follower->Acquire();
    ExpectServesTheCheckpoint(*snap, "emb", trainer.keys());
    ExpectServesTheCheckpoint(*snap, "wide", trainer.keys());
    EXPECT_EQ(snap->Stats().tables.at(0).step, step);
  }
  // Between compactions (at most 2 of the 15 swaps) every swap is a delta.
  EXPECT_GE(deltas, 13);
}

// Rows deleted by TTL are in the files a checkpoint adds as deletions: such
// a checkpoint is opened whole, and served exactly as well.
TEST(CheckpointFollowerTest, OpensWholeACheckpointThatDeletesRows) {
  ScratchDir dir;
  TwoTableTrainer trainer(dir, /*wide_ttl_steps=*/3);
  trainer.StepAndCheckpoint(1);
  ASSERT_OK_AND_ASSIGN(auto follower,
                       CheckpointFollower::Start(Follow(trainer.root())));
  int whole = 0;
  for (int64_t step = 2; step <= 6; ++step) {
    trainer.StepAndCheckpoint(step);
    ASSERT_OK_AND_ASSIGN(bool swapped, follower->Poll());
    ASSERT_TRUE(swapped);
    whole += follower->status().last_swap.delta ? 0 : 1;
    std::shared_ptr<ServingSnapshot> snap = follower->Acquire();
    ExpectServesTheCheckpoint(*snap, "emb", trainer.keys());
    ExpectServesTheCheckpoint(*snap, "wide", trainer.keys());
  }
  // Rows of step 1 expire at the checkpoint of step 5 (5 - 3 > 1).
  EXPECT_GE(whole, 1);
}

// Training prunes old checkpoints (CheckpointOptions::keep_last): the one a
// replica serves may be deleted under it. Its files stay open, so every
// row, also those never read before, is still served.
TEST(CheckpointFollowerTest, KeepsServingACheckpointTrainingDeleted) {
  ScratchDir dir;
  Trainer trainer(dir);
  const std::vector<float> v1 = trainer.StepAndCheckpoint(0.5f);
  ASSERT_OK_AND_ASSIGN(auto follower,
                       CheckpointFollower::Start(Follow(trainer.root())));
  fs::remove_all(trainer.last_dir());
  ASSERT_FALSE(fs::exists(trainer.last_dir()));
  EXPECT_TRUE(SameBits(Served(*follower), v1));
  EXPECT_EQ(follower->Acquire()->stores.at(0)->Stats().tables.at(0).misses,
            static_cast<uint64_t>(kKeys));
}

// serve_versions = 3: the three newest checkpoints swapped in are each
// served exactly (laid over one base, sharing its store), listed newest
// first; an older one is NotFound naming it and the versions held.
TEST(CheckpointFollowerTest, KeepsTheLastServeVersionsReadable) {
  ScratchDir dir;
  Trainer trainer(dir);
  FollowerOptions options = Follow(trainer.root());
  options.serve_versions = 3;
  std::vector<std::vector<float>> values;
  std::vector<std::string> ids;
  values.push_back(trainer.StepAndCheckpoint(0.5f));
  ids.push_back(trainer.last_id());
  ASSERT_OK_AND_ASSIGN(auto follower, CheckpointFollower::Start(options));
  for (int i = 1; i < 4; ++i) {
    values.push_back(trainer.StepAndCheckpoint(0.1f * i));
    ids.push_back(trainer.last_id());
    ASSERT_OK_AND_ASSIGN(bool swapped, follower->Poll());
    ASSERT_TRUE(swapped);
  }
  const std::vector<ServedVersion> held = follower->HeldVersions();
  ASSERT_EQ(held.size(), 3u);
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(held[i].checkpoint_id, ids[3 - i]);
    EXPECT_EQ(held[i].step, 4 - i);
  }
  EXPECT_GT(held[0].seq, held[1].seq);
  EXPECT_GT(held[1].seq, held[2].seq);
  EXPECT_EQ(follower->Acquire()->checkpoint_id, ids[3]);
  for (int v = 1; v < 4; ++v) {
    ASSERT_OK_AND_ASSIGN(std::shared_ptr<ServingSnapshot> snap,
                         follower->Acquire(ids[v]));
    EXPECT_EQ(snap->step, v + 1);
    std::vector<float> out(kKeys * kDim);
    ASSERT_OK(snap->Pull("emb", Keys(), absl::MakeSpan(out)));
    EXPECT_TRUE(SameBits(out, values[v])) << ids[v];
  }
  // Laid over the same base: one store for all three.
  EXPECT_EQ(follower->Acquire(ids[1]).value()->stores.at(0),
            follower->Acquire(ids[3]).value()->stores.at(0));
  const absl::Status gone = follower->Acquire(ids[0]).status();
  EXPECT_THAT(gone, StatusIs(absl::StatusCode::kNotFound));
  EXPECT_THAT(std::string(gone.message()),
              HasSubstr(absl::StrCat("version ", ids[0], " is not held")));
  EXPECT_THAT(
      std::string(gone.message()),
      HasSubstr(absl::StrCat("it holds ", ids[3], ", ", ids[2], ", ", ids[1])));
  options.serve_versions = 0;
  EXPECT_THAT(CheckpointFollower::Start(options).status(),
              StatusIs(absl::StatusCode::kInvalidArgument));
}

// Training keeps one checkpoint (keep_last = 1), so every held version but
// the newest has had its directory deleted: each is still served exactly
// (its files stay open), rows never read before included, until it falls
// out of the window; then it is NotFound, naming it.
TEST(CheckpointFollowerTest, ServesHeldVersionsTrainingDeletedUntilDropped) {
  ScratchDir dir;
  Trainer trainer(dir);
  trainer.set_keep_last(1);
  const std::vector<float> v1 = trainer.StepAndCheckpoint(0.5f);
  const std::string id1 = trainer.last_id();
  ASSERT_OK_AND_ASSIGN(auto follower,
                       CheckpointFollower::Start(Follow(trainer.root())));
  const std::vector<float> v2 = trainer.StepAndCheckpoint(0.25f);
  const std::string id2 = trainer.last_id();
  ASSERT_FALSE(fs::exists(fs::path(trainer.root()) / id1));
  ASSERT_OK_AND_ASSIGN(bool swapped, follower->Poll());
  ASSERT_TRUE(swapped);
  std::vector<float> out(kKeys * kDim);
  ASSERT_OK_AND_ASSIGN(std::shared_ptr<ServingSnapshot> old,
                       follower->Acquire(id1));
  ASSERT_OK(old->Pull("emb", Keys(), absl::MakeSpan(out)));
  EXPECT_TRUE(SameBits(out, v1));
  old.reset();
  const std::vector<float> v3 = trainer.StepAndCheckpoint(0.125f);
  ASSERT_FALSE(fs::exists(fs::path(trainer.root()) / id2));
  ASSERT_OK_AND_ASSIGN(swapped, follower->Poll());
  ASSERT_TRUE(swapped);
  ASSERT_OK_AND_ASSIGN(old, follower->Acquire(id2));
  ASSERT_OK(old->Pull("emb", Keys(), absl::MakeSpan(out)));
  EXPECT_TRUE(SameBits(out, v2));
  old.reset();
  EXPECT_TRUE(SameBits(Served(*follower), v3));
  const absl::Status gone = follower->Acquire(id1).status();
  EXPECT_THAT(gone, StatusIs(absl::StatusCode::kNotFound));
  EXPECT_THAT(std::string(gone.message()), HasSubstr(id1));
  EXPECT_THAT(
      std::string(gone.message()),
      HasSubstr(absl::StrCat("it holds ", trainer.last_id(), ", ", id2)));
}

TEST(CheckpointFollowerTest, StartRefusesARootWithNothingToServe) {
  ScratchDir dir;
  FollowerOptions options = Follow(dir.Sub("nothing"));
  EXPECT_THAT(CheckpointFollower::Start(options).status(),
              StatusIs(absl::StatusCode::kNotFound));
  options.root = "";
  EXPECT_THAT(CheckpointFollower::Start(options).status(),
              StatusIs(absl::StatusCode::kInvalidArgument));
}

// 4 reader threads pull all keys through gRPC while 5 checkpoints are
// swapped in: no request fails and every response is exactly one
// checkpoint's rows.
TEST(ServingServerTest, ConcurrentReadersSeeWholeCheckpointsAcrossSwaps) {
  ScratchDir dir;
  Trainer trainer(dir);
  std::vector<std::vector<float>> versions;
  versions.push_back(trainer.StepAndCheckpoint(0.5f));
  ASSERT_OK_AND_ASSIGN(auto follower,
                       CheckpointFollower::Start(Follow(trainer.root())));
  ServerOptions options;
  options.num_threads = 4;
  ASSERT_OK_AND_ASSIGN(auto server,
                       PsServer::StartServing(options, follower.get()));
  // Every version the readers may see, computed before the swap that
  // makes it visible (the vector is only appended to under `mu`).
  absl::Mutex mu;
  std::atomic<int> failed{0}, mixed{0}, pulls{0};
  std::atomic<bool> stop{false};
  std::vector<std::thread> readers;
  for (int t = 0; t < 4; ++t) {
    readers.emplace_back([&] {
      auto client = OpenParameterClient("servers:" + server->address());
      if (!client.ok()) {
        failed.fetch_add(1);
        return;
      }
      std::vector<float> out(kKeys * kDim);
      for (int i = 0; i < 100000 && !stop.load(); ++i) {
        if (!(*client)->Pull("emb", Keys(), absl::MakeSpan(out), {}).ok()) {
          failed.fetch_add(1);
          continue;
        }
        pulls.fetch_add(1);
        absl::MutexLock l(&mu);
        bool one = false;
        for (const auto& v : versions) one = one || SameBits(out, v);
        if (!one) mixed.fetch_add(1);
      }
    });
  }
  for (int swap = 0; swap < 5; ++swap) {
    const int seen = pulls.load();
    ASSERT_TRUE(WaitFor([&] { return pulls.load() >= seen + 8; }));
    std::vector<float> next = trainer.StepAndCheckpoint(0.1f * (swap + 2));
    {
      absl::MutexLock l(&mu);
      versions.push_back(std::move(next));
    }
    ASSERT_OK_AND_ASSIGN(bool swapped, follower->Poll());
    ASSERT_TRUE(swapped);
  }
  const int seen = pulls.load();
  ASSERT_TRUE(WaitFor([&] { return pulls.load() >= seen + 8; }));
  stop = true;
  for (auto& t : readers) t.join();
  EXPECT_EQ(failed.load(), 0);
  EXPECT_EQ(mixed.load(), 0);
  EXPECT_EQ(follower->status().swaps, 5u);
  EXPECT_EQ(follower->status().step, 6);
  server->Shutdown(absl::Seconds(5));
}

// The bytes of `rows` as the wire carries them.
std::string Bytes(const std::vector<float>& rows, size_t begin = 0,
                  size_t end = kKeys) {
  return std::string(reinterpret_cast<const char*>(rows.data() + begin * kDim),
                     (end - begin) * kDim * sizeof(float));
}

std::vector<std::string> Ids(
    const google::protobuf::RepeatedPtrField<v1::Version>& versions) {
  std::vector<std::string> out;
  for (const v1::Version& v : versions) out.push_back(v.checkpoint_id());
  return out;
}

// Pull, PullRows and PullTables through the stub: each answer names the
// version read and the versions held (newest first); a request naming a
// held version reads it, one naming another is NOT_FOUND naming it.
TEST(ServingServerTest, ReadsNameTheirVersionAndReadAHeldOne) {
  ScratchDir dir;
  Trainer trainer(dir);
  const std::vector<float> v1 = trainer.StepAndCheckpoint(0.5f);
  const std::string id1 = trainer.last_id();
  ASSERT_OK_AND_ASSIGN(auto follower,
                       CheckpointFollower::Start(Follow(trainer.root())));
  const std::vector<float> v2 = trainer.StepAndCheckpoint(0.25f);
  const std::string id2 = trainer.last_id();
  ASSERT_OK_AND_ASSIGN(bool swapped, follower->Poll());
  ASSERT_TRUE(swapped);
  ServerOptions options;
  options.num_threads = 2;
  ASSERT_OK_AND_ASSIGN(auto server,
                       PsServer::StartServing(options, follower.get()));
  auto stub = v1::ParameterService::NewStub(grpc::CreateChannel(
      server->address(), grpc::InsecureChannelCredentials()));
  const std::vector<uint64_t> keys = Keys();
  const std::vector<std::string> held = {id2, id1};

  v1::PullRequest pull;
  pull.set_table("emb");
  pull.mutable_keys()->Assign(keys.begin(), keys.end());
  for (const auto& [version, want, step] :
       {std::tuple(std::string(), &v2, 2), std::tuple(id2, &v2, 2),
        std::tuple(id1, &v1, 1)}) {
    pull.set_version(version);
    v1::PullResponse resp;
    grpc::ClientContext ctx;
    ASSERT_TRUE(stub->Pull(&ctx, pull, &resp).ok()) << version;
    EXPECT_EQ(resp.values(), Bytes(*want)) << version;
    EXPECT_EQ(resp.version().checkpoint_id(), step == 2 ? id2 : id1);
    EXPECT_EQ(resp.version().step(), step);
    EXPECT_EQ(Ids(resp.held_versions()), held);
    EXPECT_EQ(resp.held_versions(0).step(), 2);
    EXPECT_EQ(resp.held_versions(1).step(), 1);
  }
  {
    v1::PullRowsRequest req;
    req.set_table("emb");
    req.mutable_keys()->Assign(keys.begin(), keys.end());
    req.set_version(id1);
    v1::PullRowsResponse resp;
    grpc::ClientContext ctx;
    ASSERT_TRUE(stub->PullRows(&ctx, req, &resp).ok());
    EXPECT_EQ(resp.rows().values(), Bytes(v1));
    EXPECT_EQ(resp.version().checkpoint_id(), id1);
    EXPECT_EQ(Ids(resp.held_versions()), held);
  }
  v1::PullTablesRequest tables;
  v1::TableRead* low = tables.add_reads();
  low->set_table("emb");
  low->mutable_keys()->Assign(keys.begin(), keys.begin() + kKeys / 2);
  v1::TableRead* high = tables.add_reads();
  high->set_table("emb");
  high->mutable_keys()->Assign(keys.begin() + kKeys / 2, keys.end());
  for (const auto& [version, want] :
       {std::pair(std::string(), &v2), std::pair(id1, &v1)}) {
    tables.set_version(version);
    v1::PullTablesResponse resp;
    grpc::ClientContext ctx;
    ASSERT_TRUE(stub->PullTables(&ctx, tables, &resp).ok()) << version;
    ASSERT_EQ(resp.tables_size(), 2);
    EXPECT_EQ(resp.tables(0).dim(), kDim);
    EXPECT_EQ(resp.tables(0).values(), Bytes(*want, 0, kKeys / 2));
    EXPECT_EQ(resp.tables(1).values(), Bytes(*want, kKeys / 2, kKeys));
    EXPECT_EQ(resp.version().checkpoint_id(), version.empty() ? id2 : id1);
    EXPECT_EQ(Ids(resp.held_versions()), held);
  }
  const std::string unknown = "ckpt-000000000009-000009";
  pull.set_version(unknown);
  v1::PullResponse resp;
  grpc::ClientContext ctx;
  const grpc::Status status = stub->Pull(&ctx, pull, &resp);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_THAT(status.error_message(),
              HasSubstr(absl::StrCat("version ", unknown, " is not held")));
  EXPECT_THAT(status.error_message(),
              HasSubstr(absl::StrCat("it holds ", id2, ", ", id1)));
  server->Shutdown(absl::Seconds(5));
}

TEST(ServingServerTest, EveryWriteIsRefusedAndNoFileChanges) {
  ScratchDir dir;
  Trainer trainer(dir);
  const std::vector<float> v1 = trainer.StepAndCheckpoint(0.5f);
  const std::map<std::string, std::string> files = Fingerprint(trainer.root());
  {
    ASSERT_OK_AND_ASSIGN(auto follower,
                         CheckpointFollower::Start(Follow(trainer.root())));
    ASSERT_OK_AND_ASSIGN(auto server,
                         PsServer::StartServing({}, follower.get()));
    ASSERT_OK_AND_ASSIGN(auto client,
                         OpenParameterClient("servers:" + server->address()));
    const std::vector<uint64_t> keys = Keys();
    std::vector<float> grads(keys.size() * kDim, 1.0f);
    RowBatch rows;
    ASSERT_OK(client->PullRows("emb", keys, &rows));
    TableSpec other = Spec();
    other.name = "other";
    const std::vector<absl::Status> refused = {
        client->Push("emb", keys, grads, {}),
        client->PutRows("emb", keys, rows),
        client->CreateTable(other),
        client->DropTable("emb"),
        client->Checkpoint(dir.Sub("elsewhere"), {}).status(),
    };
    for (const absl::Status& s : refused) {
      EXPECT_THAT(s, StatusIs(absl::StatusCode::kFailedPrecondition));
      EXPECT_THAT(std::string(s.message()),
                  HasSubstr("read-only serving replica"));
    }
    std::vector<float> out(keys.size() * kDim);
    ASSERT_OK(client->Pull("emb", keys, absl::MakeSpan(out), {}));
    EXPECT_TRUE(SameBits(out, v1));
    // Serving pulls of unknown ids create nothing.
    std::vector<float> one(kDim);
    ASSERT_OK(client->Pull("emb", std::vector<uint64_t>{99},
                           absl::MakeSpan(one), {}));
    ASSERT_OK_AND_ASSIGN(StoreStats stats, client->Stats());
    EXPECT_EQ(stats.tables.at(0).created, 0u);
    EXPECT_FALSE(fs::exists(dir.Sub("elsewhere")));
    server->Shutdown(absl::Seconds(5));
  }
  EXPECT_EQ(Fingerprint(trainer.root()), files);
}

// `ps-dump export CKPT --table=emb` parsed back: key -> values.
std::map<uint64_t, std::vector<float>> Export(const std::string& ckpt) {
  const testing::ShellResult r =
      testing::RunShell(testing::BuiltBinary("tools/ps-dump") + " export " +
                            ckpt + " --table=emb",
                        /*merge_stderr=*/false);
  EXPECT_EQ(r.exit_code, 0) << r.output;
  std::map<uint64_t, std::vector<float>> rows;
  std::vector<std::string> lines = absl::StrSplit(r.output, '\n');
  for (size_t i = 1; i < lines.size(); ++i) {  // line 0 is the header
    if (lines[i].empty()) continue;
    std::vector<std::string> cols = absl::StrSplit(lines[i], '\t');
    EXPECT_EQ(cols.size(), static_cast<size_t>(kDim + 1));
    uint64_t key = 0;
    EXPECT_TRUE(absl::SimpleAtoi(cols[0], &key));
    std::vector<float>& v = rows[key];
    for (int j = 1; j < static_cast<int>(cols.size()); ++j) {
      float x = 0;
      EXPECT_TRUE(absl::SimpleAtof(cols[j], &x));
      v.push_back(x);
    }
  }
  return rows;
}

// The ps-server binary as a replica: what it serves is, bit for bit, what
// ps-dump exports from the checkpoint; a newer checkpoint is served within
// the follow interval and the served step moves.
TEST(ServingBinaryTest, ServesWhatPsDumpExportsAndFollows) {
  ScratchDir dir;
  Trainer trainer(dir);
  trainer.StepAndCheckpoint(0.5f);
  trainer.StepAndCheckpoint(0.25f);  // "a few steps"
  ASSERT_OK_AND_ASSIGN(
      auto replica,
      testing::StartPsServer({"--serve_from=" + trainer.root(),
                              "--follow_interval_s=1", "--threads=2",
                              "--memory_budget_mb=16"}));
  ASSERT_OK_AND_ASSIGN(
      auto client, OpenParameterClient("servers:" + replica->ready_value()));
  auto check = [&](const std::string& ckpt) {
    const std::map<uint64_t, std::vector<float>> exported = Export(ckpt);
    ASSERT_EQ(exported.size(), static_cast<size_t>(kKeys));
    std::vector<uint64_t> keys;
    std::vector<float> want;
    for (const auto& [k, v] : exported) {
      keys.push_back(k);
      want.insert(want.end(), v.begin(), v.end());
    }
    std::vector<float> got(want.size());
    ASSERT_OK(client->Pull("emb", keys, absl::MakeSpan(got), {}));
    EXPECT_TRUE(SameBits(got, want)) << ckpt;
  };
  auto served_step = [&]() -> int64_t {
    absl::StatusOr<StoreStats> stats = client->Stats();
    return stats.ok() ? stats->tables.at(0).step : -1;
  };
  check(trainer.last_dir());
  EXPECT_EQ(served_step(), 2);

  trainer.StepAndCheckpoint(-0.5f);
  EXPECT_TRUE(WaitFor([&] { return served_step() == 3; }, absl::Seconds(20)));
  check(trainer.last_dir());
  EXPECT_OK(replica->Stop());
}

// A 2-server training cluster (in-process, static map) writes one cluster
// checkpoint; it is then served by real replica processes: two of shard 0
// and one of shard 1 behind `servers:A|B,C`, and one replica serving both
// shards. Values equal the training cluster's, a key sent to the wrong
// shard's replica is refused, and pulls keep succeeding, with exact values,
// while a replica of shard 0 is SIGKILLed mid-run.
TEST(ServingClusterTest, ReplicasOfAClusterCheckpointFailOver) {
  ScratchDir dir;
  testing::ReservedPort p0, p1;
  const std::vector<std::string> addrs = {
      absl::StrCat("127.0.0.1:", p0.port()),
      absl::StrCat("127.0.0.1:", p1.port())};
  ASSERT_OK_AND_ASSIGN(ClusterMap map, ClusterMap::FromAddresses(addrs));
  std::vector<std::unique_ptr<Store>> stores;
  std::vector<std::unique_ptr<PsServer>> training;
  for (int s = 0; s < 2; ++s) {
    ASSERT_OK_AND_ASSIGN(auto store,
                         Store::Open({}, dir.Sub(absl::StrCat("train", s))));
    ServerOptions options;
    options.port = s == 0 ? p0.port() : p1.port();
    options.cluster = map;
    options.shard_id = s;
    options.num_threads = 2;
    ASSERT_OK_AND_ASSIGN(auto server, PsServer::Start(options, store.get()));
    stores.push_back(std::move(store));
    training.push_back(std::move(server));
  }
  ASSERT_OK_AND_ASSIGN(auto trainer, OpenParameterClient(absl::StrCat(
                                         "servers:", addrs[0], ",", addrs[1])));
  ASSERT_OK(trainer->CreateTable(Spec()));
  std::vector<uint64_t> keys;
  for (uint64_t k = 0; k < 300; ++k) keys.push_back(k * 7919 + 3);
  std::vector<float> grads(keys.size() * kDim);
  for (size_t i = 0; i < grads.size(); ++i) grads[i] = 0.01f * (i % 13);
  PushOptions push;
  push.step = 1;
  ASSERT_OK(trainer->Push("emb", keys, grads, push));
  const std::string root = dir.Sub("ckpt");
  ASSERT_OK(WriteClusterCheckpoint(map, root, 1).status());
  std::vector<float> want(keys.size() * kDim);
  PullOptions serving;
  serving.serving = true;
  ASSERT_OK(trainer->Pull("emb", keys, absl::MakeSpan(want), serving));
  trainer.reset();
  for (auto& server : training) server->Shutdown(absl::Seconds(5));

  auto replica = [&](std::vector<std::string> args) {
    args.push_back("--serve_from=" + root);
    args.push_back("--threads=2");
    args.push_back("--memory_budget_mb=16");
    return testing::StartPsServer(args);
  };
  ASSERT_OK_AND_ASSIGN(auto a, replica({"--shard_id=0"}));
  ASSERT_OK_AND_ASSIGN(auto b, replica({"--shard_id=0"}));
  ASSERT_OK_AND_ASSIGN(auto c, replica({"--shard_id=1"}));
  ASSERT_OK_AND_ASSIGN(auto all, replica({"--serve_all_shards"}));

  auto pull_all = [&](ParameterClient& client) -> absl::Status {
    std::vector<float> got(want.size());
    PSDB_RETURN_IF_ERROR(client.Pull("emb", keys, absl::MakeSpan(got), {}));
    if (!SameBits(got, want)) return absl::InternalError("wrong values");
    return absl::OkStatus();
  };
  // One replica with every shard.
  ASSERT_OK_AND_ASSIGN(auto one,
                       OpenParameterClient("servers:" + all->ready_value()));
  EXPECT_OK(pull_all(*one));
  RowBatch rows;
  ASSERT_OK(one->PullRows("emb", keys, &rows));
  EXPECT_EQ(rows.values, want);
  ASSERT_OK_AND_ASSIGN(StoreStats stats, one->Stats());
  EXPECT_EQ(stats.tables.at(0).step, 1);
  // Both shards' stats, merged: the Pull read every row from the files, the
  // PullRows found them in memory.
  EXPECT_EQ(stats.tables.at(0).misses, keys.size());
  EXPECT_EQ(stats.tables.at(0).hits, keys.size());

  // A shard-0 replica asked for every key (as its only server) refuses the
  // keys of shard 1.
  ASSERT_OK_AND_ASSIGN(auto lone,
                       OpenParameterClient("servers:" + a->ready_value()));
  std::vector<float> got(want.size());
  const absl::Status misrouted =
      lone->Pull("emb", keys, absl::MakeSpan(got), {});
  EXPECT_THAT(misrouted, StatusIs(absl::StatusCode::kFailedPrecondition));
  EXPECT_THAT(std::string(misrouted.message()),
              HasSubstr("this replica serves shard 0"));

  // Replicas per shard, one of them killed mid-run.
  ASSERT_OK_AND_ASSIGN(
      auto client, OpenParameterClient(
                       absl::StrCat("servers:", a->ready_value(), "|",
                                    b->ready_value(), ",", c->ready_value())));
  EXPECT_OK(pull_all(*client));
  std::atomic<int> done{0}, failed{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 60; ++i) {
        if (!pull_all(*client).ok()) failed.fetch_add(1);
        done.fetch_add(1);
      }
    });
  }
  ASSERT_TRUE(WaitFor([&] { return done.load() >= 40; }));
  a->Signal(SIGKILL);
  for (auto& t : threads) t.join();
  EXPECT_EQ(done.load(), 240);
  EXPECT_EQ(failed.load(), 0);
  EXPECT_OK(b->Stop());
  EXPECT_OK(c->Stop());
  EXPECT_OK(all->Stop());
}

}  // namespace
}  // namespace psdb::rpc
