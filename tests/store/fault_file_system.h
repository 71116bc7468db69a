// FaultFileSystem: a rocksdb::FileSystem for tests that injects the faults a
// real disk has: a full disk (ENOSPC), an I/O error (EIO), an unreadable
// file, and a power cut. Set it as StoreOptions::file_system (and pass it to
// the checkpoint tools) and every file of the store goes through it.
//
// What it does, over the default (POSIX) file system:
// - Counts the "write ops" (Append and PositionedAppend on files opened for
//   writing through it) and the "sync ops" (Sync and Fsync of such files, and
//   Fsync of directories opened with NewDirectory), so a test can enumerate
//   every write and sync an operation does.
// - InjectFault(): fails the Nth counted op after the call (and, if sticky,
//   every later one) with ENOSPC (IOStatus::NoSpace) or EIO
//   (IOStatus::IOError), the message naming the op, the file and the errno
//   text. A failed op changes nothing on disk. With `freeze` set, once the
//   fault fires every later mutating call (create, rename, link, delete,
//   mkdir, truncate) fails with the same error too: the machine has lost
//   power and nothing it does afterwards reaches the disk.
// - FailReadsOf(): opening for read (sequential, random access, memory map)
//   a file whose path contains a given string fails with EIO.
// - PowerCut(): simulates the disk as it would be found after a power loss,
//   then forgets everything it tracked (what is left is the durable state):
//   * a file created (NewWritableFile, ReuseWritableFile) through it and
//     never synced since is deleted; a file synced at least once is
//     truncated back to its size at its last successful Sync/Fsync
//     (ReopenWritableFile: back to the size it was reopened at, or its last
//     sync). A file fsync also makes the file's directory entry durable
//     (ext4 behaves so; POSIX asks for a directory fsync as well).
//   * a RenameFile, LinkFile or CreateDir(IfMissing) not followed by a
//     successful Fsync of the destination's parent directory is undone,
//     newest first: the link is removed; the new directory is removed with
//     everything in it (its entry never reached the disk);
//     the renamed file goes back to its old name and a file the rename
//     replaced gets its old content back (kept in memory, so only for
//     replaced files up to kMaxReplacedBytes; a larger replaced file or a
//     replaced (empty) directory is not restored: that rename is treated
//     as durable). Renaming a directory carries what is tracked under it.
//   Not simulated: DeleteFile and DeleteDir are durable at once (a deletion
//   is never undone); data
//   written by other means than an FSWritableFile obtained here (RandomRW
//   files, info LOG files, other processes) is never dropped; partial
//   (torn) writes: an append is either all there or all dropped; the
//   page-cache reordering a real kernel may do among unsynced files.
//   Writable file handles opened before PowerCut() fail every later call
//   with EIO: call it with the store closed.
//
// Thread-safety: every method is thread-safe (one internal mutex); files
// handed out may be used from any thread, as RocksDB does.
#ifndef PSDB_TESTS_STORE_FAULT_FILE_SYSTEM_H_
#define PSDB_TESTS_STORE_FAULT_FILE_SYSTEM_H_

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "rocksdb/file_system.h"

namespace psdb::testing {

class FaultFileSystem : public rocksdb::FileSystemWrapper {
 public:
  enum class Error { kNoSpace, kIo };  // ENOSPC, EIO.
  enum class Ops { kWrites, kSyncs, kWritesAndSyncs };

  struct Fault {
    // Which ops count towards `nth`. Default: kWritesAndSyncs
    Ops ops = Ops::kWritesAndSyncs;
    // 1-based index, among the counted ops issued after InjectFault(), of
    // the op that fails. Default: 1 (the next one)
    int64_t nth = 1;
    // Default: kNoSpace
    Error error = Error::kNoSpace;
    // Fail every later counted op too (a disk that stays full). Default: true
    bool sticky = true;
    // Once fired, fail every later mutating call of any kind (a power loss:
    // see the file comment). Default: false
    bool freeze = false;
  };

  // Largest file whose content a rename over it keeps for PowerCut().
  static constexpr uint64_t kMaxReplacedBytes = 1 << 20;

  FaultFileSystem();
  const char* Name() const override { return "PsdbFaultFileSystem"; }

  // Replaces any pending fault; the count restarts from zero.
  void InjectFault(const Fault& fault);
  // No more injected write/sync faults (the disk has space again), reads of
  // named files succeed again.
  void ClearFaults();
  // Whether the injected fault has fired (at least one op failed).
  bool fault_fired() const;
  // The op the injected fault failed first ("append <path>"), or "".
  std::string fired_op() const;

  // Opening for read a file whose path contains `name_part` fails with EIO.
  void FailReadsOf(const std::string& name_part);

  // Counts since construction (failed ops included).
  int64_t writes() const;
  int64_t syncs() const;

  // See the file comment; then the machine is back up: faults cleared (as
  // ClearFaults()), nothing tracked. Handles opened for writing before it
  // fail every later write or sync with EIO (close the store first).
  void PowerCut();

