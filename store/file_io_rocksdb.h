// FileIoOver: psdb's file operations (util/file_io.h) over a
// rocksdb::FileSystem — StoreOptions::file_system, the one RocksDB's own
// files go through — and EnvOver, the rocksdb::Env built over the same file
// system for what takes an Env (read-only opens, rocksdb::Checkpoint,
// SstFileWriter). Internal to psdb_store and psdb_checkpoint.
//
// Thread-safety: the FileIo returned is safe to call from any thread (the
// rocksdb::FileSystem contract); the caller serializes operations on the
// same paths.
#ifndef PSDB_STORE_FILE_IO_ROCKSDB_H_
#define PSDB_STORE_FILE_IO_ROCKSDB_H_

#include <memory>

#include "rocksdb/env.h"
#include "rocksdb/file_system.h"
#include "util/file_io.h"

namespace psdb::internal {

// `fs`, or the local file system (rocksdb::FileSystem::Default()) when it
// is nullptr: what StoreOptions::file_system's nullptr means.
std::shared_ptr<rocksdb::FileSystem> FileSystemOr(
    std::shared_ptr<rocksdb::FileSystem> fs);

// psdb's file operations over FileSystemOr(fs). The FileIo keeps it alive.
std::shared_ptr<const FileIo> FileIoOver(
    std::shared_ptr<rocksdb::FileSystem> fs);

// An Env whose files go through `fs`, for DBOptions::env; nullptr when `fs`
// is nullptr (RocksDB's default Env, over the local file system). The Env
// must outlive every DB opened with it.
std::unique_ptr<rocksdb::Env> EnvOver(
    const std::shared_ptr<rocksdb::FileSystem>& fs);

}  // namespace psdb::internal

#endif  // PSDB_STORE_FILE_IO_ROCKSDB_H_
