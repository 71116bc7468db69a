#include "tests/store/fault_file_system.h"

#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace psdb::testing {
namespace {

// One spelling per path, so renames and directory syncs match up.
std::string Normal(const std::string& path) {
  std::string s = std::filesystem::path(path).lexically_normal().string();
  while (s.size() > 1 && s.back() == '/') s.pop_back();
  return s;
}

std::string DirOf(const std::string& normal_path) {
  const size_t slash = normal_path.rfind('/');
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return normal_path.substr(0, slash);
}

}  // namespace

// A writable file whose writes and syncs are counted, may fail, and are
// recorded in its Tracked for PowerCut().
class FaultFileSystem::File : public rocksdb::FSWritableFileOwnerWrapper {
 public:
  File(FaultFileSystem* fs, std::string path, std::shared_ptr<Tracked> tracked,
       uint64_t generation, std::unique_ptr<rocksdb::FSWritableFile> target)
      : FSWritableFileOwnerWrapper(std::move(target)),
        fs_(fs),
        path_(std::move(path)),
        tracked_(std::move(tracked)),
        generation_(generation) {}

  rocksdb::IOStatus Append(const rocksdb::Slice& data,
                           const rocksdb::IOOptions& o,
                           rocksdb::IODebugContext* dbg) override {
    return DoAppend(
        data, [&] { return FSWritableFileOwnerWrapper::Append(data, o, dbg); });
  }
  rocksdb::IOStatus Append(const rocksdb::Slice& data,
                           const rocksdb::IOOptions& o,
                           const rocksdb::DataVerificationInfo& v,
                           rocksdb::IODebugContext* dbg) override {
    return DoAppend(data, [&] {
      return FSWritableFileOwnerWrapper::Append(data, o, v, dbg);
    });
  }
  rocksdb::IOStatus PositionedAppend(const rocksdb::Slice& data,
                                     uint64_t offset,
                                     const rocksdb::IOOptions& o,
                                     rocksdb::IODebugContext* dbg) override {
    return DoPositioned(data, offset, [&] {
      return FSWritableFileOwnerWrapper::PositionedAppend(data, offset, o, dbg);
    });
  }
  rocksdb::IOStatus PositionedAppend(const rocksdb::Slice& data,
                                     uint64_t offset,
                                     const rocksdb::IOOptions& o,
                                     const rocksdb::DataVerificationInfo& v,
                                     rocksdb::IODebugContext* dbg) override {
    return DoPositioned(data, offset, [&] {
      return FSWritableFileOwnerWrapper::PositionedAppend(data, offset, o, v,
                                                          dbg);
    });
  }
  rocksdb::IOStatus Truncate(uint64_t size, const rocksdb::IOOptions& o,
                             rocksdb::IODebugContext* dbg) override {
    rocksdb::IOStatus s = fs_->CheckFrozen("truncate", path_);
    if (s.ok()) s = CheckGeneration();
    if (s.ok()) s = FSWritableFileOwnerWrapper::Truncate(size, o, dbg);
    if (s.ok()) fs_->AfterWrite(*tracked_, size, WriteKind::kTruncate);
    return s;
  }
  rocksdb::IOStatus Sync(const rocksdb::IOOptions& o,
                         rocksdb::IODebugContext* dbg) override {
    return DoSync("sync",
                  [&] { return FSWritableFileOwnerWrapper::Sync(o, dbg); });
  }
  rocksdb::IOStatus Fsync(const rocksdb::IOOptions& o,
                          rocksdb::IODebugContext* dbg) override {
    return DoSync("fsync",
                  [&] { return FSWritableFileOwnerWrapper::Fsync(o, dbg); });
  }

