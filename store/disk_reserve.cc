#include "store/disk_reserve.h"

#include <algorithm>
#include <string>

#include "absl/strings/str_cat.h"

namespace psdb::internal {

DiskReserve::DiskReserve(std::shared_ptr<rocksdb::FileSystem> fs,
                         const std::string& dir, uint64_t bytes)
    : fs_(std::move(fs)),
      path_(absl::StrCat(dir, "/", kFileName)),
      bytes_(bytes) {
  uint64_t size = 0;
  held_ = fs_->GetFileSize(path_, rocksdb::IOOptions(), &size, nullptr).ok() &&
          size == bytes_;
}

absl::Status DiskReserve::Write() {
  if (held_) return absl::OkStatus();
  const rocksdb::IOOptions io;
  auto fail = [&](const rocksdb::IOStatus& s) -> absl::Status {
    (void)fs_->DeleteFile(path_, io, nullptr);
    const std::string msg =
        absl::StrCat("cannot reserve ", bytes_, " bytes of disk in ", path_,
                     " (StoreOptions::disk_reserve_bytes): ", s.ToString());
    return s.IsNoSpace() ? absl::ResourceExhaustedError(msg)
                         : absl::InternalError(msg);
  };
  std::unique_ptr<rocksdb::FSWritableFile> file;
  rocksdb::IOStatus s =
      fs_->NewWritableFile(path_, rocksdb::FileOptions(), &file, nullptr);
  if (!s.ok()) return fail(s);
  const std::string zeros(1 << 20, '\0');
  for (uint64_t done = 0; done < bytes_ && s.ok();) {
    const uint64_t n = std::min<uint64_t>(zeros.size(), bytes_ - done);
    s = file->Append(rocksdb::Slice(zeros.data(), n), io, nullptr);
    done += n;
  }
  if (s.ok()) s = file->Fsync(io, nullptr);
  const rocksdb::IOStatus closed = file->Close(io, nullptr);
  if (s.ok()) s = closed;
  if (!s.ok()) return fail(s);
  held_ = true;
  return absl::OkStatus();
}

absl::Status DiskReserve::Release() {
  const rocksdb::IOStatus s =
      fs_->DeleteFile(path_, rocksdb::IOOptions(), nullptr);
  if (!s.ok() && !s.IsNotFound() && !s.IsPathNotFound()) {
    return absl::InternalError(
        absl::StrCat("delete the disk reserve ", path_, ": ", s.ToString()));
  }
  held_ = false;
  return absl::OkStatus();
}

}  // namespace psdb::internal
