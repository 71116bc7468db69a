// Wal: the store's optional write-ahead log (StoreOptions::durability =
// kWal). Internal to psdb_store. With it, every acknowledged push (and
// PutRows, DeleteRows, CreateTable) survives SIGKILL: on restart the
// records logged since the last flush are replayed through the optimizer
// and give bit-identical rows.
//
// Files (all through StoreOptions::file_system, so faults can be injected):
//   <path>/wal/<seq:016>.log   segments, written in seq order. Each starts
//                              with a 16-byte header: "PSDBWAL", the format
//                              version as one ASCII digit, and the u64 wal
//                              id of the database they belong to (meta key
//                              psdb/wal_id); a segment of another id is
//                              stale (the database was restored or
//                              recreated) and is deleted unreplayed.
// Format versions (kWalFormatVersion): 1 has the record types kPush to
// kAbort; 2 adds kPushSums, what a push writes since. A reader reads its
// version and older ones, and refuses (FailedPrecondition, naming the file)
// a segment of a newer version or a record whose type it does not know:
// skipping it would lose acknowledged updates. Builds that read only
// version 1 check neither, so a store that keeps a log also records store
// format version 2 (store_impl.h), which they refuse to open.
// Record (little-endian), one after another:
//   u32 header_crc    low 32 bits of XXH3-64 over the next 28 bytes
//   u32 payload_len   u32 type   u64 lsn   u64 payload_hash (XXH3-64)
//   payload
// A record that is short, or whose header or payload checksum does not
// match, ends its segment: it is a torn tail (a write cut by a kill or a
// failed write), never acknowledged. Reading goes on with the next segment.
// A record whose LSN is not above every LSN read before is a duplicate (a
// group rewritten after a failed write) and is skipped.
//
// Group commit: Append() puts a record into an in-memory buffer under a
// mutex (AppendFramed without copying it) and assigns its LSN (LSNs are
// consecutive and in buffer order); WaitWritten(lsn) returns once the record
// is written to the OS: the first waiter that finds no write in progress
// takes the whole buffer and writes it (small records coalesced into one
// write, large ones as they are) followed by one Sync when `sync`, so
// concurrent pushes share the writer's turn and its fsync. Without `sync` a
// record survives SIGKILL (the page cache is the kernel's) but not a power cut;
// with it (StoreOptions:: wal_sync) it survives both. After a failed write the
// group stays in the buffer and the next write goes to a new segment, so
// nothing is written after a torn record; its waiters get the error (their
// pushes are not acknowledged).
//
// How the store keeps replay from applying a record twice (store/README.md
// has the whole argument):
//  - Every slot of a kWal table carries the LSN of the last record applied
//    to its row. A dirty row written to RocksDB (eviction, flush) carries
//    that LSN as a tag in the same WriteBatch (meta key
//    psdb/wal_tag/<table>/<key>), and in kWal mode row writes go through
//    RocksDB's own WAL, so the row and its tag survive a kill together.
//  - Write-ahead rule: before such a batch is written, WaitWritten(max tag)
//    makes sure every record it includes is in the log. So a row on disk
//    never holds an update the log lacks, and a push in flight at a kill is
//    present whole (its record survived) or not at all.
//  - Records of one table are assigned and applied under that table's
//    mutex, so a row applies them in LSN order: a row tagged T includes
//    exactly the records <= T that touch it. Replay skips a record for a
//    row whose tag (or, once replay loaded it, whose slot LSN) is >= its LSN.
//  - Truncation (Store::Flush, Checkpoint, close): Rotate() waits until no
//    record is between Append and applied (ApplyScope), switches new writes
//    to a new segment and returns the cut; once every dirty row is in
//    RocksDB and memtables are flushed, the segments before the cut go.
//
// Thread-safety: thread-safe.
#ifndef PSDB_STORE_WAL_H_
#define PSDB_STORE_WAL_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/types/span.h"
#include "psdb/row.h"

namespace rocksdb {
class FileSystem;
class FSWritableFile;
}  // namespace rocksdb

