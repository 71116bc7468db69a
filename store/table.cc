// Table (store/table.h): construction, the row bookkeeping every path
// shares (dirty lists, removal), batch checks and errors, the table's disk
// writes and drop, the write-ahead log's row tags and replay filter, and
// statistics. The data path is split by concern: the miss path
// (table_materialize.cc), Pull (table_pull.cc), Push and its replay
// (table_push.cc), whole rows (table_rows.cc), eviction, flush and TTL
// (table_evict.cc), encoded row transfer (table_migrate.cc).
#include "store/table.h"

#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/types/span.h"
#include "optim/optimizer.h"
#include "store/store_meta.h"
#include "store/table_impl.h"
#include "util/status_macros.h"

namespace psdb::internal {

TableScratch& ThreadScratch() {
  thread_local TableScratch scratch;
  return scratch;
}

std::string& Table::WalPayload() {
  // The payload of the record being appended (kWal).
  thread_local std::string payload;
  return payload;
}

Table::Table(TableSpec spec, rocksdb::ColumnFamilyHandle* cf, DiskTier* disk,
             BudgetArbiter* budget, const StoreOptions& options, int64_t step,
             uint64_t rows, Wal* wal, bool lsn_slots)
    : spec_(std::move(spec)),
      state_size_(optim::StateSize(spec_.optimizer, spec_.dim)),
      row_floats_(static_cast<size_t>(spec_.dim) + state_size_),
      max_batch_keys_(options.max_batch_keys),
      cf_(cf),
      disk_(disk),
      budget_(budget),
      mem_(spec_.dim, state_size_, options.index_stripes, options.eviction,
           lsn_slots || wal != nullptr),
      admission_(spec_.admission_threshold),
      step_(step),
      rows_(rows),
      wal_(wal) {}

Table::~Table() {
  budget_->used().fetch_sub(resident_bytes(), std::memory_order_relaxed);
  disk_->DestroyCf(cf_);
}

std::vector<uint64_t> Table::ResidentKeys(size_t max) {
  std::vector<uint64_t> keys;
  for (int s = 0; s < mem_.num_stripes() && keys.size() < max; ++s) {
    Stripe& st = mem_.stripe(s);
    absl::MutexLock l(&st.mu);
    for (const auto& [key, slot] : st.index) {
      if (keys.size() == max) break;
      keys.push_back(key);
    }
  }
  return keys;
}

void Table::ObserveStep(int64_t step) {
  int64_t cur = step_.load(std::memory_order_relaxed);
  while (cur < step && !step_.compare_exchange_weak(cur, step)) {
  }
}

uint64_t Table::resident_rows() const { return mem_.resident_count(); }
uint64_t Table::resident_bytes() const {
  return resident_rows() * mem_.slot_bytes();
}

absl::Status Table::CheckBatch(size_t n) const {
  if (n == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("table ", name(), ": empty batch"));
  }
  if (n > max_batch_keys_) {
    return absl::ResourceExhaustedError(
        absl::StrCat("table ", name(), ": batch of ", n,
                     " keys exceeds max_batch_keys ", max_batch_keys_));
  }
  return absl::OkStatus();
}

absl::Status Table::DataLoss(uint64_t key, const absl::Status& cause) const {
  return absl::DataLossError(absl::StrCat("table ", name(), " key ",
                                          KeyString(key),
                                          ": corrupt row: ", cause.message()));
}

void Table::MarkDirty(Stripe& stripe, uint32_t slot) {
  SlotMeta* m = mem_.meta(slot);
  ++m->version;
  if ((mem_.LoadFlags(slot) & kDirty) == 0) {
    mem_.SetFlags(slot, kDirty);
    stripe.dirty.push_back(slot);
    if (stripe.dirty.size() > 2 * stripe.index.size() + 1024) {
      CompactDirtyList(stripe, mem_.StripeOf(mem_.LoadKey(slot)));
    }
  }
}

void Table::CompactDirtyList(Stripe& stripe, uint32_t stripe_id) {
  std::vector<uint32_t>& d = stripe.dirty;
  std::sort(d.begin(), d.end());
  d.erase(std::unique(d.begin(), d.end()), d.end());
  size_t kept = 0;
  for (const uint32_t slot : d) {
    const uint32_t f = mem_.LoadFlags(slot);
    if ((f & kOccupied) == 0 || (f & kDirty) == 0) continue;
    const uint64_t key = mem_.LoadKey(slot);
    if (mem_.StripeOf(key) != stripe_id) continue;
    auto it = stripe.index.find(key);
    if (it == stripe.index.end() || it->second != slot) continue;
    d[kept++] = slot;
  }
  d.resize(kept);
}

