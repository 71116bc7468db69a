// Table's eviction, flush and TTL paths: the only code that writes rows to
// RocksDB (each holds the table's evict_mu_). Split from the data path
// (table_materialize.cc, table_pull.cc, table_push.cc, table_rows.cc); the
// locking rules are in table.h and memory_tier.h.
#include <algorithm>
#include <cstring>
#include <memory>
#include <numeric>
#include <string>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "rocksdb/write_batch.h"
#include "store/row_codec.h"
#include "store/table.h"
#include "util/status_macros.h"

namespace psdb::internal {
namespace {

// A WriteBatch is written once it holds this many bytes.
constexpr size_t kWriteBatchBytes = 8 << 20;

}  // namespace

// ---------------------------------------------------------------------------
// Eviction, flush, TTL

size_t Table::Evict(size_t n, bool background, absl::Status* write_error) {
  absl::MutexLock el(&evict_mu_);
  std::vector<uint32_t> victims;
  mem_.SelectVictims(n, &victims);
  if (victims.empty()) return 0;
  struct Pending {
    uint32_t slot;
    uint64_t key;
    uint32_t version;
    uint64_t lsn;  // write-ahead log tag (0: none)
  };
  std::vector<Pending> pending;
  std::vector<uint32_t> freed;
  // Encoded rows of the dirty victims, back to back (one allocation).
  const size_t row_bytes = EncodedRowSize(dim(), state_size_);
  std::string blob;
  std::string enc;
  for (uint32_t slot : victims) {
    const uint64_t key = mem_.LoadKey(slot);
    Stripe& st = mem_.stripe(mem_.StripeOf(key));
    absl::MutexLock l(&st.mu);
    auto it = st.index.find(key);
    if (it == st.index.end() || it->second != slot) continue;
    if (mem_.LoadFlags(slot) & kDirty) {
      EncodeRow(*mem_.header(slot),
                absl::MakeConstSpan(mem_.values(slot), dim()),
                absl::MakeConstSpan(mem_.state(slot), state_size_), &enc);
      blob.append(enc);
      pending.push_back({slot, key, mem_.meta(slot)->version,
                         mem_.has_lsn() ? *mem_.lsn(slot) : 0});
    } else {
      RemoveLocked(st, key, slot);
      freed.push_back(slot);
    }
  }
  absl::Status write_status;
  if (!pending.empty()) {
    // Keys in order: the memtable skip list inserts a sorted batch much
    // faster (each insert starts from the previous splice).
    std::vector<uint32_t> order(pending.size());
    std::iota(order.begin(), order.end(), 0u);
    std::sort(order.begin(), order.end(), [&](uint32_t a, uint32_t b) {
      return pending[a].key < pending[b].key;
    });
    rocksdb::WriteBatch batch(pending.size() * (row_bytes + 24));
    char kbuf[8];
    uint64_t max_lsn = 0;
    for (uint32_t j : order) {
      EncodeKey(pending[j].key, kbuf);
      batch.Put(cf_, rocksdb::Slice(kbuf, 8),
                rocksdb::Slice(blob.data() + j * row_bytes, row_bytes));
      if (pending[j].lsn != 0) {
        PutTag(&batch, pending[j].key, pending[j].lsn);
        max_lsn = std::max(max_lsn, pending[j].lsn);
      }
    }
    // Write-ahead rule: no row on disk holds an update the log lacks.
    if (wal_ != nullptr) write_status = wal_->WaitWritten(max_lsn);
    // Headroom (DiskTier::RoomFor): after this write, the disk must still
    // hold what a close writes, the memory tier's rows included.
    const uint64_t written_bytes = pending.size() * mem_.slot_bytes();
    const uint64_t used = budget_->used().load(std::memory_order_relaxed);
    if (write_status.ok()) {
      write_status = disk_->RoomFor(
          batch.GetDataSize(),
          budget_->ShutdownRowBytes(used - std::min(used, written_bytes)));
    }
    if (write_status.ok()) write_status = WriteRowsToDisk(&batch);
    if (!write_status.ok()) {
      write_errors_.fetch_add(1, std::memory_order_relaxed);
    }
  }
  if (write_status.ok()) {
    for (const Pending& p : pending) {
      Stripe& st = mem_.stripe(mem_.StripeOf(p.key));
      absl::MutexLock l(&st.mu);
      auto it = st.index.find(p.key);
      if (it == st.index.end() || it->second != p.slot ||
          mem_.meta(p.slot)->version != p.version) {
        continue;  // changed since we wrote it: still dirty, stays
      }
      RemoveLocked(st, p.key, p.slot);
      freed.push_back(p.slot);
      dirty_writes_.fetch_add(1, std::memory_order_relaxed);
    }
  }
  mem_.Free(freed.data(), freed.size());
  evictions_.fetch_add(freed.size(), std::memory_order_relaxed);
  if (background) {
    background_evictions_.fetch_add(freed.size(), std::memory_order_relaxed);
  }
  if (!write_status.ok() && write_error != nullptr) {
    *write_error = std::move(write_status);
  }
  return freed.size();
}

absl::StatusOr<uint64_t> Table::FlushDirty() {
  // Rows are written in chunks of about kWriteBatchBytes. Each chunk holds
  // evict_mu_ from encoding to clearing the dirty flags, so an eviction can
  // never write a newer version of a row in between and have it overwritten
  // by our older copy.
  struct Entry {
    uint32_t slot;
    uint64_t key;
    uint32_t version;
  };
  uint64_t total = 0;
  std::vector<Entry> entries;
  std::vector<uint32_t> list;
  absl::flat_hash_set<uint32_t> seen;
  rocksdb::WriteBatch batch;
  std::string enc;
  char kbuf[8];
  const int ns = mem_.num_stripes();
  int s = 0;
  while (s < ns) {
    absl::MutexLock el(&evict_mu_);
    entries.clear();
    batch.Clear();
    uint64_t max_lsn = 0;
    for (; s < ns && batch.GetDataSize() < kWriteBatchBytes; ++s) {
      Stripe& st = mem_.stripe(s);
      absl::MutexLock l(&st.mu);
      list.clear();
      list.swap(st.dirty);
      seen.clear();
      for (uint32_t slot : list) {
        const uint32_t f = mem_.LoadFlags(slot);
        if ((f & kOccupied) == 0 || (f & kDirty) == 0) continue;
        const uint64_t key = mem_.LoadKey(slot);
        if (mem_.StripeOf(key) != static_cast<uint32_t>(s)) continue;
        auto it = st.index.find(key);
        if (it == st.index.end() || it->second != slot) continue;
        if (!seen.insert(slot).second) continue;
        EncodeRow(*mem_.header(slot),
                  absl::MakeConstSpan(mem_.values(slot), dim()),
                  absl::MakeConstSpan(mem_.state(slot), state_size_), &enc);
        EncodeKey(key, kbuf);
        batch.Put(cf_, rocksdb::Slice(kbuf, 8), enc);
        if (mem_.has_lsn() && *mem_.lsn(slot) != 0) {
          PutTag(&batch, key, *mem_.lsn(slot));
          max_lsn = std::max(max_lsn, *mem_.lsn(slot));
        }
        entries.push_back({slot, key, mem_.meta(slot)->version});
      }
    }
    if (entries.empty()) continue;
    absl::Status w;
    if (wal_ != nullptr) w = wal_->WaitWritten(max_lsn);  // write-ahead rule
    if (w.ok()) w = WriteRowsToDisk(&batch);
    // Entries are in stripe order: lock each stripe once.
    for (size_t j = 0; j < entries.size();) {
      const uint32_t sid = mem_.StripeOf(entries[j].key);
      Stripe& st = mem_.stripe(sid);
      absl::MutexLock l(&st.mu);
      for (; j < entries.size() && mem_.StripeOf(entries[j].key) == sid; ++j) {
        const Entry& e = entries[j];
        auto it = st.index.find(e.key);
        if (it == st.index.end() || it->second != e.slot) continue;
        if (w.ok() && mem_.meta(e.slot)->version == e.version) {
          mem_.ClearFlags(e.slot, kDirty);
        } else {
          st.dirty.push_back(e.slot);  // still dirty: flush next time
        }
      }
    }
    if (!w.ok()) return w;
    total += entries.size();
  }
  return total;
}

uint64_t Table::DirtyRows() {
  uint64_t n = 0;
  for (int s = 0; s < mem_.num_stripes(); ++s) {
    Stripe& st = mem_.stripe(s);
    absl::MutexLock l(&st.mu);
    for (const auto& [key, slot] : st.index) {
      n += (mem_.LoadFlags(slot) & kDirty) != 0;
    }
  }
  return n;
}

absl::StatusOr<uint64_t> Table::ExpireRows() {
  if (spec_.ttl_steps <= 0) return 0;
  const int64_t threshold = step() - spec_.ttl_steps;
  if (threshold <= 0) return 0;    // last_update_step >= 0 is never below
  absl::MutexLock el(&evict_mu_);  // no row writes while we delete
  uint64_t expired = 0;
  std::vector<uint32_t> freed;
  // Deletes a chunk of expired keys, stripe by stripe. Each stripe's
  // deletes are written while its lock is held, and each key is noted as
  // removed: a reader that probed before reads again (Materialize), one
  // that probes after finds the key gone from disk.
  std::vector<uint64_t> chunk;
  auto delete_chunk = [&]() -> absl::Status {
    std::sort(chunk.begin(), chunk.end(), [&](uint64_t a, uint64_t b) {
      return mem_.StripeOf(a) < mem_.StripeOf(b);
    });
    rocksdb::WriteBatch batch;
    char kbuf[8];
    for (size_t j = 0; j < chunk.size();) {
      const uint32_t sid = mem_.StripeOf(chunk[j]);
      Stripe& st = mem_.stripe(sid);
      absl::MutexLock l(&st.mu);
      batch.Clear();
      for (; j < chunk.size() && mem_.StripeOf(chunk[j]) == sid; ++j) {
        const uint64_t key = chunk[j];
        auto mit = st.index.find(key);
        if (mit != st.index.end()) {
          const uint32_t slot = mit->second;
          // Updated in memory since it was written: not expired.
          if (mem_.header(slot)->last_update_step >= threshold) continue;
          RemoveLocked(st, key, slot);
          freed.push_back(slot);
        }
        EncodeKey(key, kbuf);
        batch.Delete(cf_, rocksdb::Slice(kbuf, 8));
        st.NoteRemoved(key);
      }
      if (batch.Count() == 0) continue;
      PSDB_RETURN_IF_ERROR(WriteRowsToDisk(&batch));
      expired += batch.Count();
    }
    chunk.clear();
    return absl::OkStatus();
  };
  absl::Status status;
  {
    std::unique_ptr<rocksdb::Iterator> it(
        disk_->db()->NewIterator(rocksdb::ReadOptions(), cf_));
    constexpr size_t kStepOffset = 12;  // see row_codec.h
    for (it->SeekToFirst(); it->Valid() && status.ok(); it->Next()) {
      const rocksdb::Slice v = it->value();
      if (v.size() < kStepOffset + 8) continue;  // corrupt: left for verify
      int64_t last;
      std::memcpy(&last, v.data() + kStepOffset, 8);
      if (last >= threshold) continue;
      uint64_t key;
      if (!DecodeKey(absl::string_view(it->key().data(), it->key().size()),
                     &key)
               .ok()) {
        continue;
      }
      chunk.push_back(key);
      if (chunk.size() >= kWriteBatchBytes / 16) status = delete_chunk();
    }
    if (status.ok()) status = FromRocks(it->status(), "scan for TTL");
  }
  if (status.ok() && !chunk.empty()) status = delete_chunk();
  mem_.Free(freed.data(), freed.size());
  uint64_t cur = rows_.load(std::memory_order_relaxed);
  while (
      !rows_.compare_exchange_weak(cur, cur >= expired ? cur - expired : 0)) {
  }
  if (!status.ok()) return status;
  return expired;
}

absl::Status Table::ScanKeys(
    size_t batch,
    absl::FunctionRef<absl::Status(absl::Span<const uint64_t>)> fn) {
  if (batch == 0) return absl::InvalidArgumentError("ScanKeys batch is 0");
  // The resident keys first (nothing is flushed: a row may be only in
  // memory), then the keys only on disk, from a RocksDB snapshot taken
  // after the memory pass: a row evicted meanwhile is in `resident`, one
  // evicted before is on disk.
  std::vector<uint64_t> resident_keys;
  for (int s = 0; s < mem_.num_stripes(); ++s) {
    Stripe& st = mem_.stripe(s);
    absl::MutexLock l(&st.mu);
    for (const auto& [key, slot] : st.index) resident_keys.push_back(key);
  }
  for (size_t begin = 0; begin < resident_keys.size(); begin += batch) {
    PSDB_RETURN_IF_ERROR(
        fn(absl::MakeConstSpan(resident_keys)
               .subspan(begin, std::min(batch, resident_keys.size() - begin))));
  }
  // Built at the first key on disk: a table wholly in memory (the common
  // case for a shard that fits its budget) needs no set.
  absl::flat_hash_set<uint64_t> resident;
  bool resident_built = false;
  std::vector<uint64_t> keys;
  std::unique_ptr<rocksdb::Iterator> it(
      disk_->db()->NewIterator(rocksdb::ReadOptions(), cf_));
  for (it->SeekToFirst(); it->Valid(); it->Next()) {
    uint64_t key;
    PSDB_RETURN_IF_ERROR(
        DecodeKey(absl::string_view(it->key().data(), it->key().size()), &key));
    if (!resident_built) {
      resident.insert(resident_keys.begin(), resident_keys.end());
      resident_keys = {};
      resident_built = true;
    }
    if (resident.contains(key)) continue;
    keys.push_back(key);
    if (keys.size() == batch) {
      PSDB_RETURN_IF_ERROR(fn(keys));
      keys.clear();
    }
  }
  PSDB_RETURN_IF_ERROR(FromRocks(it->status(), "scan keys"));
  if (!keys.empty()) PSDB_RETURN_IF_ERROR(fn(keys));
  return absl::OkStatus();
}

absl::StatusOr<uint64_t> Table::DeleteRows(absl::Span<const uint64_t> keys,
                                           bool existing) {
  PSDB_RETURN_IF_ERROR(CheckBatch(keys.size()));
  if (wal_ == nullptr) return DeleteRowsImpl(keys, existing, 0, false);
  // Logged, and written ahead: the record is in the log before any delete
  // reaches RocksDB, so a kill mid-way is completed by replay.
  Wal::ApplyScope scope(wal_);
  absl::MutexLock l(&wal_mu_);
  std::string payload;
  EncodeDeleteRowsRecord(name(), keys, &payload);
  const uint64_t lsn = wal_->AppendFramed(WalRecordType::kDeleteRows, &payload);
  PSDB_RETURN_IF_ERROR(wal_->WaitWritten(lsn));
  absl::StatusOr<uint64_t> n = DeleteRowsImpl(keys, existing, lsn, false);
  if (!n.ok()) {
    wal_->Append(WalRecordType::kAbort,
                 absl::string_view(reinterpret_cast<const char*>(&lsn), 8));
  }
  return n;
}

absl::Status Table::ReplayDeleteRows(uint64_t lsn,
                                     absl::Span<const uint64_t> keys) {
  PSDB_RETURN_IF_ERROR(CheckBatch(keys.size()));
  return DeleteRowsImpl(keys, /*existing=*/false, lsn, /*replay=*/true)
      .status();
}

absl::StatusOr<uint64_t> Table::DeleteRowsImpl(absl::Span<const uint64_t> keys,
                                               bool existing, uint64_t lsn,
                                               bool replay) {
  std::vector<uint64_t> sorted(keys.begin(), keys.end());
  std::sort(sorted.begin(), sorted.end(), [&](uint64_t a, uint64_t b) {
    const uint32_t sa = mem_.StripeOf(a), sb = mem_.StripeOf(b);
    return sa != sb ? sa < sb : a < b;
  });
  sorted.erase(std::unique(sorted.begin(), sorted.end()), sorted.end());
  absl::MutexLock el(&evict_mu_);  // no row writes while we delete
  uint64_t deleted = 0;
  std::vector<uint32_t> freed;
  rocksdb::WriteBatch batch;
  char kbuf[8];
  absl::Status status;
  // As ExpireRows: each stripe's deletes are written under its lock and
  // noted as removed, so a concurrent miss reads again.
  for (size_t j = 0; j < sorted.size() && status.ok();) {
    const uint32_t sid = mem_.StripeOf(sorted[j]);
    Stripe& st = mem_.stripe(sid);
    absl::MutexLock l(&st.mu);
    batch.Clear();
    for (; j < sorted.size() && mem_.StripeOf(sorted[j]) == sid; ++j) {
      const uint64_t key = sorted[j];
      EncodeKey(key, kbuf);
      const rocksdb::Slice k(kbuf, 8);
      auto mit = st.index.find(key);
      bool existed = mit != st.index.end();
      if (replay && mem_.has_lsn()) {
        // Skip a key whose row already includes this record.
        uint64_t cur = 0;
        if (existed) {
          cur = *mem_.lsn(mit->second);
        } else {
          status = ReadTags({key}, &cur);
          if (!status.ok()) break;
        }
        if (cur >= lsn) continue;
      }
      if (existed) {
        const uint32_t slot = mit->second;
        RemoveLocked(st, key, slot);
        freed.push_back(slot);
      } else if (existing) {
        existed = true;
      } else {
        std::string value;
        status = disk_->Get(cf_, k, &value, &existed);
        if (!status.ok()) break;
      }
      if (mem_.has_lsn() && lsn != 0) PutTag(&batch, key, lsn);
      if (!existed) continue;
      batch.Delete(cf_, k);
      st.NoteRemoved(key);
      ++deleted;
    }
    if (status.ok() && batch.Count() > 0) status = WriteRowsToDisk(&batch);
  }
  mem_.Free(freed.data(), freed.size());
  uint64_t cur = rows_.load(std::memory_order_relaxed);
  while (
      !rows_.compare_exchange_weak(cur, cur >= deleted ? cur - deleted : 0)) {
  }
  if (!status.ok()) return status;
  return deleted;
}

}  // namespace psdb::internal
