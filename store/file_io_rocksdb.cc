#include "store/file_io_rocksdb.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "store/disk_tier.h"
#include "util/status_macros.h"

namespace psdb::internal {
namespace {

// Copies are streamed in chunks of this size (SST files can be large).
constexpr size_t kCopyChunkBytes = 1 << 20;

// `s` as an absl::Status naming the operation and the path.
absl::Status Check(const rocksdb::IOStatus& s, absl::string_view what,
                   absl::string_view path) {
  if (s.ok()) return absl::OkStatus();
  return FromRocks(s, absl::StrCat(what, " ", path));
}

class RocksDbFileIo final : public FileIo {
 public:
  explicit RocksDbFileIo(std::shared_ptr<rocksdb::FileSystem> fs)
      : fs_(std::move(fs)) {}

  absl::StatusOr<std::string> ReadFile(const std::string& path) const override {
    if (!Exists(path)) {
      return absl::NotFoundError(absl::StrCat("no such file: ", path));
    }
    std::string data;
    PSDB_RETURN_IF_ERROR(
        Check(rocksdb::ReadFileToString(fs_.get(), path, &data), "read", path));
    return data;
  }

  absl::Status WriteFileAtomically(const std::string& path,
                                   absl::string_view data) const override {
    const std::string tmp = absl::StrCat(path, ".tmp");
    std::unique_ptr<rocksdb::FSWritableFile> f;
    PSDB_RETURN_IF_ERROR(
        Check(fs_->NewWritableFile(tmp, rocksdb::FileOptions(), &f, nullptr),
              "create", tmp));
    rocksdb::IOStatus s =
        f->Append(rocksdb::Slice(data.data(), data.size()), io_, nullptr);
    if (s.ok()) s = f->Fsync(io_, nullptr);
    rocksdb::IOStatus closed = f->Close(io_, nullptr);
    if (s.ok()) s = closed;
    PSDB_RETURN_IF_ERROR(Check(s, "write", tmp));
    PSDB_RETURN_IF_ERROR(Check(fs_->RenameFile(tmp, path, io_, nullptr),
                               absl::StrCat("rename ", tmp, " to"), path));
    return SyncDir(ParentDir(path));
  }

  bool Exists(const std::string& path) const override {
    return fs_->FileExists(path, io_, nullptr).ok();
  }

  bool IsDirectory(const std::string& path) const override {
    bool is_dir = false;
    return fs_->IsDirectory(path, io_, &is_dir, nullptr).ok() && is_dir;
  }

  absl::StatusOr<std::vector<std::string>> ListChildren(
      const std::string& dir) const override {
    std::vector<std::string> names;
    PSDB_RETURN_IF_ERROR(
        Check(fs_->GetChildren(dir, io_, &names, nullptr), "cannot list", dir));
    std::erase_if(names,
                  [](const std::string& n) { return n == "." || n == ".."; });
    return names;
  }

  absl::Status CreateDir(const std::string& dir) const override {
    if (Exists(dir)) {
      return absl::AlreadyExistsError(absl::StrCat(dir, " already exists"));
    }
    PSDB_RETURN_IF_ERROR(
        Check(fs_->CreateDir(dir, io_, nullptr), "create", dir));
    return absl::OkStatus();
  }

  absl::Status CreateDirs(const std::string& dir) const override {
    if (dir.empty() || IsDirectory(dir)) return absl::OkStatus();
    const std::string parent = ParentDir(dir);
    if (parent != dir && parent != ".") {
      if (absl::Status s = CreateDirs(parent); !s.ok()) return s;
    }
    PSDB_RETURN_IF_ERROR(
        Check(fs_->CreateDirIfMissing(dir, io_, nullptr), "create", dir));
    return absl::OkStatus();
  }

  absl::Status DeleteFile(const std::string& path) const override {
    if (!Exists(path)) return absl::OkStatus();
    PSDB_RETURN_IF_ERROR(
        Check(fs_->DeleteFile(path, io_, nullptr), "remove", path));
    return absl::OkStatus();
  }