 private:
  rocksdb::IOStatus CheckGeneration() {
    absl::MutexLock lock(&fs_->mu_);
    if (generation_ != fs_->generation_) {
      return rocksdb::IOStatus::IOError(
          absl::StrCat("file opened before the power cut: ", path_),
          std::strerror(EIO));
    }
    return rocksdb::IOStatus::OK();
  }
  template <typename Fn>
  rocksdb::IOStatus DoAppend(const rocksdb::Slice& data, Fn append) {
    rocksdb::IOStatus s =
        fs_->BeforeWrite(/*is_sync=*/false, generation_, "append", path_);
    if (!s.ok()) return s;
    s = append();
    if (s.ok()) fs_->AfterWrite(*tracked_, data.size(), WriteKind::kAppend);
    return s;
  }
  template <typename Fn>
  rocksdb::IOStatus DoPositioned(const rocksdb::Slice& data, uint64_t offset,
                                 Fn append) {
    rocksdb::IOStatus s = fs_->BeforeWrite(/*is_sync=*/false, generation_,
                                           "positioned append", path_);
    if (!s.ok()) return s;
    s = append();
    if (s.ok()) {
      fs_->AfterWrite(*tracked_, offset + data.size(), WriteKind::kEndAt);
    }
    return s;
  }
  template <typename Fn>
  rocksdb::IOStatus DoSync(const char* what, Fn sync) {
    rocksdb::IOStatus s =
        fs_->BeforeWrite(/*is_sync=*/true, generation_, what, path_);
    if (!s.ok()) return s;
    s = sync();
    if (s.ok()) fs_->AfterSync(*tracked_);
    return s;
  }

  FaultFileSystem* const fs_;
  const std::string path_;
  const std::shared_ptr<Tracked> tracked_;
  const uint64_t generation_;
};

// A directory whose fsync is a counted sync op that makes the renames and
// links into it durable.
class FaultFileSystem::Directory : public rocksdb::FSDirectoryWrapper {
 public:
  Directory(FaultFileSystem* fs, std::string path,
            std::unique_ptr<rocksdb::FSDirectory> target)
      : FSDirectoryWrapper(std::move(target)),
        fs_(fs),
        path_(std::move(path)) {}

  rocksdb::IOStatus Fsync(const rocksdb::IOOptions& o,
                          rocksdb::IODebugContext* dbg) override {
    return DoFsync([&] { return FSDirectoryWrapper::Fsync(o, dbg); });
  }
  rocksdb::IOStatus FsyncWithDirOptions(
      const rocksdb::IOOptions& o, rocksdb::IODebugContext* dbg,
      const rocksdb::DirFsyncOptions& d) override {
    return DoFsync(
        [&] { return FSDirectoryWrapper::FsyncWithDirOptions(o, dbg, d); });
  }

 private:
  template <typename Fn>
  rocksdb::IOStatus DoFsync(Fn fsync) {
    rocksdb::IOStatus s =
        fs_->CountOp(/*is_sync=*/true, "directory fsync", path_);
    if (!s.ok()) return s;
    s = fsync();
    if (s.ok()) fs_->AfterDirectorySync(path_);
    return s;
  }

  FaultFileSystem* const fs_;
  const std::string path_;
};

FaultFileSystem::FaultFileSystem()
    : FileSystemWrapper(rocksdb::FileSystem::Default()) {}

void FaultFileSystem::InjectFault(const Fault& fault) {
  absl::MutexLock lock(&mu_);
  fault_ = fault;
  fault_armed_ = true;
  fault_count_ = 0;
  fired_ = false;
  fired_op_.clear();
  frozen_ = false;
}

void FaultFileSystem::ClearFaults() {
  absl::MutexLock lock(&mu_);
  fault_armed_ = false;
  frozen_ = false;
  failing_reads_.clear();
}

bool FaultFileSystem::fault_fired() const {
  absl::MutexLock lock(&mu_);
  return fired_;
}

std::string FaultFileSystem::fired_op() const {
  absl::MutexLock lock(&mu_);
  return fired_op_;
}

void FaultFileSystem::FailReadsOf(const std::string& name_part) {
  absl::MutexLock lock(&mu_);
  failing_reads_.push_back(name_part);
}

