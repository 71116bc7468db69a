// DiskReserve: a ballast file that holds back disk space for the one write
// that must not fail, a store's Close. Internal to psdb_store.
//
// The store's headroom rule (DiskTier::RoomFor) keeps room on the disk for
// everything a close must write, as long as the store is the one filling
// the disk. Something else can still fill it (another process, a log that
// grew); then the close's flush fails with ENOSPC. With a reserve, Close
// deletes the ballast and flushes again (CockroachDB keeps an "emergency
// ballast" file for the same reason). The file is <store>/disk-reserve,
// written with zeros and synced at Open (fallocate alone is not enough: a
// sparse or lazily allocated file holds back nothing), through
// StoreOptions::file_system.
//
// Thread-safety: not thread-safe; the store creates and releases it under
// its open/close serialization.
#ifndef PSDB_STORE_DISK_RESERVE_H_
#define PSDB_STORE_DISK_RESERVE_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "rocksdb/file_system.h"

namespace psdb::internal {

class DiskReserve {
 public:
  // The ballast's file name inside the store directory.
  static constexpr const char* kFileName = "disk-reserve";

  // Makes `dir`/disk-reserve exactly `bytes` long (writing it if it is not
  // already; a shorter or longer one is rewritten). ResourceExhausted
  // naming the file and size if the disk cannot hold it (the partial file
  // is removed).
  static absl::StatusOr<std::unique_ptr<DiskReserve>> Create(
      std::shared_ptr<rocksdb::FileSystem> fs, const std::string& dir,
      uint64_t bytes);

  // Deletes the ballast, giving its space back to the file system; OK if
  // it is already gone. Later calls do nothing.
  absl::Status Release();
  bool released() const { return released_; }
  uint64_t bytes() const { return bytes_; }

 private:
  DiskReserve(std::shared_ptr<rocksdb::FileSystem> fs, std::string path,
              uint64_t bytes)
      : fs_(std::move(fs)), path_(std::move(path)), bytes_(bytes) {}

  const std::shared_ptr<rocksdb::FileSystem> fs_;
  const std::string path_;
  const uint64_t bytes_;
  bool released_ = false;
};

}  // namespace psdb::internal

#endif  // PSDB_STORE_DISK_RESERVE_H_