namespace psdb::internal {

enum class WalRecordType : uint32_t {
  kPush = 1,         // EncodePushRecord (written by older versions: read)
  kPutRows = 2,      // EncodePutRowsRecord
  kDeleteRows = 3,   // EncodeDeleteRowsRecord
  kCreateTable = 4,  // payload: the table name
  kAbort = 5,        // payload: u64 LSN of a record whose apply failed
  kPushSums = 6,     // EncodePushSumsRecord (what a push writes)
};

// The segment format this build writes, and the newest it reads.
inline constexpr uint32_t kWalFormatVersion = 2;

inline constexpr size_t kWalRecordHeaderBytes = 32;
inline constexpr size_t kWalSegmentHeaderBytes = 16;

// Payloads of the record types (little-endian; `name` is the table):
//   kPush        u16 len, name, i64 step (resolved), u32 n, u32 dim,
//                u64 keys[n], f32 grads[n * dim]
//   kPushSums    u16 len, name, i64 step (resolved), u32 n, u32 dim,
//                u64 keys[n] (distinct), u32 occurrences[n],
//                f32 sums[n * dim]: the push after de-duplication, what the
//                optimizer applied (each key's gradients summed in batch
//                order, keys skipped as non-finite left out), so replay
//                gives the same bits from about half the bytes of a Zipf
//                batch's raw gradients
//   kPutRows     u16 len, name, u32 n, u32 dim, u32 state_size, u64 keys[n],
//                f32 values[n * dim], f32 state[n * state_size],
//                {i64 last_update_step, u64 update_count, u64 frequency}[n]
//   kDeleteRows  u16 len, name, u32 n, u64 keys[n]
// Encoders replace *out with kWalRecordHeaderBytes of room for the record
// header followed by the payload (for Wal::AppendFramed); decoders take the
// payload alone, return views into it (valid while it is) and DataLoss for a
// malformed payload.
struct WalRowsRecord {
  absl::string_view table;
  int64_t step = 0;  // kPush
  uint32_t n = 0;
  uint32_t dim = 0;
  uint32_t state_size = 0;        // kPutRows
  const char* keys = nullptr;     // n u64, unaligned
  const char* occ = nullptr;      // kPushSums: n u32, unaligned
  const char* floats = nullptr;   // grads, or values then state
  const char* headers = nullptr;  // kPutRows: n * 24 bytes
};
void EncodePushRecord(absl::string_view table, int64_t step,
                      absl::Span<const uint64_t> keys,
                      absl::Span<const float> grads, int dim, std::string* out);
// `keys` distinct, occ[u] their occurrences in the batch, sums[u * dim ...]
// their summed gradients; the rows u with skip[u] != 0 are left out (skip
// empty: none). The step is written at kWalPushStepOffset.
void EncodePushSumsRecord(absl::string_view table, int64_t step,
                          absl::Span<const uint64_t> keys,
                          absl::Span<const uint32_t> occ,
                          absl::Span<const float> sums, int dim,
                          absl::Span<const uint8_t> skip, std::string* out);
// Where a kPush or kPushSums record's step is, from the start of the framed
// record (the header's room included), for a table name of `name_size`.
inline size_t WalPushStepOffset(size_t name_size) {
  return kWalRecordHeaderBytes + 2 + name_size;
}
void EncodePutRowsRecord(absl::string_view table,
                         absl::Span<const uint64_t> keys, const RowBatch& rows,
                         std::string* out);
void EncodeDeleteRowsRecord(absl::string_view table,
                            absl::Span<const uint64_t> keys, std::string* out);
absl::StatusOr<WalRowsRecord> DecodeRowsRecord(WalRecordType type,
                                               absl::string_view payload);
// Copies n unaligned u64 / f32 / u32 out of a decoded record.
std::vector<uint64_t> WalKeys(const WalRowsRecord& r);
std::vector<float> WalFloats(const char* p, size_t n);
std::vector<uint32_t> WalU32s(const char* p, size_t n);

// A segment's file name (<seq:016>.log) and its 16-byte header.
std::string WalSegmentName(uint64_t seq);
std::string WalSegmentHeader(uint32_t version, uint64_t wal_id);

// Appends one framed record to *out.
void AppendWalRecord(WalRecordType type, uint64_t lsn,
                     absl::string_view payload, std::string* out);

struct WalRecordView {
  WalRecordType type;
  uint64_t lsn;
  absl::string_view payload;
};

struct WalReadStats {
  uint64_t segments = 0;
  uint64_t records = 0;
  uint64_t duplicates = 0;
  uint64_t stale_segments = 0;  // other wal id: not read
  uint64_t torn_bytes = 0;      // dropped torn tails, all segments
  uint64_t last_lsn = 0;        // 0: no record
  uint64_t last_seq = 0;        // highest segment seq seen (0: none)
};

// Reads the segments of `dir` whose wal id is `wal_id`, in seq order, and
// calls fn for every record (LSNs strictly increasing). A missing dir is
// an empty log. An error of fn stops the read and is returned.
// FailedPrecondition for a segment of a newer format version or a record
// of an unknown type (see the file comment).
absl::StatusOr<WalReadStats> ReadWal(
    rocksdb::FileSystem* fs, const std::string& dir, uint64_t wal_id,
    absl::FunctionRef<absl::Status(const WalRecordView&)> fn);

// Deletes every segment of `dir` with seq < `below_seq` (all: UINT64_MAX).
absl::Status RemoveWalSegments(rocksdb::FileSystem* fs, const std::string& dir,
                               uint64_t below_seq);

class Wal {
 public:
  struct Options {
    std::shared_ptr<rocksdb::FileSystem> fs;  // not null
    std::string dir;
    uint64_t wal_id = 0;
    // Sync (fsync) each group before its waiters return.
    bool sync = false;
    // The LSN the next record gets: above every LSN in the log and in any
    // row tag.
    uint64_t next_lsn = 1;
    // Seq of the first segment this writer creates: above every existing one.
    uint64_t next_seq = 1;
  };
  // Creates `dir` if missing; the first segment is created on first write.
  static absl::StatusOr<std::unique_ptr<Wal>> Open(Options options);
  ~Wal();
  Wal(const Wal&) = delete;
  Wal& operator=(const Wal&) = delete;