int64_t FaultFileSystem::writes() const {
  absl::MutexLock lock(&mu_);
  return writes_;
}

int64_t FaultFileSystem::syncs() const {
  absl::MutexLock lock(&mu_);
  return syncs_;
}

rocksdb::IOStatus FaultFileSystem::MakeError(Error error,
                                             const std::string& what,
                                             const std::string& path) const {
  const std::string msg = absl::StrCat("injected fault: ", what, " ", path);
  if (error == Error::kNoSpace) {
    return rocksdb::IOStatus::NoSpace(msg, std::strerror(ENOSPC));
  }
  return rocksdb::IOStatus::IOError(msg, std::strerror(EIO));
}

rocksdb::IOStatus FaultFileSystem::CountOp(bool is_sync,
                                           const std::string& what,
                                           const std::string& path) {
  absl::MutexLock lock(&mu_);
  (is_sync ? syncs_ : writes_)++;
  if (frozen_) return MakeError(fault_.error, what, path);
  if (!fault_armed_) return rocksdb::IOStatus::OK();
  const bool counted = fault_.ops == Ops::kWritesAndSyncs ||
                       (fault_.ops == Ops::kSyncs) == is_sync;
  if (!counted) return rocksdb::IOStatus::OK();
  ++fault_count_;
  if (fault_count_ < fault_.nth ||
      (fault_count_ > fault_.nth && !fault_.sticky)) {
    return rocksdb::IOStatus::OK();
  }
  if (!fired_) fired_op_ = absl::StrCat(what, " ", path);
  fired_ = true;
  if (fault_.freeze) frozen_ = true;
  return MakeError(fault_.error, what, path);
}

rocksdb::IOStatus FaultFileSystem::CheckFrozen(const std::string& what,
                                               const std::string& path) {
  absl::MutexLock lock(&mu_);
  if (frozen_) return MakeError(fault_.error, what, path);
  return rocksdb::IOStatus::OK();
}

rocksdb::IOStatus FaultFileSystem::CheckRead(const std::string& path) {
  absl::MutexLock lock(&mu_);
  for (const std::string& part : failing_reads_) {
    if (absl::StrContains(path, part)) {
      return MakeError(Error::kIo, "open for read", path);
    }
  }
  return rocksdb::IOStatus::OK();
}

rocksdb::IOStatus FaultFileSystem::BeforeWrite(bool is_sync,
                                               uint64_t generation,
                                               const std::string& what,
                                               const std::string& path) {
  {
    absl::MutexLock lock(&mu_);
    if (generation != generation_) {
      return rocksdb::IOStatus::IOError(
          absl::StrCat("file opened before the power cut: ", path),
          std::strerror(EIO));
    }
  }
  return CountOp(is_sync, what, path);
}

void FaultFileSystem::AfterWrite(Tracked& t, uint64_t n, WriteKind kind) {
  absl::MutexLock lock(&mu_);
  switch (kind) {
    case WriteKind::kAppend:
      t.size += n;
      break;
    case WriteKind::kEndAt:
      if (n > t.size) t.size = n;
      break;
    case WriteKind::kTruncate:
      t.size = n;
      if (t.synced > n) t.synced = n;
      break;
  }
}

void FaultFileSystem::AfterSync(Tracked& t) {
  absl::MutexLock lock(&mu_);
  t.synced = t.size;
  t.created = false;
}

void FaultFileSystem::AfterDirectorySync(const std::string& dir) {
  const std::string d = Normal(dir);
  absl::MutexLock lock(&mu_);
  std::erase_if(pending_,
                [&](const PendingEntry& e) { return DirOf(e.dst) == d; });
}

