// FileIo: the file operations psdb itself does (manifests, checkpoint
// directories, restore links and copies, reshard output), as one small
// interface, so that the store routes every one of them through
// StoreOptions::file_system (FileIoOver, store/file_io_rocksdb.h) and tests
// inject faults there (tests/store/fault_file_system.h).
//
// LocalFileIo() is the same operations on the local file system through
// POSIX calls, for the code that links no RocksDB (psdb_manifest and the
// control plane's cluster manifests); the engine and the checkpoint tools
// use FileIoOver(), whose default is RocksDB's own local file system.
//
// Errors name the operation and the path. Paths are plain strings, '/'
// separated.
//
// Thread-safety: implementations are stateless over their file system and
// safe to call from any thread; the caller serializes operations on the same
// paths.
#ifndef PSDB_UTIL_FILE_IO_H_
#define PSDB_UTIL_FILE_IO_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace psdb {

class FileIo {
 public:
  virtual ~FileIo() = default;

  // The whole file. NotFound if it does not exist.
  virtual absl::StatusOr<std::string> ReadFile(
      const std::string& path) const = 0;
  // Writes `data` to <path>.tmp, syncs it, renames it over `path` and syncs
  // the directory: a crash at any point leaves the old file (or none) or
  // the complete new one.
  virtual absl::Status WriteFileAtomically(const std::string& path,
                                           absl::string_view data) const = 0;
  // Whether `path` exists (file or directory); false when it cannot be
  // told.
  virtual bool Exists(const std::string& path) const = 0;
  virtual bool IsDirectory(const std::string& path) const = 0;
  // Names (not paths) of the entries of `dir`, unsorted, without "." and
  // "..".
  virtual absl::StatusOr<std::vector<std::string>> ListChildren(
      const std::string& dir) const = 0;
  // Creates `dir`; AlreadyExists if something is there.
  virtual absl::Status CreateDir(const std::string& dir) const = 0;
  // Creates `dir` and its missing parents; OK if it exists.
  virtual absl::Status CreateDirs(const std::string& dir) const = 0;
  // Removes one file; OK if it does not exist.
  virtual absl::Status DeleteFile(const std::string& path) const = 0;
  // Removes `path` and everything under it; OK if it does not exist.
  virtual absl::Status DeleteRecursively(const std::string& path) const = 0;
  // Renames a file or a directory (replacing `to` if it is a file or an
  // empty directory).
  virtual absl::Status Rename(const std::string& from,
                              const std::string& to) const = 0;
  // Hard-links `from` to `to`, or copies it (and syncs the copy) when the
  // file system cannot link them (another device).
  virtual absl::Status LinkOrCopyFile(const std::string& from,
                                      const std::string& to) const = 0;
  // Copies `from` to `to` (replacing it) and syncs the copy.
  virtual absl::Status CopyFile(const std::string& from,
                                const std::string& to) const = 0;
  // Fsyncs the directory `dir` (makes renames and links into it durable).
  virtual absl::Status SyncDir(const std::string& dir) const = 0;
};

// The local file system through POSIX calls (no RocksDB).
const FileIo& LocalFileIo();

// The parent directory of a '/'-separated path ("." when it has none).
std::string ParentDir(absl::string_view path);

}  // namespace psdb

#endif  // PSDB_UTIL_FILE_IO_H_
