#include "store/disk_reserve.h"

#include <algorithm>
#include <string>

#include "absl/strings/str_cat.h"

namespace psdb::internal {

absl::StatusOr<std::unique_ptr<DiskReserve>> DiskReserve::Create(
    std::shared_ptr<rocksdb::FileSystem> fs, const std::string& dir,
    uint64_t bytes) {
  const std::string path = absl::StrCat(dir, "/", kFileName);
  const rocksdb::IOOptions io;
  uint64_t size = 0;
  if (fs->GetFileSize(path, io, &size, nullptr).ok() && size == bytes) {
    return std::unique_ptr<DiskReserve>(
        new DiskReserve(std::move(fs), path, bytes));
  }
  auto fail = [&](const rocksdb::IOStatus& s) -> absl::Status {
    (void)fs->DeleteFile(path, io, nullptr);
    const std::string msg =
        absl::StrCat("cannot reserve ", bytes, " bytes of disk in ", path,
                     " (StoreOptions::disk_reserve_bytes): ", s.ToString());
    return s.IsNoSpace() ? absl::ResourceExhaustedError(msg)
                         : absl::InternalError(msg);
  };
  std::unique_ptr<rocksdb::FSWritableFile> file;
  rocksdb::IOStatus s =
      fs->NewWritableFile(path, rocksdb::FileOptions(), &file, nullptr);
  if (!s.ok()) return fail(s);
  const std::string zeros(1 << 20, '\0');
  for (uint64_t done = 0; done < bytes && s.ok();) {
    const uint64_t n = std::min<uint64_t>(zeros.size(), bytes - done);
    s = file->Append(rocksdb::Slice(zeros.data(), n), io, nullptr);
    done += n;
  }
  if (s.ok()) s = file->Fsync(io, nullptr);
  const rocksdb::IOStatus closed = file->Close(io, nullptr);
  if (s.ok()) s = closed;
  if (!s.ok()) return fail(s);
  return std::unique_ptr<DiskReserve>(
      new DiskReserve(std::move(fs), path, bytes));
}

absl::Status DiskReserve::Release() {
  if (released_) return absl::OkStatus();
  const rocksdb::IOStatus s =
      fs_->DeleteFile(path_, rocksdb::IOOptions(), nullptr);
  if (!s.ok() && !s.IsNotFound() && !s.IsPathNotFound()) {
    return absl::InternalError(
        absl::StrCat("delete the disk reserve ", path_, ": ", s.ToString()));
  }
  released_ = true;
  return absl::OkStatus();
}

}  // namespace psdb::internal