void FaultFileSystem::WrapWritable(
    const std::string& f, uint64_t initial_size, bool created,
    std::unique_ptr<rocksdb::FSWritableFile>* r) {
  auto tracked = std::make_shared<Tracked>();
  tracked->created = created;
  tracked->size = initial_size;
  tracked->synced = initial_size;
  uint64_t generation;
  {
    absl::MutexLock lock(&mu_);
    files_[Normal(f)] = tracked;
    generation = generation_;
  }
  *r = std::make_unique<File>(this, f, std::move(tracked), generation,
                              std::move(*r));
}

void FaultFileSystem::MoveTrackedLocked(const std::string& from,
                                        const std::string& to) {
  // The file itself, or everything under a renamed directory.
  std::vector<std::pair<std::string, std::shared_ptr<Tracked>>> moved;
  for (auto it = files_.begin(); it != files_.end();) {
    if (it->first == from) {
      moved.emplace_back(to, std::move(it->second));
    } else if (absl::StartsWith(it->first, from + "/")) {
      moved.emplace_back(to + it->first.substr(from.size()),
                         std::move(it->second));
    } else {
      ++it;
      continue;
    }
    it = files_.erase(it);
  }
  for (auto& [path, t] : moved) files_[path] = std::move(t);
}

void FaultFileSystem::PowerCut() {
  absl::MutexLock lock(&mu_);
  rocksdb::IOOptions io;
  // Undo the entries no directory fsync made durable, newest first.
  for (auto it = pending_.rbegin(); it != pending_.rend(); ++it) {
    if (it->kind == PendingEntry::Kind::kLink) {
      target_->DeleteFile(it->dst, io, nullptr).PermitUncheckedError();
      continue;
    }
    if (it->kind == PendingEntry::Kind::kMkdir) {
      std::error_code ec;
      std::filesystem::remove_all(it->dst, ec);
      std::erase_if(files_, [&](const auto& f) {
        return absl::StartsWith(f.first, it->dst + "/");
      });
      continue;
    }
    if (target_->FileExists(it->dst, io, nullptr).ok()) {
      target_->RenameFile(it->dst, it->src, io, nullptr).PermitUncheckedError();
    }
    if (it->replaced) {
      rocksdb::WriteStringToFile(target_.get(), it->replaced_content, it->dst,
                                 /*should_sync=*/true)
          .PermitUncheckedError();
    }
    MoveTrackedLocked(it->dst, it->src);
  }
  // Drop what was written since each file's last sync.
  for (const auto& [path, t] : files_) {
    if (t->created) {
      target_->DeleteFile(path, io, nullptr).PermitUncheckedError();
      continue;
    }
    uint64_t size = 0;
    if (target_->GetFileSize(path, io, &size, nullptr).ok() &&
        size > t->synced) {
      // The POSIX FileSystem of RocksDB 7.8 does not implement Truncate.
      ::truncate(path.c_str(), static_cast<off_t>(t->synced));
    }
  }
  files_.clear();
  pending_.clear();
  ++generation_;
  fault_armed_ = false;
  frozen_ = false;
  failing_reads_.clear();
}

rocksdb::IOStatus FaultFileSystem::NewSequentialFile(
    const std::string& f, const rocksdb::FileOptions& o,
    std::unique_ptr<rocksdb::FSSequentialFile>* r,
    rocksdb::IODebugContext* dbg) {
  rocksdb::IOStatus s = CheckRead(f);
  if (!s.ok()) return s;
  return FileSystemWrapper::NewSequentialFile(f, o, r, dbg);
}

rocksdb::IOStatus FaultFileSystem::NewRandomAccessFile(
    const std::string& f, const rocksdb::FileOptions& o,
    std::unique_ptr<rocksdb::FSRandomAccessFile>* r,
    rocksdb::IODebugContext* dbg) {
  rocksdb::IOStatus s = CheckRead(f);
  if (!s.ok()) return s;
  return FileSystemWrapper::NewRandomAccessFile(f, o, r, dbg);
}