  // Buffers one record and returns its LSN. `payload` is built by the caller.
  uint64_t Append(WalRecordType type, absl::string_view payload);
  // The same without a copy: *framed holds kWalRecordHeaderBytes of room
  // and then the payload (as the Encode*Record functions leave it); it is
  // moved into the buffer (left empty).
  uint64_t AppendFramed(WalRecordType type, std::string* framed);
  // Returns once every record up to `lsn` is written to the OS (and synced
  // with Options::sync), writing the buffer itself if no one else is. An
  // error if the write that carried `lsn` failed (the records stay buffered
  // and go to a new segment with the next write).
  absl::Status WaitWritten(uint64_t lsn);

  // Held (shared) from Append to the end of applying the record, so that
  // Rotate's cut never falls between the two.
  class ABSL_SCOPED_LOCKABLE ApplyScope {
   public:
    explicit ApplyScope(Wal* wal) ABSL_SHARED_LOCK_FUNCTION(wal->apply_mu_)
        : wal_(wal) {
      wal_->apply_mu_.ReaderLock();
    }
    ~ApplyScope() ABSL_UNLOCK_FUNCTION() { wal_->apply_mu_.ReaderUnlock(); }
    ApplyScope(const ApplyScope&) = delete;
    ApplyScope& operator=(const ApplyScope&) = delete;

   private:
    Wal* const wal_;
  };

  struct Cut {
    uint64_t lsn;       // every record <= lsn was fully applied at the cut
    uint64_t keep_seq;  // segments with seq < keep_seq hold only such records
  };
  // Makes later writes go to a new segment. Once every row changed by the
  // records <= cut.lsn is durably in RocksDB, RemoveWalSegments(keep_seq)
  // may delete the older segments.
  Cut Rotate();

  uint64_t next_lsn() const;
  uint64_t written_lsn() const;
  const std::string& dir() const { return options_.dir; }
  rocksdb::FileSystem* fs() const { return options_.fs.get(); }

  // Statistics: groups written (write() calls) and records in them.
  uint64_t groups() const;
  uint64_t records() const;

 private:
  explicit Wal(Options options);
  // Opens segment next_seq_ (REQUIRES: the caller is the writer).
  absl::Status OpenSegment(uint64_t seq);

  const Options options_;
  absl::Mutex apply_mu_;

  mutable absl::Mutex mu_;
  // Framed records not yet written, in LSN order.
  std::vector<std::string> buf_ ABSL_GUARDED_BY(mu_);
  uint64_t next_lsn_ ABSL_GUARDED_BY(mu_);
  uint64_t buffered_lsn_ ABSL_GUARDED_BY(mu_);  // last LSN in buf_
  uint64_t written_lsn_ ABSL_GUARDED_BY(mu_);
  bool writing_ ABSL_GUARDED_BY(mu_) = false;
  // The next write opens segment next_seq_ first (after a rotation or a
  // failed write, and before the first write).
  bool need_segment_ ABSL_GUARDED_BY(mu_) = true;
  uint64_t next_seq_ ABSL_GUARDED_BY(mu_);
  // Status of the last write, and the highest LSN it was meant to cover.
  absl::Status last_error_ ABSL_GUARDED_BY(mu_);
  uint64_t failed_lsn_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t groups_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t records_ ABSL_GUARDED_BY(mu_) = 0;
  // Owned by the writer (writing_ == true) or under mu_ when idle.
  std::unique_ptr<rocksdb::FSWritableFile> file_;
};

}  // namespace psdb::internal

#endif  // PSDB_STORE_WAL_H_
