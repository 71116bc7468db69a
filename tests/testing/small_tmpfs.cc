#include "tests/testing/small_tmpfs.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/mount.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <vector>

#include "absl/strings/str_cat.h"

namespace psdb::testing {

absl::StatusOr<std::unique_ptr<SmallTmpfs>> SmallTmpfs::Mount(uint64_t bytes) {
  const char* base = getenv("TEST_TMPDIR");
  std::string templ =
      absl::StrCat(base != nullptr && *base ? base : "/tmp", "/psdb-fs-XXXXXX");
  std::vector<char> buf(templ.begin(), templ.end());
  buf.push_back('\0');
  if (mkdtemp(buf.data()) == nullptr) {
    return absl::InternalError(
        absl::StrCat("mkdtemp ", templ, ": ", strerror(errno)));
  }
  std::string path(buf.data());
  const std::string data = absl::StrCat("size=", bytes);
  if (mount("tmpfs", path.c_str(), "tmpfs", MS_NOSUID | MS_NODEV,
            data.c_str()) != 0) {
    const int err = errno;
    rmdir(path.c_str());
    const std::string msg =
        absl::StrCat("mount -t tmpfs -o ", data, " tmpfs ", path, ": ",
                     strerror(err), " (mounting needs CAP_SYS_ADMIN)");
    if (err == EPERM || err == EACCES) {
      return absl::PermissionDeniedError(msg);
    }
    return absl::InternalError(msg);
  }
  return std::unique_ptr<SmallTmpfs>(new SmallTmpfs(std::move(path)));
}

SmallTmpfs::~SmallTmpfs() {
  umount2(path_.c_str(), MNT_DETACH);
  std::error_code ec;
  std::filesystem::remove_all(path_, ec);
}

absl::Status SmallTmpfs::Resize(uint64_t bytes) {
  const std::string data = absl::StrCat("size=", bytes);
  if (mount("tmpfs", path_.c_str(), "tmpfs", MS_REMOUNT | MS_NOSUID | MS_NODEV,
            data.c_str()) != 0) {
    return absl::InternalError(absl::StrCat("mount -o remount,", data, " ",
                                            path_, ": ", strerror(errno)));
  }
  return absl::OkStatus();
}

std::string SmallTmpfs::Sub(absl::string_view name) const {
  return absl::StrCat(path_, "/", name);
}

uint64_t SmallTmpfs::FreeBytes() const {
  struct statvfs st;
  if (statvfs(path_.c_str(), &st) != 0) return 0;
  return static_cast<uint64_t>(st.f_bavail) * st.f_frsize;
}

absl::StatusOr<uint64_t> SmallTmpfs::Fill(absl::string_view name,
                                          uint64_t max_bytes) {
  const std::string file = Sub(name);
  const int fd = open(file.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
  if (fd < 0) {
    return absl::InternalError(
        absl::StrCat("open ", file, ": ", strerror(errno)));
  }
  const std::vector<char> zeros(1 << 20, 0);
  uint64_t written = 0;
  // Large writes first, then page-sized ones for the last partial megabyte.
  for (size_t chunk : {zeros.size(), size_t{4096}}) {
    while (written < max_bytes) {
      const size_t n =
          static_cast<size_t>(std::min<uint64_t>(chunk, max_bytes - written));
      const ssize_t w = write(fd, zeros.data(), n);
      if (w <= 0) {
        if (w < 0 && errno != ENOSPC) {
          const int err = errno;
          close(fd);
          return absl::InternalError(
              absl::StrCat("write ", file, ": ", strerror(err)));
        }
        break;
      }
      written += static_cast<uint64_t>(w);
    }
  }
  close(fd);
  return written;
}

absl::Status SmallTmpfs::Remove(absl::string_view name) {
  const std::string file = Sub(name);
  if (unlink(file.c_str()) != 0) {
    return absl::InternalError(
        absl::StrCat("unlink ", file, ": ", strerror(errno)));
  }
  return absl::OkStatus();
}

}  // namespace psdb::testing
