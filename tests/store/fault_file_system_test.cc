// FaultFileSystem: each control, with the exact bytes left on disk.
#include "tests/store/fault_file_system.h"

#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>

#include "gtest/gtest.h"
#include "tests/testing/test_util.h"

namespace psdb::testing {
namespace {

using Fault = FaultFileSystem::Fault;

// The file's bytes as the real disk has them, or "<absent>".
std::string OnDisk(const std::string& path) {
  if (!std::filesystem::exists(path)) return "<absent>";
  std::ifstream in(path, std::ios::binary);
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

// Writes `data` straight to the real disk (not through the wrapper).
void WriteDirect(const std::string& path, const std::string& data) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << data;
}

class FaultFileSystemTest : public ::testing::Test {
 protected:
  std::unique_ptr<rocksdb::FSWritableFile> Create(const std::string& name) {
    std::unique_ptr<rocksdb::FSWritableFile> f;
    EXPECT_TRUE(fs_->NewWritableFile(dir_.Sub(name), rocksdb::FileOptions(), &f,
                                     nullptr)
                    .ok());
    return f;
  }
  rocksdb::IOStatus Append(rocksdb::FSWritableFile* f, const std::string& s) {
    return f->Append(s, io_, nullptr);
  }
  rocksdb::IOStatus SyncDir() {
    std::unique_ptr<rocksdb::FSDirectory> d;
    rocksdb::IOStatus s = fs_->NewDirectory(dir_.path(), io_, &d, nullptr);
    if (!s.ok()) return s;
    return d->Fsync(io_, nullptr);
  }

