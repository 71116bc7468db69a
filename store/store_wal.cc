// The store's side of the write-ahead log (store/wal.h): which log belongs
// to the database, replay at open, truncation at flush points.
//
// Replay reads the log twice: first for the LSNs of aborted records (an
// apply that failed after its record was appended) and of each table's
// latest CreateTable (records before it belong to a dropped incarnation of
// the name), then to apply every other record, in LSN order, to the rows
// that do not include it yet (Table::Replay*). Records of tables that no
// longer exist are skipped. Then everything is flushed and the replayed
// segments deleted, so a crash during replay just replays again.
#include <random>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "rocksdb/file_system.h"
#include "store/store_impl.h"
#include "store/store_meta.h"
#include "util/status_macros.h"

namespace psdb {
namespace {

using internal::kMetaWalId;
using internal::kMetaWalNextLsn;
using internal::kMetaWalTag;
using internal::Table;
using internal::Wal;
using internal::WalRecordType;
using internal::WalRecordView;
using internal::WalRowsRecord;

uint64_t ParseU64(const absl::StatusOr<std::string>& v) {
  uint64_t x = 0;
  if (v.ok()) (void)absl::SimpleAtoi(*v, &x);
  return x;
}

uint64_t NewWalId() {
  std::random_device rd;
  uint64_t id = 0;
  while (id == 0) id = (uint64_t{rd()} << 32) ^ rd();
  return id;
}

}  // namespace

absl::Status Store::Impl::PrepareWal(bool fresh) {
  wal_dir_ = absl::StrCat(path_, "/wal");
  wal_id_ = ParseU64(disk_->GetMeta(kMetaWalId));
  const bool want = options_.durability == Durability::kWal;
  if (fresh || (wal_id_ == 0 && want)) {
    // A log belongs to one database: one just created or restored starts
    // without one, and tags that came with a checkpoint mean nothing here.
    PSDB_RETURN_IF_ERROR(
        internal::RemoveWalSegments(fs_.get(), wal_dir_, UINT64_MAX));
    PSDB_RETURN_IF_ERROR(disk_->DeleteMetaPrefix(kMetaWalTag));
    wal_id_ = want ? NewWalId() : 0;
    if (want) {
      PSDB_RETURN_IF_ERROR(disk_->PutMeta(kMetaWalId, absl::StrCat(wal_id_)));
    }
  }
  uint64_t next_lsn =
      std::max<uint64_t>(1, ParseU64(disk_->GetMeta(kMetaWalNextLsn)));
  internal::WalReadStats stats;
  if (wal_id_ != 0) {
    PSDB_ASSIGN_OR_RETURN(stats, internal::ReadWal(fs_.get(), wal_dir_, wal_id_,
                                                   [](const WalRecordView&) {
                                                     return absl::OkStatus();
                                                   }));
  }
  wal_records_ = stats.records;
  next_lsn = std::max(next_lsn, stats.last_lsn + 1);
  if (want) {
    Wal::Options o;
    o.fs = fs_;
    o.dir = wal_dir_;
    o.wal_id = wal_id_;
    o.sync = options_.wal_sync;
    o.next_lsn = next_lsn;
    o.next_seq = stats.last_seq + 1;
    PSDB_ASSIGN_OR_RETURN(wal_, Wal::Open(std::move(o)));
  }
  return absl::OkStatus();
}

absl::StatusOr<uint64_t> Store::Impl::WalRecordsToReplay() {
  wal_dir_ = absl::StrCat(path_, "/wal");
  wal_id_ = ParseU64(disk_->GetMeta(kMetaWalId));
  if (wal_id_ == 0) return 0;
  PSDB_ASSIGN_OR_RETURN(
      internal::WalReadStats stats,
      internal::ReadWal(fs_.get(), wal_dir_, wal_id_,
                        [](const WalRecordView&) { return absl::OkStatus(); }));
  return stats.records;
}

absl::Status Store::Impl::ReplayWal() {
  if (wal_records_ == 0) {
    // Nothing to replay; a checkpoint-mode store keeps no segments.
    if (wal_ == nullptr) {
      return internal::RemoveWalSegments(fs_.get(), wal_dir_, UINT64_MAX);
    }
    return absl::OkStatus();
  }
  absl::flat_hash_set<uint64_t> aborted;
  absl::flat_hash_map<std::string, uint64_t> created;
  PSDB_RETURN_IF_ERROR(
      internal::ReadWal(fs_.get(), wal_dir_, wal_id_,
                        [&](const WalRecordView& r) {
                          if (r.type == WalRecordType::kAbort &&
                              r.payload.size() == 8) {
                            uint64_t lsn;
                            std::memcpy(&lsn, r.payload.data(), 8);
                            aborted.insert(lsn);
                          } else if (r.type == WalRecordType::kCreateTable) {
                            created[std::string(r.payload)] = r.lsn;
                          }
                          return absl::OkStatus();
                        })
          .status());
  const std::vector<std::shared_ptr<Table>> tables = Snapshot();
  for (const auto& t : tables) t->set_replaying(true);
  uint64_t applied = 0;
  absl::StatusOr<internal::WalReadStats> read = internal::ReadWal(
      fs_.get(), wal_dir_, wal_id_,
      [&](const WalRecordView& r) -> absl::Status {
        if (r.type != WalRecordType::kPush &&
            r.type != WalRecordType::kPushSums &&
            r.type != WalRecordType::kPutRows &&
            r.type != WalRecordType::kDeleteRows) {
          return absl::OkStatus();
        }
        if (aborted.contains(r.lsn)) return absl::OkStatus();
        PSDB_ASSIGN_OR_RETURN(WalRowsRecord rec,
                              internal::DecodeRowsRecord(r.type, r.payload));
        auto c = created.find(rec.table);
        if (c != created.end() && c->second > r.lsn) return absl::OkStatus();
        absl::StatusOr<std::shared_ptr<Table>> t = Find(rec.table);
        if (!t.ok()) return absl::OkStatus();  // dropped since
        const std::vector<uint64_t> keys = internal::WalKeys(rec);
        const int dim = (*t)->dim();
        const int ss = (*t)->state_size();
        if (r.type != WalRecordType::kDeleteRows &&
            (rec.dim != static_cast<uint32_t>(dim) ||
             (r.type == WalRecordType::kPutRows &&
              rec.state_size != static_cast<uint32_t>(ss)))) {
          return absl::DataLossError(absl::StrCat(
              "write-ahead log record ", r.lsn, " for table ", rec.table,
              " has dim ", rec.dim, ", the table ", dim));
        }
        ++applied;
        absl::Status s;
        if (r.type == WalRecordType::kPush) {
          const std::vector<float> grads =
              internal::WalFloats(rec.floats, size_t{rec.n} * rec.dim);
          s = (*t)->ReplayPush(r.lsn, keys, grads, rec.step);
        } else if (r.type == WalRecordType::kPushSums) {
          const std::vector<float> sums =
              internal::WalFloats(rec.floats, size_t{rec.n} * rec.dim);
          s = (*t)->ReplayPushSums(
              r.lsn, keys, internal::WalU32s(rec.occ, rec.n), sums, rec.step);
        } else if (r.type == WalRecordType::kPutRows) {
          RowBatch rows;
          rows.Resize(dim, ss, rec.n);
          rows.values = internal::WalFloats(rec.floats, size_t{rec.n} * dim);
          rows.state = internal::WalFloats(rec.floats + 4 * size_t{rec.n} * dim,
                                           size_t{rec.n} * ss);
          for (uint32_t i = 0; i < rec.n; ++i) {
            std::memcpy(&rows.headers[i].last_update_step, rec.headers + 24 * i,
                        8);
            std::memcpy(&rows.headers[i].update_count, rec.headers + 24 * i + 8,
                        8);
            std::memcpy(&rows.headers[i].frequency, rec.headers + 24 * i + 16,
                        8);
          }
          s = (*t)->ReplayPutRows(r.lsn, keys, rows);
        } else {
          s = (*t)->ReplayDeleteRows(r.lsn, keys);
        }
        if (!s.ok()) {
          return absl::Status(
              s.code(), absl::StrCat("replay of write-ahead log record ", r.lsn,
                                     ": ", s.message()));
        }
        return absl::OkStatus();
      });
  for (const auto& t : tables) t->set_replaying(false);
  PSDB_RETURN_IF_ERROR(read.status());
  // Everything replayed reaches RocksDB before the log that holds it goes.
  PSDB_RETURN_IF_ERROR(Flush());
  if (wal_ == nullptr) {
    PSDB_RETURN_IF_ERROR(
        internal::RemoveWalSegments(fs_.get(), wal_dir_, UINT64_MAX));
  }
  wal_records_ = 0;
  return absl::OkStatus();
}

std::optional<Wal::Cut> Store::Impl::WalCut() {
  if (wal_ == nullptr) return std::nullopt;
  return wal_->Rotate();
}

absl::Status Store::Impl::WalTruncate(const std::optional<Wal::Cut>& cut) {
  if (!cut.has_value()) return absl::OkStatus();
  return internal::RemoveWalSegments(fs_.get(), wal_dir_, cut->keep_seq);
}

}  // namespace psdb