  // rocksdb::FileSystem overrides.
  rocksdb::IOStatus NewSequentialFile(
      const std::string& f, const rocksdb::FileOptions& o,
      std::unique_ptr<rocksdb::FSSequentialFile>* r,
      rocksdb::IODebugContext* dbg) override;
  rocksdb::IOStatus NewRandomAccessFile(
      const std::string& f, const rocksdb::FileOptions& o,
      std::unique_ptr<rocksdb::FSRandomAccessFile>* r,
      rocksdb::IODebugContext* dbg) override;
  rocksdb::IOStatus NewMemoryMappedFileBuffer(
      const std::string& f,
      std::unique_ptr<rocksdb::MemoryMappedFileBuffer>* r) override;
  rocksdb::IOStatus NewWritableFile(const std::string& f,
                                    const rocksdb::FileOptions& o,
                                    std::unique_ptr<rocksdb::FSWritableFile>* r,
                                    rocksdb::IODebugContext* dbg) override;
  rocksdb::IOStatus ReopenWritableFile(
      const std::string& f, const rocksdb::FileOptions& o,
      std::unique_ptr<rocksdb::FSWritableFile>* r,
      rocksdb::IODebugContext* dbg) override;
  rocksdb::IOStatus ReuseWritableFile(
      const std::string& f, const std::string& old_f,
      const rocksdb::FileOptions& o,
      std::unique_ptr<rocksdb::FSWritableFile>* r,
      rocksdb::IODebugContext* dbg) override;
  rocksdb::IOStatus NewRandomRWFile(const std::string& f,
                                    const rocksdb::FileOptions& o,
                                    std::unique_ptr<rocksdb::FSRandomRWFile>* r,
                                    rocksdb::IODebugContext* dbg) override;
  rocksdb::IOStatus NewDirectory(const std::string& d,
                                 const rocksdb::IOOptions& o,
                                 std::unique_ptr<rocksdb::FSDirectory>* r,
                                 rocksdb::IODebugContext* dbg) override;
  rocksdb::IOStatus DeleteFile(const std::string& f,
                               const rocksdb::IOOptions& o,
                               rocksdb::IODebugContext* dbg) override;
  rocksdb::IOStatus Truncate(const std::string& f, size_t size,
                             const rocksdb::IOOptions& o,
                             rocksdb::IODebugContext* dbg) override;
  rocksdb::IOStatus CreateDir(const std::string& d, const rocksdb::IOOptions& o,
                              rocksdb::IODebugContext* dbg) override;
  rocksdb::IOStatus CreateDirIfMissing(const std::string& d,
                                       const rocksdb::IOOptions& o,
                                       rocksdb::IODebugContext* dbg) override;
  rocksdb::IOStatus DeleteDir(const std::string& d, const rocksdb::IOOptions& o,
                              rocksdb::IODebugContext* dbg) override;
  rocksdb::IOStatus RenameFile(const std::string& src, const std::string& dst,
                               const rocksdb::IOOptions& o,
                               rocksdb::IODebugContext* dbg) override;
  rocksdb::IOStatus LinkFile(const std::string& src, const std::string& dst,
                             const rocksdb::IOOptions& o,
                             rocksdb::IODebugContext* dbg) override;

 private:
  class File;
  class Directory;
  // What PowerCut() must do to one file written through this; shared by
  // the path's entry in files_ and the handles writing it.
  struct Tracked {
    bool created = false;  // Created here and never synced since.
    uint64_t size = 0;     // Its length, as written through this.
    uint64_t synced = 0;   // Its length at the last successful sync.
  };
  // A rename, link or new directory whose directory entry is not durable
  // yet.
  struct PendingEntry {
    enum class Kind { kRename, kLink, kMkdir };
    Kind kind = Kind::kRename;
    std::string src;
    std::string dst;
    bool replaced = false;         // The rename replaced an existing dst.
    std::string replaced_content;  // Its content, to put back.
  };

  // Counts one op of kind `is_sync` and says whether it must fail.
  rocksdb::IOStatus CountOp(bool is_sync, const std::string& what,
                            const std::string& path);
  // Fails when frozen (see Fault::freeze).
  rocksdb::IOStatus CheckFrozen(const std::string& what,
                                const std::string& path);
  rocksdb::IOStatus CheckRead(const std::string& path);
  rocksdb::IOStatus MakeError(Error error, const std::string& what,
                              const std::string& path) const;
  void WrapWritable(const std::string& f, uint64_t initial_size, bool created,
                    std::unique_ptr<rocksdb::FSWritableFile>* r);
  // Called by File around its writes and syncs (`generation`: the one the
  // file was opened in).
  rocksdb::IOStatus BeforeWrite(bool is_sync, uint64_t generation,
                                const std::string& what,
                                const std::string& path);
  // kAppend: n more bytes; kEndAt: written up to offset n; kTruncate: cut
  // to n bytes.
  enum class WriteKind { kAppend, kEndAt, kTruncate };
  void AfterWrite(Tracked& t, uint64_t n, WriteKind kind);
  void AfterSync(Tracked& t);
  void AfterDirectorySync(const std::string& dir);
  // Re-keys the tracked file `from` (or every one under the directory
  // `from`) to `to`.
  void MoveTrackedLocked(const std::string& from, const std::string& to)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  mutable absl::Mutex mu_;
  int64_t writes_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t syncs_ ABSL_GUARDED_BY(mu_) = 0;
  bool fault_armed_ ABSL_GUARDED_BY(mu_) = false;
  Fault fault_ ABSL_GUARDED_BY(mu_);
  int64_t fault_count_ ABSL_GUARDED_BY(mu_) = 0;
  bool fired_ ABSL_GUARDED_BY(mu_) = false;
  std::string fired_op_ ABSL_GUARDED_BY(mu_);
  bool frozen_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<std::string> failing_reads_ ABSL_GUARDED_BY(mu_);
  uint64_t generation_ ABSL_GUARDED_BY(mu_) = 0;
  std::map<std::string, std::shared_ptr<Tracked>> files_ ABSL_GUARDED_BY(mu_);
  std::vector<PendingEntry> pending_ ABSL_GUARDED_BY(mu_);
};

}  // namespace psdb::testing

#endif  // PSDB_TESTS_STORE_FAULT_FILE_SYSTEM_H_