  ScratchDir dir_;
  std::shared_ptr<FaultFileSystem> fs_ = std::make_shared<FaultFileSystem>();
  rocksdb::IOOptions io_;
};

TEST_F(FaultFileSystemTest, CountsWritesAndSyncs) {
  auto f = Create("a");
  ASSERT_TRUE(Append(f.get(), "ab").ok());
  ASSERT_TRUE(f->PositionedAppend("cd", 2, io_, nullptr).ok());
  ASSERT_TRUE(f->Sync(io_, nullptr).ok());
  ASSERT_TRUE(f->Fsync(io_, nullptr).ok());
  ASSERT_TRUE(f->Close(io_, nullptr).ok());
  ASSERT_TRUE(SyncDir().ok());
  EXPECT_EQ(fs_->writes(), 2);
  EXPECT_EQ(fs_->syncs(), 3);
  EXPECT_EQ(OnDisk(dir_.Sub("a")), "abcd");
}

TEST_F(FaultFileSystemTest, FailsTheNthWriteWithNoSpaceOnce) {
  auto f = Create("a");
  ASSERT_TRUE(Append(f.get(), "x").ok());  // Before the fault: not counted.
  fs_->InjectFault({.ops = FaultFileSystem::Ops::kWrites,
                    .nth = 2,
                    .error = FaultFileSystem::Error::kNoSpace,
                    .sticky = false});
  ASSERT_TRUE(Append(f.get(), "a").ok());
  ASSERT_TRUE(f->Sync(io_, nullptr).ok());  // Syncs do not count here.
  EXPECT_FALSE(fs_->fault_fired());
  rocksdb::IOStatus s = Append(f.get(), "b");
  EXPECT_TRUE(s.IsNoSpace()) << s.ToString();
  EXPECT_NE(s.ToString().find("No space left on device"), std::string::npos)
      << s.ToString();
  EXPECT_NE(s.ToString().find(dir_.Sub("a")), std::string::npos);
  EXPECT_TRUE(fs_->fault_fired());
  ASSERT_TRUE(Append(f.get(), "c").ok());  // Not sticky.
  ASSERT_TRUE(f->Close(io_, nullptr).ok());
  EXPECT_EQ(OnDisk(dir_.Sub("a")), "xac");
  EXPECT_EQ(fs_->writes(), 4);
}

TEST_F(FaultFileSystemTest, StickyIoErrorOnSyncUntilCleared) {
  auto f = Create("a");
  fs_->InjectFault({.ops = FaultFileSystem::Ops::kSyncs,
                    .nth = 1,
                    .error = FaultFileSystem::Error::kIo});
  ASSERT_TRUE(Append(f.get(), "a").ok());
  for (int i = 0; i < 3; ++i) {
    rocksdb::IOStatus s = f->Sync(io_, nullptr);
    EXPECT_TRUE(s.IsIOError()) << s.ToString();
    EXPECT_FALSE(s.IsNoSpace());
    EXPECT_NE(s.ToString().find("Input/output error"), std::string::npos)
        << s.ToString();
  }
  EXPECT_FALSE(SyncDir().ok());  // A directory fsync is a sync op too.
  ASSERT_TRUE(Append(f.get(), "b").ok());  // Writes do not count here.
  fs_->ClearFaults();
  ASSERT_TRUE(f->Fsync(io_, nullptr).ok());
  ASSERT_TRUE(f->Close(io_, nullptr).ok());
  EXPECT_EQ(OnDisk(dir_.Sub("a")), "ab");
  EXPECT_EQ(fs_->syncs(), 5);
}

TEST_F(FaultFileSystemTest, WritesAndSyncsCountTogether) {
  auto f = Create("a");
  fs_->InjectFault({.nth = 3});
  ASSERT_TRUE(Append(f.get(), "a").ok());          // 1
  ASSERT_TRUE(f->Sync(io_, nullptr).ok());         // 2
  EXPECT_TRUE(Append(f.get(), "b").IsNoSpace());   // 3
  EXPECT_TRUE(f->Sync(io_, nullptr).IsNoSpace());  // Sticky.
  fs_->ClearFaults();
  ASSERT_TRUE(Append(f.get(), "c").ok());
  ASSERT_TRUE(f->Close(io_, nullptr).ok());
  EXPECT_EQ(OnDisk(dir_.Sub("a")), "ac");
}

TEST_F(FaultFileSystemTest, FailsReadsOfNamedFilesOnly) {
  WriteDirect(dir_.Sub("MANIFEST.json"), "{}");
  WriteDirect(dir_.Sub("other"), "data");
  fs_->FailReadsOf("MANIFEST");
  std::string content;
  rocksdb::IOStatus s =
      rocksdb::ReadFileToString(fs_.get(), dir_.Sub("MANIFEST.json"), &content);
  EXPECT_TRUE(s.IsIOError()) << s.ToString();
  EXPECT_NE(s.ToString().find("Input/output error"), std::string::npos);
  std::unique_ptr<rocksdb::FSRandomAccessFile> r;
  EXPECT_TRUE(fs_->NewRandomAccessFile(dir_.Sub("MANIFEST.json"),
                                       rocksdb::FileOptions(), &r, nullptr)
                  .IsIOError());
  ASSERT_TRUE(
      rocksdb::ReadFileToString(fs_.get(), dir_.Sub("other"), &content).ok());
  EXPECT_EQ(content, "data");
  fs_->ClearFaults();
  ASSERT_TRUE(
      rocksdb::ReadFileToString(fs_.get(), dir_.Sub("MANIFEST.json"), &content)
          .ok());
  EXPECT_EQ(content, "{}");
}

TEST_F(FaultFileSystemTest, PowerCutDropsWhatWasNotSynced) {
  auto synced = Create("synced");
  ASSERT_TRUE(Append(synced.get(), "hello").ok());
  ASSERT_TRUE(synced->Sync(io_, nullptr).ok());
  ASSERT_TRUE(Append(synced.get(), " world").ok());
  ASSERT_TRUE(synced->Close(io_, nullptr).ok());

  auto never = Create("never");
  ASSERT_TRUE(Append(never.get(), "gone").ok());
  ASSERT_TRUE(never->Close(io_, nullptr).ok());

  // A file that existed before (written elsewhere) and was reopened.
  WriteDirect(dir_.Sub("old"), "kept");
  std::unique_ptr<rocksdb::FSWritableFile> old;
  ASSERT_TRUE(fs_->ReopenWritableFile(dir_.Sub("old"), rocksdb::FileOptions(),
                                      &old, nullptr)
                  .ok());
  ASSERT_TRUE(Append(old.get(), "+lost").ok());
  ASSERT_TRUE(old->Close(io_, nullptr).ok());

  // Not written through the wrapper: untouched.
  WriteDirect(dir_.Sub("outside"), "mine");

  EXPECT_EQ(OnDisk(dir_.Sub("synced")), "hello world");
  EXPECT_EQ(OnDisk(dir_.Sub("old")), "kept+lost");
  fs_->PowerCut();
  EXPECT_EQ(OnDisk(dir_.Sub("synced")), "hello");
  EXPECT_EQ(OnDisk(dir_.Sub("never")), "<absent>");
  EXPECT_EQ(OnDisk(dir_.Sub("old")), "kept");
  EXPECT_EQ(OnDisk(dir_.Sub("outside")), "mine");
}

TEST_F(FaultFileSystemTest, PowerCutUndoesRenamesAndLinksWithoutDirectorySync) {
  WriteDirect(dir_.Sub("current"), "old");
  auto tmp = Create("current.tmp");
  ASSERT_TRUE(Append(tmp.get(), "new").ok());
  ASSERT_TRUE(tmp->Sync(io_, nullptr).ok());
  ASSERT_TRUE(tmp->Close(io_, nullptr).ok());
  ASSERT_TRUE(fs_->RenameFile(dir_.Sub("current.tmp"), dir_.Sub("current"), io_,
                              nullptr)
                  .ok());
  WriteDirect(dir_.Sub("sst"), "rows");
  ASSERT_TRUE(
      fs_->LinkFile(dir_.Sub("sst"), dir_.Sub("sst.link"), io_, nullptr).ok());
  EXPECT_EQ(OnDisk(dir_.Sub("current")), "new");
  EXPECT_EQ(OnDisk(dir_.Sub("sst.link")), "rows");

  fs_->PowerCut();
  EXPECT_EQ(OnDisk(dir_.Sub("current")), "old");
  EXPECT_EQ(OnDisk(dir_.Sub("current.tmp")), "new");
  EXPECT_EQ(OnDisk(dir_.Sub("sst.link")), "<absent>");
  EXPECT_EQ(OnDisk(dir_.Sub("sst")), "rows");
}

TEST_F(FaultFileSystemTest, DirectorySyncMakesRenamesAndLinksDurable) {
  WriteDirect(dir_.Sub("current"), "old");
  auto tmp = Create("current.tmp");
  ASSERT_TRUE(Append(tmp.get(), "new").ok());
  ASSERT_TRUE(tmp->Sync(io_, nullptr).ok());
  ASSERT_TRUE(tmp->Close(io_, nullptr).ok());
  ASSERT_TRUE(fs_->RenameFile(dir_.Sub("current.tmp"), dir_.Sub("current"), io_,
                              nullptr)
                  .ok());
  WriteDirect(dir_.Sub("sst"), "rows");
  ASSERT_TRUE(
      fs_->LinkFile(dir_.Sub("sst"), dir_.Sub("sst.link"), io_, nullptr).ok());
  ASSERT_TRUE(SyncDir().ok());

  fs_->PowerCut();
  EXPECT_EQ(OnDisk(dir_.Sub("current")), "new");
  EXPECT_EQ(OnDisk(dir_.Sub("current.tmp")), "<absent>");
  EXPECT_EQ(OnDisk(dir_.Sub("sst.link")), "rows");
}

TEST_F(FaultFileSystemTest, FreezeFailsEveryMutationAfterTheFault) {
  WriteDirect(dir_.Sub("x"), "x");
  auto f = Create("a");
  ASSERT_TRUE(Append(f.get(), "a").ok());
  ASSERT_TRUE(f->Sync(io_, nullptr).ok());
  fs_->InjectFault(
      {.nth = 2, .error = FaultFileSystem::Error::kIo, .freeze = true});
  // Mutations are allowed until the fault fires.
  ASSERT_TRUE(fs_->LinkFile(dir_.Sub("x"), dir_.Sub("y"), io_, nullptr).ok());
  ASSERT_TRUE(Append(f.get(), "b").ok());         // 1
  EXPECT_TRUE(Append(f.get(), "c").IsIOError());  // 2: fires.
  EXPECT_TRUE(
      fs_->RenameFile(dir_.Sub("x"), dir_.Sub("z"), io_, nullptr).IsIOError());
  EXPECT_TRUE(fs_->DeleteFile(dir_.Sub("x"), io_, nullptr).IsIOError());
  EXPECT_TRUE(fs_->CreateDir(dir_.Sub("d"), io_, nullptr).IsIOError());
  std::unique_ptr<rocksdb::FSWritableFile> g;
  EXPECT_TRUE(
      fs_->NewWritableFile(dir_.Sub("g"), rocksdb::FileOptions(), &g, nullptr)
          .IsIOError());
  EXPECT_TRUE(SyncDir().IsIOError());

  fs_->PowerCut();
  // The open handle belongs to the machine that lost power.
  EXPECT_TRUE(Append(f.get(), "d").IsIOError());
  EXPECT_TRUE(f->Close(io_, nullptr).ok());
  EXPECT_EQ(OnDisk(dir_.Sub("a")), "a");
  EXPECT_EQ(OnDisk(dir_.Sub("x")), "x");
  EXPECT_EQ(OnDisk(dir_.Sub("y")), "<absent>");
  EXPECT_EQ(OnDisk(dir_.Sub("z")), "<absent>");
  EXPECT_FALSE(std::filesystem::exists(dir_.Sub("d")));  // Never made.
  // Back up: faults cleared.
  auto h = Create("h");
  ASSERT_TRUE(Append(h.get(), "h").ok());
  ASSERT_TRUE(h->Sync(io_, nullptr).ok());
  ASSERT_TRUE(h->Close(io_, nullptr).ok());
  EXPECT_EQ(OnDisk(dir_.Sub("h")), "h");
}

TEST_F(FaultFileSystemTest, RenamedDirectoriesCarryWhatIsTracked) {
  // The synced case first: its directory fsync covers both renames.
  for (const bool sync_dir : {true, false}) {
    SCOPED_TRACE(sync_dir ? "directory synced" : "directory not synced");
    const std::string d = dir_.Sub(sync_dir ? "d1" : "d0");
    const std::string e = dir_.Sub(sync_dir ? "e1" : "e0");
    ASSERT_TRUE(fs_->CreateDir(d, io_, nullptr).ok());
    ASSERT_TRUE(SyncDir().ok());  // The new directory itself is durable.
    std::unique_ptr<rocksdb::FSWritableFile> f;
    ASSERT_TRUE(
        fs_->NewWritableFile(d + "/f", rocksdb::FileOptions(), &f, nullptr)
            .ok());
    ASSERT_TRUE(Append(f.get(), "ab").ok());
    ASSERT_TRUE(f->Sync(io_, nullptr).ok());
    ASSERT_TRUE(Append(f.get(), "cd").ok());
    ASSERT_TRUE(f->Close(io_, nullptr).ok());
    ASSERT_TRUE(fs_->RenameFile(d, e, io_, nullptr).ok());
    if (sync_dir) {
      ASSERT_TRUE(SyncDir().ok());
    }
  }
  fs_->PowerCut();
  EXPECT_EQ(OnDisk(dir_.Sub("d0/f")), "ab");  // Rename undone.
  EXPECT_EQ(OnDisk(dir_.Sub("e0/f")), "<absent>");
  EXPECT_EQ(OnDisk(dir_.Sub("d1/f")), "<absent>");
  EXPECT_EQ(OnDisk(dir_.Sub("e1/f")), "ab");  // Durable, unsynced tail gone.
}

TEST_F(FaultFileSystemTest, PowerCutUndoesNewDirectoriesWithoutParentSync) {
  ASSERT_TRUE(fs_->CreateDir(dir_.Sub("kept"), io_, nullptr).ok());
  ASSERT_TRUE(SyncDir().ok());
  ASSERT_TRUE(
      fs_->CreateDirIfMissing(dir_.Sub("kept/lost"), io_, nullptr).ok());
  auto f = Create("kept/lost/f");
  ASSERT_TRUE(Append(f.get(), "data").ok());
  ASSERT_TRUE(f->Sync(io_, nullptr).ok());   // Synced, but its directory's
  ASSERT_TRUE(f->Close(io_, nullptr).ok());  // entry never was.
  fs_->PowerCut();
  EXPECT_TRUE(std::filesystem::is_directory(dir_.Sub("kept")));
  EXPECT_FALSE(std::filesystem::exists(dir_.Sub("kept/lost")));
}

}  // namespace
}  // namespace psdb::testing
