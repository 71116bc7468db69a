// CheckpointRootWatcher (rpc/server/root_watcher.h) on a real directory
// tree: manifests renamed into new and existing checkpoint directories are
// reported, deleted directories drop their watches, a root that appears
// later (or is deleted and made again) is found, and stopping is prompt.
// Then a CheckpointFollower polling once an hour swaps in a Store's new
// checkpoint because of the watch.
#include "rpc/server/root_watcher.h"

#include <atomic>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "manifest/manifest.h"
#include "psdb/store.h"
#include "rpc/server/checkpoint_follower.h"
#include "tests/testing/test_util.h"

namespace psdb::rpc {
namespace {

namespace fs = std::filesystem;
using ::psdb::testing::ScratchDir;
using ::psdb::testing::WaitFor;

// Every wait is on a condition; this only bounds a failing test.
constexpr absl::Duration kDeadline = absl::Seconds(10);

// Counts on_change calls.
struct Counter {
  std::atomic<int> changes{0};
  CheckpointRootWatcher::ChangeFn fn() {
    return [this] { changes.fetch_add(1); };
  }
};

// Makes <dir> and writes its manifest the way WriteManifestAtomic does
// (MANIFEST.json.tmp, then rename). The watcher never parses it.
void MakeDir(const std::string& dir) { fs::create_directories(dir); }
void RenameManifestInto(const std::string& dir) {
  const std::string tmp = dir + "/" + kManifestFileName + ".tmp";
  std::ofstream(tmp) << "{}\n";
  fs::rename(tmp, dir + "/" + kManifestFileName);
}

std::unique_ptr<CheckpointRootWatcher> StartWatcher(const std::string& root,
                                                    Counter* counter) {
  auto watcher = CheckpointRootWatcher::Start(root, counter->fn());
  EXPECT_TRUE(watcher.ok()) << watcher.status();
  return watcher.ok() ? *std::move(watcher) : nullptr;
}

// Waits for the report Start makes once its watches are in place, and
// returns the count after it.
int Settled(const Counter& counter) {
  EXPECT_TRUE(WaitFor([&] { return counter.changes.load() >= 1; }, kDeadline));
  return counter.changes.load();
}

TEST(CheckpointRootWatcherTest, ReportsManifestsRenamedIntoCheckpointDirs) {
  ScratchDir dir;
  const std::string root = dir.Sub("ckpt");
  MakeDir(root + "/ckpt-000000000010-000001");
  RenameManifestInto(root + "/ckpt-000000000010-000001");
  MakeDir(root + "/ckpt-000000000020-000002");  // incomplete
  MakeDir(root + "/store");                     // not a checkpoint
  Counter counter;
  auto watcher = StartWatcher(root, &counter);
  ASSERT_NE(watcher, nullptr);
  // The two checkpoint directories present at start, not the store's.
  EXPECT_EQ(watcher->watched_dirs(), 2u);
  int seen = Settled(counter);

  // The incomplete one completes.
  RenameManifestInto(root + "/ckpt-000000000020-000002");
  ASSERT_TRUE(
      WaitFor([&] { return counter.changes.load() > seen; }, kDeadline));
  seen = counter.changes.load();

  // A new one: watched as it is made, reported when its manifest arrives.
  MakeDir(root + "/other");
  MakeDir(root + "/ckpt-000000000030-000003");
  ASSERT_TRUE(WaitFor([&] { return watcher->watched_dirs() == 3; }, kDeadline));
  std::ofstream(root + "/ckpt-000000000030-000003/shard-0.sst") << "rows";
  RenameManifestInto(root + "/ckpt-000000000030-000003");
  ASSERT_TRUE(
      WaitFor([&] { return counter.changes.load() > seen; }, kDeadline));
  seen = counter.changes.load();

  // A checkpoint directory moved in whole, manifest and all.
  MakeDir(dir.Sub("staging/ckpt-000000000040-000004"));
  RenameManifestInto(dir.Sub("staging/ckpt-000000000040-000004"));
  fs::rename(dir.Sub("staging/ckpt-000000000040-000004"),
             root + "/ckpt-000000000040-000004");
  ASSERT_TRUE(
      WaitFor([&] { return counter.changes.load() > seen; }, kDeadline));
  EXPECT_TRUE(WaitFor([&] { return watcher->watched_dirs() == 4; }, kDeadline));
}

TEST(CheckpointRootWatcherTest, DeletedAndMovedDirsDropTheirWatches) {
  ScratchDir dir;
  const std::string root = dir.Sub("ckpt");
  for (const char* id : {"ckpt-000000000010-000001", "ckpt-000000000020-000002",
                         "ckpt-000000000030-000003"}) {
    MakeDir(root + "/" + id);
    RenameManifestInto(root + "/" + id);
  }
  Counter counter;
  auto watcher = StartWatcher(root, &counter);
  ASSERT_NE(watcher, nullptr);
  EXPECT_EQ(watcher->watched_dirs(), 3u);
  int seen = Settled(counter);

  // keep_last deleting the oldest: its watch goes with it (IN_IGNORED).
  fs::remove_all(root + "/ckpt-000000000010-000001");
  ASSERT_TRUE(WaitFor([&] { return watcher->watched_dirs() == 2; }, kDeadline));
  // Moved out of the root: no longer watched.
  fs::rename(root + "/ckpt-000000000020-000002", dir.Sub("moved-away"));
  ASSERT_TRUE(WaitFor([&] { return watcher->watched_dirs() == 1; }, kDeadline));

  // The next checkpoint is still reported.
  MakeDir(root + "/ckpt-000000000040-000004");
  ASSERT_TRUE(WaitFor([&] { return watcher->watched_dirs() == 2; }, kDeadline));
  RenameManifestInto(root + "/ckpt-000000000040-000004");
  EXPECT_TRUE(
      WaitFor([&] { return counter.changes.load() > seen; }, kDeadline));
}

TEST(CheckpointRootWatcherTest, FindsARootMadeLaterAndMadeAgain) {
  ScratchDir dir;
  const std::string root = dir.Sub("a/b/ckpt");  // nothing of it exists
  Counter counter;
  auto watcher = StartWatcher(root, &counter);
  ASSERT_NE(watcher, nullptr);
  EXPECT_EQ(watcher->watched_dirs(), 0u);
  int seen = Settled(counter);

  MakeDir(root + "/ckpt-000000000010-000001");
  ASSERT_TRUE(
      WaitFor([&] { return counter.changes.load() > seen; }, kDeadline));
  // Once the root is watched, its checkpoint directory is.
  ASSERT_TRUE(WaitFor([&] { return watcher->watched_dirs() == 1; }, kDeadline));
  seen = counter.changes.load();
  RenameManifestInto(root + "/ckpt-000000000010-000001");
  ASSERT_TRUE(
      WaitFor([&] { return counter.changes.load() > seen; }, kDeadline));

  // The root deleted and made again (an operator wiping it).
  fs::remove_all(dir.Sub("a"));
  ASSERT_TRUE(WaitFor([&] { return watcher->watched_dirs() == 0; }, kDeadline));
  MakeDir(root + "/ckpt-000000000020-000002");
  ASSERT_TRUE(WaitFor([&] { return watcher->watched_dirs() == 1; }, kDeadline));
  seen = counter.changes.load();
  RenameManifestInto(root + "/ckpt-000000000020-000002");
  EXPECT_TRUE(
      WaitFor([&] { return counter.changes.load() > seen; }, kDeadline));
}

TEST(CheckpointRootWatcherTest, StopsPromptly) {
  ScratchDir dir;
  MakeDir(dir.Sub("ckpt"));
  Counter counter;
  auto watcher = StartWatcher(dir.Sub("ckpt"), &counter);
  ASSERT_NE(watcher, nullptr);
  Settled(counter);
  // The thread is blocked in poll(2) with no timeout: only the stop
  // eventfd can end it.
  std::atomic<bool> stopped{false};
  std::thread stopper([&] {
    watcher.reset();
    stopped = true;
  });
  EXPECT_TRUE(WaitFor([&] { return stopped.load(); }, kDeadline));
  stopper.join();
}

// A follower that would look at the root once an hour takes a new
// checkpoint up because its manifest was renamed in.
TEST(CheckpointFollowerWatchTest, SwapsOnTheManifestRenameNotTheInterval) {
  ScratchDir dir;
  const std::string root = dir.Sub("ckpt");
  auto store = Store::Open({}, dir.Sub("train"));
  ASSERT_TRUE(store.ok()) << store.status();
  TableSpec spec;
  spec.name = "emb";
  spec.dim = 4;
  ASSERT_TRUE((*store)->CreateTable(spec).ok());
  const std::vector<uint64_t> keys = {1, 2, 3};
  std::vector<float> grads(keys.size() * spec.dim, 0.5f);
  PushOptions push;
  push.step = 1;
  ASSERT_TRUE((*store)->Push("emb", keys, grads, push).ok());
  ASSERT_TRUE((*store)->Checkpoint(root).ok());

  FollowerOptions options;
  options.root = root;
  options.interval = absl::Hours(1);
  options.store.memory_budget_bytes = 16ull << 20;
  auto follower = CheckpointFollower::Start(options);
  ASSERT_TRUE(follower.ok()) << follower.status();
  EXPECT_EQ((*follower)->status().step, 1);

  push.step = 2;
  ASSERT_TRUE((*store)->Push("emb", keys, grads, push).ok());
  auto info = (*store)->Checkpoint(root);
  ASSERT_TRUE(info.ok()) << info.status();
  ASSERT_TRUE(
      WaitFor([&] { return (*follower)->status().swaps == 1; }, kDeadline));
  const ServingStatus status = (*follower)->status();
  EXPECT_EQ(status.step, 2);
  EXPECT_EQ((*follower)->Acquire()->dir, info->path);
}

}  // namespace
}  // namespace psdb::rpc
