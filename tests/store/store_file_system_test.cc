// StoreOptions::file_system is the one way to the disk: a store opened over
// a recording file system, checkpointed, restored (by link and for another
// ring), opened read-only, verified and resharded, leaves no file or
// directory under its scratch directory that the file system did not create.
#include <filesystem>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "checkpoint/reshard.h"
#include "checkpoint/restore.h"
#include "checkpoint/verify.h"
#include "gtest/gtest.h"
#include "manifest/manifest.h"
#include "psdb/checkpoint_reader.h"
#include "psdb/store.h"
#include "rocksdb/file_system.h"
#include "shard/ring.h"
#include "tests/store/store_test_util.h"
#include "tests/testing/test_util.h"

namespace psdb::testing {
namespace {

std::string Normal(const std::string& p) {
  std::string s = std::filesystem::path(p).lexically_normal().string();
  while (s.size() > 1 && s.back() == '/') s.pop_back();
  return s;
}

// Records every path a file or directory is created at (or renamed or
// linked to) through it.
class RecordingFileSystem : public rocksdb::FileSystemWrapper {
 public:
  RecordingFileSystem() : FileSystemWrapper(rocksdb::FileSystem::Default()) {}
  const char* Name() const override { return "RecordingFileSystem"; }

  // Whether `path` was created through this, directly or under a
  // directory renamed through this from where it was created.
  bool Created(const std::string& path) const {
    absl::MutexLock lock(&mu_);
    return CreatedLocked(Normal(path), 0);
  }
  size_t created_count() const {
    absl::MutexLock lock(&mu_);
    return created_.size();
  }

  rocksdb::IOStatus NewWritableFile(const std::string& f,
                                    const rocksdb::FileOptions& o,
                                    std::unique_ptr<rocksdb::FSWritableFile>* r,
                                    rocksdb::IODebugContext* dbg) override {
    Record(f);
    return FileSystemWrapper::NewWritableFile(f, o, r, dbg);
  }
  rocksdb::IOStatus ReopenWritableFile(
      const std::string& f, const rocksdb::FileOptions& o,
      std::unique_ptr<rocksdb::FSWritableFile>* r,
      rocksdb::IODebugContext* dbg) override {
    Record(f);
    return FileSystemWrapper::ReopenWritableFile(f, o, r, dbg);
  }
  rocksdb::IOStatus ReuseWritableFile(
      const std::string& f, const std::string& old,
      const rocksdb::FileOptions& o,
      std::unique_ptr<rocksdb::FSWritableFile>* r,
      rocksdb::IODebugContext* dbg) override {
    Record(f);
    return FileSystemWrapper::ReuseWritableFile(f, old, o, r, dbg);
  }
  rocksdb::IOStatus NewRandomRWFile(const std::string& f,
                                    const rocksdb::FileOptions& o,
                                    std::unique_ptr<rocksdb::FSRandomRWFile>* r,
                                    rocksdb::IODebugContext* dbg) override {
    Record(f);
    return FileSystemWrapper::NewRandomRWFile(f, o, r, dbg);
  }
  rocksdb::IOStatus CreateDir(const std::string& d, const rocksdb::IOOptions& o,
                              rocksdb::IODebugContext* dbg) override {
    Record(d);
    return FileSystemWrapper::CreateDir(d, o, dbg);
  }
  rocksdb::IOStatus CreateDirIfMissing(const std::string& d,
                                       const rocksdb::IOOptions& o,
                                       rocksdb::IODebugContext* dbg) override {
    Record(d);
    return FileSystemWrapper::CreateDirIfMissing(d, o, dbg);
  }
  rocksdb::IOStatus RenameFile(const std::string& s, const std::string& t,
                               const rocksdb::IOOptions& o,
                               rocksdb::IODebugContext* dbg) override {
    {
      absl::MutexLock lock(&mu_);
      renames_.emplace_back(Normal(s), Normal(t));
    }
    return FileSystemWrapper::RenameFile(s, t, o, dbg);
  }
  rocksdb::IOStatus LinkFile(const std::string& s, const std::string& t,
                             const rocksdb::IOOptions& o,
                             rocksdb::IODebugContext* dbg) override {
    Record(t);
    return FileSystemWrapper::LinkFile(s, t, o, dbg);
  }
  rocksdb::IOStatus LockFile(const std::string& f, const rocksdb::IOOptions& o,
                             rocksdb::FileLock** l,
                             rocksdb::IODebugContext* dbg) override {
    Record(f);  // the POSIX file system creates the LOCK file
    return FileSystemWrapper::LockFile(f, o, l, dbg);
  }
  rocksdb::IOStatus NewLogger(const std::string& f, const rocksdb::IOOptions& o,
                              std::shared_ptr<rocksdb::Logger>* r,
                              rocksdb::IODebugContext* dbg) override {
    Record(f);
    return FileSystemWrapper::NewLogger(f, o, r, dbg);
  }

 private:
  void Record(const std::string& path) {
    absl::MutexLock lock(&mu_);
    created_.insert(Normal(path));
  }
  bool CreatedLocked(const std::string& p, int depth) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (created_.contains(p)) return true;
    if (depth > 8) return false;
    for (const auto& [src, dst] : renames_) {
      if (p == dst) return CreatedLocked(src, depth + 1);
      if (absl::StartsWith(p, dst + "/")) {
        if (CreatedLocked(src + p.substr(dst.size()), depth + 1)) return true;
      }
    }
    return false;
  }