rocksdb::IOStatus FaultFileSystem::NewMemoryMappedFileBuffer(
    const std::string& f, std::unique_ptr<rocksdb::MemoryMappedFileBuffer>* r) {
  rocksdb::IOStatus s = CheckRead(f);
  if (!s.ok()) return s;
  return FileSystemWrapper::NewMemoryMappedFileBuffer(f, r);
}

rocksdb::IOStatus FaultFileSystem::NewWritableFile(
    const std::string& f, const rocksdb::FileOptions& o,
    std::unique_ptr<rocksdb::FSWritableFile>* r, rocksdb::IODebugContext* dbg) {
  rocksdb::IOStatus s = CheckFrozen("create", f);
  if (!s.ok()) return s;
  s = FileSystemWrapper::NewWritableFile(f, o, r, dbg);
  if (s.ok()) WrapWritable(f, 0, /*created=*/true, r);
  return s;
}

rocksdb::IOStatus FaultFileSystem::ReopenWritableFile(
    const std::string& f, const rocksdb::FileOptions& o,
    std::unique_ptr<rocksdb::FSWritableFile>* r, rocksdb::IODebugContext* dbg) {
  rocksdb::IOStatus s = CheckFrozen("reopen", f);
  if (!s.ok()) return s;
  uint64_t size = 0;
  const bool existed =
      target_->GetFileSize(f, rocksdb::IOOptions(), &size, dbg).ok();
  s = FileSystemWrapper::ReopenWritableFile(f, o, r, dbg);
  if (s.ok()) WrapWritable(f, size, /*created=*/!existed, r);
  return s;
}

rocksdb::IOStatus FaultFileSystem::ReuseWritableFile(
    const std::string& f, const std::string& old_f,
    const rocksdb::FileOptions& o, std::unique_ptr<rocksdb::FSWritableFile>* r,
    rocksdb::IODebugContext* dbg) {
  rocksdb::IOStatus s = CheckFrozen("reuse", f);
  if (!s.ok()) return s;
  s = FileSystemWrapper::ReuseWritableFile(f, old_f, o, r, dbg);
  if (s.ok()) {
    {
      absl::MutexLock lock(&mu_);
      files_.erase(Normal(old_f));
    }
    WrapWritable(f, 0, /*created=*/true, r);
  }
  return s;
}

rocksdb::IOStatus FaultFileSystem::NewRandomRWFile(
    const std::string& f, const rocksdb::FileOptions& o,
    std::unique_ptr<rocksdb::FSRandomRWFile>* r, rocksdb::IODebugContext* dbg) {
  rocksdb::IOStatus s = CheckFrozen("open read-write", f);
  if (s.ok()) s = CheckRead(f);
  if (!s.ok()) return s;
  return FileSystemWrapper::NewRandomRWFile(f, o, r, dbg);
}

rocksdb::IOStatus FaultFileSystem::NewDirectory(
    const std::string& d, const rocksdb::IOOptions& o,
    std::unique_ptr<rocksdb::FSDirectory>* r, rocksdb::IODebugContext* dbg) {
  rocksdb::IOStatus s = FileSystemWrapper::NewDirectory(d, o, r, dbg);
  if (s.ok()) *r = std::make_unique<Directory>(this, d, std::move(*r));
  return s;
}

rocksdb::IOStatus FaultFileSystem::DeleteFile(const std::string& f,
                                              const rocksdb::IOOptions& o,
                                              rocksdb::IODebugContext* dbg) {
  rocksdb::IOStatus s = CheckFrozen("delete", f);
  if (!s.ok()) return s;
  s = FileSystemWrapper::DeleteFile(f, o, dbg);
  if (s.ok()) {
    absl::MutexLock lock(&mu_);
    files_.erase(Normal(f));
  }
  return s;
}

rocksdb::IOStatus FaultFileSystem::Truncate(const std::string& f, size_t size,
                                            const rocksdb::IOOptions& o,
                                            rocksdb::IODebugContext* dbg) {
  rocksdb::IOStatus s = CheckFrozen("truncate", f);
  if (!s.ok()) return s;
  s = FileSystemWrapper::Truncate(f, size, o, dbg);
  if (s.ok()) {
    absl::MutexLock lock(&mu_);
    auto it = files_.find(Normal(f));
    if (it != files_.end()) {
      it->second->size = size;
      if (it->second->synced > size) it->second->synced = size;
    }
  }
  return s;
}

