// DiskReserve: a ballast file that holds back disk space for the writes
// that must not fail: a store's Close, and the open of a store restarted
// on a full disk. Internal to psdb_store.
//
// The store's headroom rule (DiskTier::RoomFor) keeps room on the disk for
// everything a close must write, as long as the store is the one filling
// the disk. Something else can still fill it (another process, a log that
// grew); then the close's flush fails with ENOSPC. With a reserve, Close
// deletes the ballast and flushes again (CockroachDB keeps an "emergency
// ballast" file for the same reason); an open whose RocksDB open the disk
// refuses deletes it and opens again (psdb/store.h). The file is
// <store>/disk-reserve, written with zeros and synced (fallocate alone is
// not enough: a sparse or lazily allocated file holds back nothing),
// through StoreOptions::file_system.
//
// A DiskReserve is the store's handle on that file: held() while the file
// is on disk at its full size, not held while it is missing (deleted, or
// never written because the disk had no room), until Write() succeeds.
//
// Thread-safety: not thread-safe; the store serializes calls on it
// (Store::Impl::reserve_mu_).
#ifndef PSDB_STORE_DISK_RESERVE_H_
#define PSDB_STORE_DISK_RESERVE_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "rocksdb/file_system.h"

namespace psdb::internal {

class DiskReserve {
 public:
  // The ballast's file name inside the store directory.
  static constexpr const char* kFileName = "disk-reserve";

  // A reserve of `bytes` (> 0) at `dir`/disk-reserve; writes nothing.
  // held() is true if the file is there already at exactly `bytes`.
  DiskReserve(std::shared_ptr<rocksdb::FileSystem> fs, const std::string& dir,
              uint64_t bytes);
  DiskReserve(const DiskReserve&) = delete;
  DiskReserve& operator=(const DiskReserve&) = delete;

  // Makes the file exactly bytes() long, if it is not held (a shorter or
  // longer one is rewritten). ResourceExhausted naming the file and size
  // if the disk cannot hold it, Internal for another error; the partial
  // file is removed either way.
  absl::Status Write();
  // Deletes the ballast, giving its space back to the file system; OK if
  // it is already gone.
  absl::Status Release();

  bool held() const { return held_; }
  uint64_t bytes() const { return bytes_; }
  const std::string& path() const { return path_; }

 private:
  const std::shared_ptr<rocksdb::FileSystem> fs_;
  const std::string path_;
  const uint64_t bytes_;
  bool held_ = false;
};

}  // namespace psdb::internal

#endif  // PSDB_STORE_DISK_RESERVE_H_
