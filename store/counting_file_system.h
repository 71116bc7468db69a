// CountingFileSystem: a rocksdb::FileSystem over another that counts the
// bytes read through it (RocksDB's reads and psdb's own). A serving
// replica opens each checkpoint through one, so a swap can say how many
// bytes of checkpoint files it read (rpc/server/checkpoint_follower.h).
//
// Counted: every byte returned by Read, MultiRead and PositionedRead of
// files it opened for reading (sequential and random access). Not counted:
// metadata calls (stat, listing), writes, and pages the operating system
// reads ahead on its own.
//
// Thread-safety: thread-safe (an atomic counter); its files are used as
// RocksDB uses any file.
#ifndef PSDB_STORE_COUNTING_FILE_SYSTEM_H_
#define PSDB_STORE_COUNTING_FILE_SYSTEM_H_

#include <atomic>
#include <cstdint>
#include <memory>

#include "rocksdb/file_system.h"

namespace psdb::internal {

class CountingFileSystem final : public rocksdb::FileSystemWrapper {
 public:
  // Over `base` (nullptr: the local file system).
  explicit CountingFileSystem(std::shared_ptr<rocksdb::FileSystem> base);

  // Bytes read through this file system so far.
  uint64_t bytes_read() const {
    return bytes_read_->load(std::memory_order_relaxed);
  }

  const char* Name() const override { return "PsdbCountingFileSystem"; }
  rocksdb::IOStatus NewSequentialFile(
      const std::string& fname, const rocksdb::FileOptions& options,
      std::unique_ptr<rocksdb::FSSequentialFile>* result,
      rocksdb::IODebugContext* dbg) override;
  rocksdb::IOStatus NewRandomAccessFile(
      const std::string& fname, const rocksdb::FileOptions& options,
      std::unique_ptr<rocksdb::FSRandomAccessFile>* result,
      rocksdb::IODebugContext* dbg) override;

 private:
  // Shared with the files opened, which may outlive the file system.
  std::shared_ptr<std::atomic<uint64_t>> bytes_read_;
};

}  // namespace psdb::internal

#endif  // PSDB_STORE_COUNTING_FILE_SYSTEM_H_