  mutable absl::Mutex mu_;
  std::set<std::string> created_ ABSL_GUARDED_BY(mu_);
  std::vector<std::pair<std::string, std::string>> renames_
      ABSL_GUARDED_BY(mu_);
};

std::vector<float> Rows(Store& s, const std::string& table,
                        const std::vector<uint64_t>& keys, int dim) {
  std::vector<float> out(keys.size() * dim);
  EXPECT_OK(s.Pull(table, keys, absl::MakeSpan(out)));
  return out;
}

Ring ServerRing(int n) {
  std::vector<RingMember> members;
  for (int r = 0; r < n; ++r) members.push_back({r, 1.0f});
  absl::StatusOr<Ring> ring = Ring::Create(RingOptions(), members);
  EXPECT_TRUE(ring.ok());
  return *ring;
}

TEST(StoreFileSystemTest, EveryFileGoesThroughTheInjectedFileSystem) {
  ScratchDir dir;
  auto fs = std::make_shared<RecordingFileSystem>();
  StoreOptions options = SmallOptions();
  options.file_system = fs;
  const std::vector<uint64_t> keys = {1, 2, 3, 1000, 123456789};
  std::vector<float> a_rows, b_rows;
  {
    ASSERT_OK_AND_ASSIGN(auto store,
                         Store::Open(options, dir.Sub("store/nested")));
    ASSERT_OK(store->CreateTable(MakeSpec("a", 4)));
    ASSERT_OK(store->CreateTable(MakeSpec("b", 2)));
    for (int round = 0; round < 2; ++round) {
      ASSERT_OK(
          store->Push("a", keys, std::vector<float>(keys.size() * 4, -1)));
      ASSERT_OK(
          store->Push("b", keys, std::vector<float>(keys.size() * 2, -2)));
      CheckpointOptions co;
      co.keep_last = 1;  // the second checkpoint prunes the first
      ASSERT_OK(store->Checkpoint(dir.Sub("ckpts"), co).status());
    }
    ASSERT_OK(store->CheckpointShard(dir.Sub("shard-only/shard-0")).status());
    a_rows = Rows(*store, "a", keys, 4);
    b_rows = Rows(*store, "b", keys, 2);
  }
  EXPECT_EQ(a_rows[0], 2.0f);
  EXPECT_EQ(b_rows[1], 4.0f);

  // Restore by link (same shard layout).
  StoreOptions restore = options;
  restore.restore_from = dir.Sub("ckpts");
  {
    ASSERT_OK_AND_ASSIGN(auto store, Store::Open(restore, dir.Sub("restored")));
    EXPECT_EQ(Rows(*store, "a", keys, 4), a_rows);
    EXPECT_EQ(Rows(*store, "b", keys, 2), b_rows);
  }
  ASSERT_OK_AND_ASSIGN(CheckpointRef latest,
                       LatestCheckpoint(dir.Sub("ckpts")));

  // Read-only open, verify, reshard to 2 shards.
  {
    ASSERT_OK_AND_ASSIGN(auto store,
                         Store::OpenCheckpoint(options, latest.path, 0));
    EXPECT_EQ(Rows(*store, "a", keys, 4), a_rows);
  }
  {
    ASSERT_OK_AND_ASSIGN(auto reader,
                         ckpt::CheckpointReader::Open(latest.path, fs));
    ASSERT_OK_AND_ASSIGN(ckpt::VerifyReport report, ckpt::Verify(*reader));
    EXPECT_TRUE(report.ok());
    EXPECT_EQ(report.rows, 2 * keys.size());
    ckpt::ReshardOptions ro;
    ro.servers = 2;
    ro.out = dir.Sub("resharded");
    ro.file_system = fs;
    ASSERT_OK_AND_ASSIGN(ckpt::ReshardResult resharded,
                         ckpt::Reshard(*reader, ro));
    EXPECT_EQ(resharded.rows, 2 * keys.size());
  }

  // Restore the 2-shard checkpoint onto a 3-server ring: each server
  // gathers the rows it owns.
  const Ring ring = ServerRing(3);
  for (int r = 0; r < 3; ++r) {
    const std::string path = dir.Sub(absl::StrCat("ring-", r));
    ASSERT_OK_AND_ASSIGN(
        std::optional<ckpt::RingRestoreResult> prepared,
        ckpt::PrepareRestoreForRing(dir.Sub("resharded"), ring, r, path, fs));
    EXPECT_TRUE(prepared.has_value());
    StoreOptions so = options;
    so.restore_from = dir.Sub("resharded");
    so.shard_id = r;
    ASSERT_OK_AND_ASSIGN(auto store, Store::Open(so, path));
    for (size_t i = 0; i < keys.size(); ++i) {
      if (ring.Owner(keys[i]) != r) continue;
      std::vector<float> row = Rows(*store, "a", {keys[i]}, 4);
      EXPECT_EQ(row, std::vector<float>(a_rows.begin() + 4 * i,
                                        a_rows.begin() + 4 * (i + 1)));
    }
  }

  // Everything under the scratch directory came through `fs`.
  int walked = 0;
  for (const std::filesystem::directory_entry& e :
       std::filesystem::recursive_directory_iterator(dir.path())) {
    ++walked;
    EXPECT_TRUE(fs->Created(e.path().string()))
        << e.path() << " was created behind the file system's back";
  }
  EXPECT_GT(walked, 50);
  EXPECT_GT(fs->created_count(), 50u);
}

}  // namespace
}  // namespace psdb::testing
