// SmallTmpfs: a real file system that fills up: a tmpfs of a given size
// mounted on a fresh directory, for tests of a full disk (psdb/store.h,
// "Disk full and I/O errors"). mount(2) needs CAP_SYS_ADMIN: Mount fails
// with PermissionDenied saying so where the test runs without it (some CI
// containers), and the tests GTEST_SKIP with that message.
//
// Thread-safety: one thread per object.
#ifndef PSDB_TESTS_TESTING_SMALL_TMPFS_H_
#define PSDB_TESTS_TESTING_SMALL_TMPFS_H_

#include <cstdint>
#include <limits>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace psdb::testing {

class SmallTmpfs {
 public:
  // Mounts a tmpfs of `bytes` on a new directory under $TEST_TMPDIR (or
  // /tmp).
  static absl::StatusOr<std::unique_ptr<SmallTmpfs>> Mount(uint64_t bytes);
  // Unmounts (lazily, should a process still hold a file) and removes the
  // directory.
  ~SmallTmpfs();
  SmallTmpfs(const SmallTmpfs&) = delete;
  SmallTmpfs& operator=(const SmallTmpfs&) = delete;

  const std::string& path() const { return path_; }
  std::string Sub(absl::string_view name) const;
  // Bytes free for an unprivileged writer now (statvfs).
  uint64_t FreeBytes() const;
  // Writes zeros to the file `name` until the file system refuses (ENOSPC)
  // or `max_bytes` are written; returns the bytes written.
  absl::StatusOr<uint64_t> Fill(
      absl::string_view name,
      uint64_t max_bytes = std::numeric_limits<uint64_t>::max());
  // Deletes the file `name` (its space returns at once).
  absl::Status Remove(absl::string_view name);
  // Remounts with `bytes` as the size: space freed (or taken) in one step,
  // files kept.
  absl::Status Resize(uint64_t bytes);

 private:
  explicit SmallTmpfs(std::string path) : path_(std::move(path)) {}
  std::string path_;
};

}  // namespace psdb::testing

#endif  // PSDB_TESTS_TESTING_SMALL_TMPFS_H_