rocksdb::IOStatus FaultFileSystem::CreateDir(const std::string& d,
                                             const rocksdb::IOOptions& o,
                                             rocksdb::IODebugContext* dbg) {
  rocksdb::IOStatus s = CheckFrozen("mkdir", d);
  if (!s.ok()) return s;
  s = FileSystemWrapper::CreateDir(d, o, dbg);
  if (s.ok()) {
    absl::MutexLock lock(&mu_);
    pending_.push_back({PendingEntry::Kind::kMkdir, "", Normal(d)});
  }
  return s;
}

rocksdb::IOStatus FaultFileSystem::CreateDirIfMissing(
    const std::string& d, const rocksdb::IOOptions& o,
    rocksdb::IODebugContext* dbg) {
  rocksdb::IOStatus s = CheckFrozen("mkdir", d);
  if (!s.ok()) return s;
  const bool existed = target_->FileExists(d, o, dbg).ok();
  s = FileSystemWrapper::CreateDirIfMissing(d, o, dbg);
  if (s.ok() && !existed) {
    absl::MutexLock lock(&mu_);
    pending_.push_back({PendingEntry::Kind::kMkdir, "", Normal(d)});
  }
  return s;
}

rocksdb::IOStatus FaultFileSystem::DeleteDir(const std::string& d,
                                             const rocksdb::IOOptions& o,
                                             rocksdb::IODebugContext* dbg) {
  rocksdb::IOStatus s = CheckFrozen("rmdir", d);
  if (!s.ok()) return s;
  return FileSystemWrapper::DeleteDir(d, o, dbg);
}

rocksdb::IOStatus FaultFileSystem::RenameFile(const std::string& src,
                                              const std::string& dst,
                                              const rocksdb::IOOptions& o,
                                              rocksdb::IODebugContext* dbg) {
  rocksdb::IOStatus s = CheckFrozen("rename", src);
  if (!s.ok()) return s;
  PendingEntry entry;
  entry.src = Normal(src);
  entry.dst = Normal(dst);
  bool durable = false;  // A replaced file too large to keep.
  uint64_t size = 0;
  bool dst_is_dir = false;
  if (target_->IsDirectory(dst, o, &dst_is_dir, dbg).ok() && dst_is_dir) {
    durable = true;  // Over an (empty) directory: not undone.
  } else if (target_->GetFileSize(dst, o, &size, dbg).ok()) {
    if (size <= kMaxReplacedBytes) {
      entry.replaced = true;
      s = rocksdb::ReadFileToString(target_.get(), dst,
                                    &entry.replaced_content);
      if (!s.ok()) return s;
    } else {
      durable = true;
    }
  }
  s = FileSystemWrapper::RenameFile(src, dst, o, dbg);
  if (!s.ok()) return s;
  absl::MutexLock lock(&mu_);
  files_.erase(entry.dst);
  MoveTrackedLocked(entry.src, entry.dst);
  if (!durable) pending_.push_back(std::move(entry));
  return s;
}

rocksdb::IOStatus FaultFileSystem::LinkFile(const std::string& src,
                                            const std::string& dst,
                                            const rocksdb::IOOptions& o,
                                            rocksdb::IODebugContext* dbg) {
  rocksdb::IOStatus s = CheckFrozen("link", src);
  if (!s.ok()) return s;
  s = FileSystemWrapper::LinkFile(src, dst, o, dbg);
  if (s.ok()) {
    absl::MutexLock lock(&mu_);
    pending_.push_back({PendingEntry::Kind::kLink, Normal(src), Normal(dst)});
  }
  return s;
}

}  // namespace psdb::testing