void Table::RemoveLocked(Stripe& stripe, uint64_t key, uint32_t slot) {
  stripe.index.erase(key);
  stripe.NoteRemoved(key);
  mem_.ClearFlags(slot, kOccupied | kDirty | kRefMask);
  mem_.resident().fetch_sub(1, std::memory_order_relaxed);
  budget_->used().fetch_sub(mem_.slot_bytes(), std::memory_order_relaxed);
}

absl::Status Table::WriteRowsToDisk(rocksdb::WriteBatch* batch) {
  absl::ReaderMutexLock l(&disk_write_mu_);
  if (dropped_) return absl::OkStatus();
  disk_may_hold_rows_.store(true, std::memory_order_release);
  return disk_->WriteRows(batch);
}

absl::Status Table::DropFamily() {
  absl::MutexLock l(&disk_write_mu_);
  PSDB_RETURN_IF_ERROR(disk_->DropCf(cf_));
  dropped_ = true;
  return absl::OkStatus();
}

// ---------------------------------------------------------------------------
// Write-ahead log: row tags and the replay filter

absl::Status Table::ReplayKeep(absl::Span<const uint64_t> keys, uint64_t lsn,
                               std::vector<uint8_t>* keep) {
  keep->assign(keys.size(), 1);
  if (!mem_.has_lsn()) return absl::OkStatus();
  for (size_t i = 0; i < keys.size(); ++i) {
    uint64_t cur = 0;
    bool resident = false;
    {
      Stripe& st = mem_.stripe(mem_.StripeOf(keys[i]));
      absl::MutexLock l(&st.mu);
      auto it = st.index.find(keys[i]);
      if (it != st.index.end()) {
        resident = true;
        cur = *mem_.lsn(it->second);
      }
    }
    if (!resident) PSDB_RETURN_IF_ERROR(ReadTags({keys[i]}, &cur));
    (*keep)[i] = cur < lsn;
  }
  return absl::OkStatus();
}

absl::Status Table::ReadTags(absl::Span<const uint64_t> keys, uint64_t* out) {
  const size_t m = keys.size();
  std::vector<std::string> names(m);
  std::vector<rocksdb::Slice> slices(m);
  for (size_t j = 0; j < m; ++j) {
    names[j] = WalTagKey(name(), keys[j]);
    slices[j] = names[j];
  }
  std::vector<rocksdb::PinnableSlice> values(m);
  std::vector<rocksdb::Status> statuses(m);
  disk_->MultiGet(disk_->meta_cf(), m, slices.data(), values.data(),
                  statuses.data());
  for (size_t j = 0; j < m; ++j) {
    out[j] = 0;
    if (statuses[j].IsNotFound()) continue;
    if (!statuses[j].ok()) {
      return FromRocks(statuses[j], absl::StrCat("table ", name(), " key ",
                                                 KeyString(keys[j]),
                                                 ": write-ahead log tag"));
    }
    if (values[j].size() != 8) {
      return DataLoss(keys[j], absl::DataLossError("bad write-ahead log tag"));
    }
    std::memcpy(&out[j], values[j].data(), 8);
  }
  return absl::OkStatus();
}

void Table::PutTag(rocksdb::WriteBatch* batch, uint64_t key, uint64_t lsn) {
  batch->Put(disk_->meta_cf(), WalTagKey(name(), key),
             rocksdb::Slice(reinterpret_cast<const char*>(&lsn), 8));
}

// ---------------------------------------------------------------------------
// Statistics

TableStats Table::Stats() const {
  TableStats t;
  t.name = name();
  t.memory_rows = resident_rows();
  t.memory_bytes = resident_bytes();
  t.disk_rows = disk_->IntProperty(cf_, "rocksdb.estimate-num-keys");
  t.disk_bytes = disk_->IntProperty(cf_, "rocksdb.live-sst-files-size");
  t.hits = hits_.load(std::memory_order_relaxed);
  t.misses = misses_.load(std::memory_order_relaxed);
  t.created = created_.load(std::memory_order_relaxed);
  t.evictions = evictions_.load(std::memory_order_relaxed);
  t.background_evictions =
      background_evictions_.load(std::memory_order_relaxed);
  t.disk_compaction_pending =
      disk_->IntProperty(cf_, "rocksdb.compaction-pending") > 0;
  t.dirty_writes = dirty_writes_.load(std::memory_order_relaxed);
  t.disk_write_errors = write_errors_.load(std::memory_order_relaxed);
  t.non_finite_updates = non_finite_updates_.load(std::memory_order_relaxed);
  t.not_admitted = not_admitted_.load(std::memory_order_relaxed);
  t.step = step();
  return t;
}

}  // namespace psdb::internal