  absl::Status DeleteRecursively(const std::string& path) const override {
    if (!Exists(path)) return absl::OkStatus();
    if (!IsDirectory(path)) return DeleteFile(path);
    absl::StatusOr<std::vector<std::string>> children = ListChildren(path);
    if (!children.ok()) return children.status();
    for (const std::string& c : *children) {
      if (absl::Status s = DeleteRecursively(absl::StrCat(path, "/", c));
          !s.ok()) {
        return s;
      }
    }
    PSDB_RETURN_IF_ERROR(
        Check(fs_->DeleteDir(path, io_, nullptr), "remove", path));
    return absl::OkStatus();
  }

  absl::Status Rename(const std::string& from,
                      const std::string& to) const override {
    PSDB_RETURN_IF_ERROR(Check(fs_->RenameFile(from, to, io_, nullptr),
                               absl::StrCat("rename ", from, " to"), to));
    return absl::OkStatus();
  }

  absl::Status LinkOrCopyFile(const std::string& from,
                              const std::string& to) const override {
    if (fs_->LinkFile(from, to, io_, nullptr).ok()) return absl::OkStatus();
    return CopyFile(from, to);  // another device: copy instead
  }

  absl::Status CopyFile(const std::string& from,
                        const std::string& to) const override {
    std::unique_ptr<rocksdb::FSSequentialFile> in;
    PSDB_RETURN_IF_ERROR(Check(
        fs_->NewSequentialFile(from, rocksdb::FileOptions(), &in, nullptr),
        "open", from));
    std::unique_ptr<rocksdb::FSWritableFile> out;
    PSDB_RETURN_IF_ERROR(
        Check(fs_->NewWritableFile(to, rocksdb::FileOptions(), &out, nullptr),
              "create", to));
    std::string scratch(kCopyChunkBytes, '\0');
    rocksdb::IOStatus s;
    while (s.ok()) {
      rocksdb::Slice chunk;
      s = in->Read(kCopyChunkBytes, io_, &chunk, scratch.data(), nullptr);
      if (!s.ok()) {
        PSDB_RETURN_IF_ERROR(Check(s, "read", from));
      }
      if (chunk.empty()) break;
      s = out->Append(chunk, io_, nullptr);
    }
    if (s.ok()) s = out->Fsync(io_, nullptr);
    rocksdb::IOStatus closed = out->Close(io_, nullptr);
    if (s.ok()) s = closed;
    PSDB_RETURN_IF_ERROR(Check(s, absl::StrCat("copy ", from, " to"), to));
    return absl::OkStatus();
  }

  absl::Status SyncDir(const std::string& dir) const override {
    std::unique_ptr<rocksdb::FSDirectory> d;
    PSDB_RETURN_IF_ERROR(
        Check(fs_->NewDirectory(dir, io_, &d, nullptr), "open", dir));
    rocksdb::IOStatus s = d->Fsync(io_, nullptr);
    rocksdb::IOStatus closed = d->Close(io_, nullptr);
    if (s.ok()) s = closed;
    PSDB_RETURN_IF_ERROR(Check(s, "fsync", dir));
    return absl::OkStatus();
  }

 private:
  const std::shared_ptr<rocksdb::FileSystem> fs_;
  const rocksdb::IOOptions io_;
};

}  // namespace

std::shared_ptr<rocksdb::FileSystem> FileSystemOr(
    std::shared_ptr<rocksdb::FileSystem> fs) {
  return fs != nullptr ? fs : rocksdb::FileSystem::Default();
}

std::shared_ptr<const FileIo> FileIoOver(
    std::shared_ptr<rocksdb::FileSystem> fs) {
  return std::make_shared<RocksDbFileIo>(FileSystemOr(std::move(fs)));
}

std::unique_ptr<rocksdb::Env> EnvOver(
    const std::shared_ptr<rocksdb::FileSystem>& fs) {
  if (fs == nullptr) return nullptr;
  return rocksdb::NewCompositeEnv(fs);
}

}  // namespace psdb::internal
