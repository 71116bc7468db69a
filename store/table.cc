#include "store/table.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <numeric>
#include <optional>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/types/span.h"
#include "optim/optimizer.h"
#include "store/row_codec.h"
#include "store/store_meta.h"
#include "store/stripe_groups.h"
#include "util/key_dedup.h"
#include "util/status_macros.h"

namespace psdb::internal {
namespace {

constexpr uint32_t kNoSlot = 0xffffffffu;
// Optimistic read-then-insert rounds before Materialize falls back to
// reading under the stripe lock.
constexpr int kOptimisticRounds = 3;

// Per-thread buffers of the hot path; they grow to the largest batch and
// are then reused, so a batch allocates nothing.
struct Scratch {
  StripeGroups groups;
  KeyDedup dedup;
  std::vector<uint32_t> inverse;
  std::vector<uint32_t> occ;
  std::vector<uint32_t> miss_pos;
  std::vector<uint64_t> miss_keys;
  std::vector<uint32_t> miss_occ;
  std::vector<uint32_t> miss_unique;
  std::vector<float> ubuf;
  std::vector<float> gsum;
  std::vector<uint8_t> skip;
  std::vector<uint32_t> slots;
  std::vector<uint32_t> work;
  std::vector<float> undo;  // a row's values and state before its update
};
thread_local Scratch tls;
std::string KeyString(uint64_t key) { return absl::StrCat(key); }

// Whether every |x[i]| <= kMaxGradient (false for NaN), on the bits for the
// reason AllFinite (store/row_codec.h) is: a non-negative float's bits order as
// its value does, and kMaxGradient's bits minus a larger |x|'s (both below
// 2^31) set bit 31.
bool AllInRange(const float* x, size_t n) {
  constexpr uint32_t kMaxBits = std::bit_cast<uint32_t>(kMaxGradient);
  uint32_t borrow = 0;
  for (size_t i = 0; i < n; ++i) {
    uint32_t bits;
    std::memcpy(&bits, x + i, 4);
    borrow |= kMaxBits - (bits & 0x7fffffffu);
  }
  return (borrow & 0x80000000u) == 0;
}

}  // namespace

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

// ---------------------------------------------------------------------------
// Materialize: the miss path shared by every operation.

absl::Status Table::Refused(const absl::Status& cause) const {
  const std::string msg =
      absl::StrCat("table ", name(),
                   ": memory tier full and the disk refuses writes (nothing "
                   "applied; retry when the disk has room): ",
                   cause.message());
  if (absl::IsResourceExhausted(cause)) {
    return absl::ResourceExhaustedError(msg);
  }
  return absl::UnavailableError(msg);
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

absl::Status Table::Materialize(absl::Span<const uint64_t> keys,
                                absl::Span<const uint32_t> occurrences,
                                MissMode mode, ResidentFn on_resident,
                                AbsentFn on_absent, bool refusable,
                                bool dirties) {
  const size_t n = keys.size();
  const size_t d = static_cast<size_t>(dim());
  const size_t ss = static_cast<size_t>(state_size_);
  std::vector<uint64_t> seq(n, 0);
  std::vector<int8_t> admitted(n, -1);  // admission decision, made once
  std::vector<uint8_t> has_row(n, 0);
  std::vector<uint8_t> created(n, 0);
  std::vector<RowHeader> headers(n);
  // Write-ahead log tags of the rows read, during replay only (otherwise a
  // loaded row's LSN is 0: it is set by the next record applied to it).
  const bool read_tags = replaying_ && mem_.has_lsn();
  std::vector<uint64_t> tags(read_tags ? n : 0, 0);
  std::vector<uint64_t> tag_keys, tag_vals;
  std::vector<float> rows;
  std::vector<uint32_t> pending(n);
  std::iota(pending.begin(), pending.end(), 0u);
  // Orders v by the stripe of its keys (a counting sort: a comparison sort
  // hashed each key twice per comparison).
  StripeGroups groups;
  std::vector<uint32_t> by_stripe_out;
  auto by_stripe = [&](std::vector<uint32_t>& v) {
    groups.Build(mem_, v.size(), [&](size_t j) { return keys[v[j]]; });
    by_stripe_out.resize(v.size());
    for (size_t j = 0; j < v.size(); ++j) {
      by_stripe_out[j] = v[groups.order[j]];
    }
    v.swap(by_stripe_out);
  };

  for (int round = 0; !pending.empty(); ++round) {
    if (round >= kOptimisticRounds) {
      for (uint32_t i : pending) {
        PSDB_RETURN_IF_ERROR(MaterializeLocked(keys[i], occurrences[i],
                                               admitted[i], mode, i,
                                               on_resident, on_absent));
      }
      return absl::OkStatus();
    }
    // 0. Room first: evicting after the probe below would bump the
    //    evict_seq of (nearly) every stripe and send all our reads to the
    //    next round (a second MultiGet per batch), so make room for every
    //    pending key now. Keys that turn out absent and are not created
    //    leave their share free for the next batch.
    //    When that fails because the disk refuses writes, a call that has
    //    changed nothing yet and would dirty memory fails here (kAssign, a
    //    push) or once it finds a key to create (step 2): the memory tier
    //    then stays within budget + the rows of the calls in flight.
    const uint64_t want = pending.size() * mem_.slot_bytes();
    absl::Status refused;
    if (budget_->used().load(std::memory_order_relaxed) + want >
        budget_->budget()) {
      absl::Status room = budget_->MakeRoom(this, want);
      if (!room.ok() && refusable && round == 0) refused = Refused(room);
    }
    if (!refused.ok() && (dirties || mode == MissMode::kAssign)) {
      return refused;
    }
    // 1. Probe: which keys are still absent, and each stripe's evict_seq
    //    before we read the disk.
    by_stripe(pending);
    std::vector<uint32_t> to_read;
    std::vector<uint8_t> was_read(n, 0);
    for (size_t j = 0; j < pending.size();) {
      const uint32_t s = mem_.StripeOf(keys[pending[j]]);
      Stripe& st = mem_.stripe(s);
      absl::MutexLock l(&st.mu);
      for (; j < pending.size() && mem_.StripeOf(keys[pending[j]]) == s; ++j) {
        const uint32_t i = pending[j];
        has_row[i] = 0;
        if (st.index.contains(keys[i])) continue;  // resolved at insert
        seq[i] = st.evict_seq;
        to_read.push_back(i);
        was_read[i] = 1;
      }
    }
    // 2. One MultiGet for the absent keys; decode all before changing
    //    anything.
    if (!to_read.empty()) {
      const size_t m = to_read.size();
      // kOverwrite needs no scratch rows: the caller writes the whole slot.
      if (mode != MissMode::kOverwrite && rows.size() < n * row_floats_) {
        rows.resize(n * row_floats_);
      }
      // An overwrite only asks whether each row exists; with no row ever
      // written to disk (read after the probe above), none does.
      const bool look = mode != MissMode::kOverwrite ||
                        disk_may_hold_rows_.load(std::memory_order_acquire);
      std::vector<rocksdb::PinnableSlice> values(look ? m : 0);
      std::vector<rocksdb::Status> statuses(m, rocksdb::Status::NotFound());
      if (look) {
        // Key order (big-endian bytes = numeric order) lets RocksDB skip its
        // own sort and walk blocks in order.
        std::sort(to_read.begin(), to_read.end(),
                  [&](uint32_t a, uint32_t b) { return keys[a] < keys[b]; });
        std::vector<char> kbuf(8 * m);
        std::vector<rocksdb::Slice> slices(m);
        for (size_t j = 0; j < m; ++j) {
          EncodeKey(keys[to_read[j]], &kbuf[8 * j]);
          slices[j] = rocksdb::Slice(&kbuf[8 * j], 8);
        }
        disk_->MultiGet(cf_, m, slices.data(), values.data(), statuses.data());
      }
      if (!refused.ok() && mode == MissMode::kCreate) {
        for (size_t j = 0; j < m; ++j) {
          if (statuses[j].IsNotFound()) return refused;  // before admission
        }
      }
      if (read_tags) {
        tag_keys.resize(m);
        tag_vals.resize(m);
        for (size_t j = 0; j < m; ++j) tag_keys[j] = keys[to_read[j]];
        PSDB_RETURN_IF_ERROR(ReadTags(tag_keys, tag_vals.data()));
        for (size_t j = 0; j < m; ++j) tags[to_read[j]] = tag_vals[j];
      }
      for (size_t j = 0; j < m; ++j) {
        const uint32_t i = to_read[j];
        if (mode == MissMode::kOverwrite) {
          if (!statuses[j].ok() && !statuses[j].IsNotFound()) {
            return FromRocks(
                statuses[j],
                absl::StrCat("table ", name(), " key ", KeyString(keys[i])));
          }
          // Exists or is created; on_resident overwrites all of it.
          has_row[i] = 1;
          created[i] = statuses[j].IsNotFound() ? 1 : 0;
          headers[i] = RowHeader{};
          continue;
        }
        float* row = rows.data() + i * row_floats_;
        if (statuses[j].ok()) {
          absl::Status s =
              DecodeRow(absl::string_view(values[j].data(), values[j].size()),
                        dim(), state_size_, &headers[i], absl::MakeSpan(row, d),
                        absl::MakeSpan(row + d, ss));
          if (!s.ok()) {
            if (mode != MissMode::kAssign) return DataLoss(keys[i], s);
            std::fill(row, row + row_floats_, 0.0f);  // overwritten anyway
            headers[i] = RowHeader{};
          }
          has_row[i] = 1;
          created[i] = 0;
          continue;
        }
        if (!statuses[j].IsNotFound()) {
          return FromRocks(statuses[j], absl::StrCat("table ", name(), " key ",
                                                     KeyString(keys[i])));
        }
        if (mode == MissMode::kServing) continue;  // stays absent
        if (mode == MissMode::kCreate && admission_.enabled()) {
          if (admitted[i] < 0) {
            admitted[i] = admission_.Record(keys[i], occurrences[i]) ? 1 : 0;
          }
          if (admitted[i] == 0) continue;
        }
        InitializeRow(spec_, keys[i], absl::MakeSpan(row, d));
        optim::InitState(spec_.optimizer, dim(), absl::MakeSpan(row + d, ss));
        headers[i] = RowHeader{};
        has_row[i] = 1;
        created[i] = 1;
      }
    }
    size_t need = 0;
    for (uint32_t i : pending) need += has_row[i];
    // 3. Slots for the rows we loaded or created (room was made in step 0;
    //    only a concurrent insert can have taken it since).
    std::vector<uint32_t> free_slots;
    if (need > 0) {
      const uint64_t bytes = need * mem_.slot_bytes();
      if (budget_->used().load(std::memory_order_relaxed) + bytes >
          budget_->budget()) {
        (void)budget_->MakeRoom(this, bytes);  // refusal was step 0's
      }
      mem_.Allocate(need, &free_slots);
    }
    // 4. Insert under the stripe locks, unless someone beat us to it or the
    //    key left memory since the probe (then a write-back may have made
    //    our read stale). Keys neither resident, on disk nor to be created
    //    stay absent.
    std::vector<uint32_t> retry;
    std::vector<uint32_t> uncached;
    for (size_t j = 0; j < pending.size();) {
      const uint32_t s = mem_.StripeOf(keys[pending[j]]);
      Stripe& st = mem_.stripe(s);
      absl::MutexLock l(&st.mu);
      for (; j < pending.size() && mem_.StripeOf(keys[pending[j]]) == s; ++j) {
        const uint32_t i = pending[j];
        auto it = st.index.find(keys[i]);
        if (it != st.index.end()) {
          mem_.Touch(it->second);
          on_resident(i, it->second);
          continue;
        }
        if (!was_read[i] || st.RemovedSince(keys[i], seq[i])) {
          retry.push_back(i);
          continue;
        }
        if (!has_row[i]) {
          if (mode == MissMode::kCreate && admitted[i] == 0) {
            not_admitted_.fetch_add(occurrences[i], std::memory_order_relaxed);
          }
          on_absent(i);
          continue;
        }
        const uint32_t slot = free_slots.back();
        free_slots.pop_back();
        if (mode != MissMode::kOverwrite) {
          const float* row = rows.data() + i * row_floats_;
          std::memcpy(mem_.values(slot), row, 4 * row_floats_);
        }
        *mem_.header(slot) = headers[i];
        if (mem_.has_lsn()) *mem_.lsn(slot) = read_tags ? tags[i] : 0;
        mem_.StoreKey(slot, keys[i]);
        ++mem_.meta(slot)->version;  // never reused: no ABA across owners
        if (!refused.ok()) {
          // No room and the disk refuses: a row read from disk (a create
          // was refused in step 2) is served from a scratch slot, not
          // cached, so reads keep the memory tier within its bound.
          on_resident(i, slot);
          uncached.push_back(slot);
          continue;
        }
        mem_.SetFlags(slot, kOccupied | kRef);
        st.index.emplace(keys[i], slot);
        mem_.resident().fetch_add(1, std::memory_order_relaxed);
        budget_->used().fetch_add(mem_.slot_bytes(), std::memory_order_relaxed);
        if (created[i]) {
          created_.fetch_add(1, std::memory_order_relaxed);
          rows_.fetch_add(1, std::memory_order_relaxed);
          MarkDirty(st, slot);
        }
        mem_.Touch(slot);
        on_resident(i, slot);
      }
    }
    mem_.Free(free_slots.data(), free_slots.size());
    mem_.Free(uncached.data(), uncached.size());
    if (need > 0) budget_->AfterInsert();
    pending.swap(retry);
  }
  return absl::OkStatus();
}

void Table::LookUpOrMiss(absl::Span<const uint64_t> ukeys,
                         absl::Span<const uint32_t> occ, ResidentFn on_hit,
                         Misses* misses, const std::vector<uint32_t>* only) {
  const size_t n = only == nullptr ? ukeys.size() : only->size();
  for (size_t i = 0; i < n; ++i) {
    const uint32_t u = only == nullptr ? static_cast<uint32_t>(i) : (*only)[i];
    Stripe& st = mem_.stripe(mem_.StripeOf(ukeys[u]));
    absl::MutexLock l(&st.mu);
    auto it = st.index.find(ukeys[u]);
    if (it != st.index.end()) {
      on_hit(u, it->second);
    } else {
      misses->keys.push_back(ukeys[u]);
      misses->occurrences.push_back(occ.empty() ? 1 : occ[u]);
      misses->index.push_back(u);
    }
  }
}

absl::Status Table::MaterializeLocked(uint64_t key, uint32_t occurrences,
                                      int8_t admitted, MissMode mode, size_t i,
                                      ResidentFn on_resident,
                                      AbsentFn on_absent) {
  const size_t d = static_cast<size_t>(dim());
  const size_t ss = static_cast<size_t>(state_size_);
  Stripe& st = mem_.stripe(mem_.StripeOf(key));
  absl::MutexLock l(&st.mu);
  auto it = st.index.find(key);
  if (it != st.index.end()) {
    on_resident(i, it->second);
    return absl::OkStatus();
  }
  char kbuf[8];
  EncodeKey(key, kbuf);
  std::string value;
  bool found = false;
  PSDB_RETURN_IF_ERROR(
      disk_->Get(cf_, rocksdb::Slice(kbuf, 8), &value, &found));
  std::vector<float> row(row_floats_);
  RowHeader header;
  bool created = false;
  if (found) {
    absl::Status s = DecodeRow(value, dim(), state_size_, &header,
                               absl::MakeSpan(row.data(), d),
                               absl::MakeSpan(row.data() + d, ss));
    if (!s.ok()) {
      if (mode != MissMode::kAssign && mode != MissMode::kOverwrite) {
        return DataLoss(key, s);
      }
      header = RowHeader{};
    }
  } else {
    if (mode == MissMode::kServing) {
      on_absent(i);
      return absl::OkStatus();
    }
    if (mode == MissMode::kCreate &&
        !(admitted >= 0 ? admitted == 1
                        : admission_.Record(key, occurrences))) {
      not_admitted_.fetch_add(occurrences, std::memory_order_relaxed);
      on_absent(i);
      return absl::OkStatus();
    }
    InitializeRow(spec_, key, absl::MakeSpan(row.data(), d));
    optim::InitState(spec_.optimizer, dim(),
                     absl::MakeSpan(row.data() + d, ss));
    created = true;
  }
  std::vector<uint32_t> slots;
  mem_.Allocate(1, &slots);
  const uint32_t slot = slots[0];
  std::memcpy(mem_.values(slot), row.data(), 4 * row_floats_);
  *mem_.header(slot) = header;
  if (mem_.has_lsn()) {
    uint64_t tag = 0;
    if (replaying_) PSDB_RETURN_IF_ERROR(ReadTags({key}, &tag));
    *mem_.lsn(slot) = tag;
  }
  mem_.StoreKey(slot, key);
  ++mem_.meta(slot)->version;
  mem_.SetFlags(slot, kOccupied | kRef);
  st.index.emplace(key, slot);
  mem_.resident().fetch_add(1, std::memory_order_relaxed);
  budget_->used().fetch_add(mem_.slot_bytes(), std::memory_order_relaxed);
  if (created) {
    created_.fetch_add(1, std::memory_order_relaxed);
    rows_.fetch_add(1, std::memory_order_relaxed);
    MarkDirty(st, slot);
  }
  on_resident(i, slot);
  return absl::OkStatus();
}

// ---------------------------------------------------------------------------
// Pull

absl::Status Table::Pull(absl::Span<const uint64_t> keys, absl::Span<float> out,
                         const PullOptions& options) {
  PSDB_RETURN_IF_ERROR(CheckBatch(keys.size()));
  const size_t n = keys.size();
  const size_t d = static_cast<size_t>(dim());
  if (out.size() != n * d) {
    return absl::InvalidArgumentError(
        absl::StrCat("table ", name(), ": pull of ", n, " keys of dim ", d,
                     " needs ", n * d, " output floats, got ", out.size()));
  }
  const bool count = !options.serving;
  Scratch& sc = tls;
  mem_.AdvanceTick();
  sc.groups.Build(mem_, n, [&](size_t i) { return keys[i]; });
  sc.miss_pos.clear();
  const int ns = mem_.num_stripes();
  for (int s = 0; s < ns; ++s) {
    const uint32_t b = sc.groups.bounds[s], e = sc.groups.bounds[s + 1];
    if (b == e) continue;
    Stripe& st = mem_.stripe(s);
    absl::MutexLock l(&st.mu);
    for (uint32_t j = b; j < e; ++j) {
      const uint32_t i = sc.groups.order[j];
      auto it = st.index.find(keys[i]);
      if (it == st.index.end()) {
        sc.miss_pos.push_back(i);
        continue;
      }
      const uint32_t slot = it->second;
      std::memcpy(out.data() + i * d, mem_.values(slot), 4 * d);
      if (count) ++mem_.header(slot)->frequency;
      mem_.Touch(slot);
    }
  }
  hits_.fetch_add(n - sc.miss_pos.size(), std::memory_order_relaxed);
  if (sc.miss_pos.empty()) return absl::OkStatus();

  // Misses: de-duplicate, materialize, scatter.
  const size_t m = sc.miss_pos.size();
  sc.dedup.Reset(m);
  sc.inverse.resize(m);
  sc.miss_occ.clear();
  for (size_t j = 0; j < m; ++j) {
    bool inserted;
    const uint32_t u = sc.dedup.Insert(keys[sc.miss_pos[j]], &inserted);
    if (inserted) sc.miss_occ.push_back(0);
    ++sc.miss_occ[u];
    sc.inverse[j] = u;
  }
  sc.miss_keys.assign(sc.dedup.unique().begin(), sc.dedup.unique().end());
  const size_t nu = sc.miss_keys.size();
  misses_.fetch_add(nu, std::memory_order_relaxed);
  sc.ubuf.resize(nu * d);
  float* ubuf = sc.ubuf.data();
  const std::vector<uint64_t>& ukeys = sc.miss_keys;
  const std::vector<uint32_t>& uocc = sc.miss_occ;
  PSDB_RETURN_IF_ERROR(Materialize(
      ukeys, uocc, options.serving ? MissMode::kServing : MissMode::kCreate,
      [&](size_t u, uint32_t slot) {
        std::memcpy(ubuf + u * d, mem_.values(slot), 4 * d);
        if (count) mem_.header(slot)->frequency += uocc[u];
      },
      [&](size_t u) {
        DefaultRow(spec_, ukeys[u], absl::MakeSpan(ubuf + u * d, d));
      },
      /*refusable=*/true));
  for (size_t j = 0; j < m; ++j) {
    std::memcpy(out.data() + sc.miss_pos[j] * d, ubuf + sc.inverse[j] * d,
                4 * d);
  }
  return absl::OkStatus();
}

// ---------------------------------------------------------------------------
// Push

absl::Status Table::Push(absl::Span<const uint64_t> keys,
                         absl::Span<const float> grads,
                         const PushOptions& options) {
  if (options.step < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "table ", name(), ": push step must be >= 0, got ", options.step));
  }
  return PushImpl(keys, grads, options.step, /*replay_lsn=*/0);
}

absl::Status Table::ReplayPush(uint64_t lsn, absl::Span<const uint64_t> keys,
                               absl::Span<const float> grads, int64_t step) {
  // Only the keys whose row does not include the record yet: a skipped key
  // must not even be created (it may have been deleted after the record).
  std::vector<uint8_t> keep;
  PSDB_RETURN_IF_ERROR(ReplayKeep(keys, lsn, &keep));
  std::vector<uint64_t> k;
  std::vector<float> g;
  const size_t d = static_cast<size_t>(dim());
  for (size_t i = 0; i < keys.size(); ++i) {
    if (!keep[i]) continue;
    k.push_back(keys[i]);
    g.insert(g.end(), grads.begin() + i * d, grads.begin() + (i + 1) * d);
  }
  if (k.empty()) {
    ObserveStep(step);  // the push's step counts even so
    return absl::OkStatus();
  }
  return PushImpl(k, g, step, lsn);
}

absl::Status Table::ReplayPushSums(uint64_t lsn,
                                   absl::Span<const uint64_t> keys,
                                   absl::Span<const uint32_t> occ,
                                   absl::Span<const float> sums, int64_t step) {
  const size_t d = static_cast<size_t>(dim());
  if (occ.size() != keys.size() || sums.size() != keys.size() * d) {
    return absl::DataLossError(absl::StrCat(
        "table ", name(), ": logged push of ", keys.size(), " keys has ",
        occ.size(), " counts and ", sums.size(), " gradient floats"));
  }
  std::vector<uint8_t> keep;
  PSDB_RETURN_IF_ERROR(ReplayKeep(keys, lsn, &keep));
  // The de-duplicated batch as PushImpl leaves it for ApplyPush, from the
  // keys whose row does not include the record yet.
  Scratch& sc = tls;
  sc.dedup.Reset(keys.size());
  sc.occ.clear();
  sc.skip.clear();
  sc.gsum.resize(keys.size() * d);
  for (size_t i = 0; i < keys.size(); ++i) {
    if (!keep[i]) continue;
    bool inserted;
    const uint32_t u = sc.dedup.Insert(keys[i], &inserted);
    if (!inserted) {
      return absl::DataLossError(
          absl::StrCat("table ", name(), ": logged push repeats key ",
                       KeyString(keys[i]), " at position ", i));
    }
    sc.occ.push_back(occ[i]);
    sc.skip.push_back(0);
    std::memcpy(sc.gsum.data() + u * d, sums.data() + i * d, 4 * d);
  }
  if (sc.occ.empty()) {
    ObserveStep(step);  // the push's step counts even so
    return absl::OkStatus();
  }
  bool updated = false;
  return ApplyPush(ResolveStep(step), step, lsn, /*replay=*/true, &updated);
}

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

int64_t Table::ResolveStep(int64_t step) {
  if (step == 0) return step_.fetch_add(1, std::memory_order_relaxed) + 1;
  ObserveStep(step);
  return step;
}

absl::Status Table::PushImpl(absl::Span<const uint64_t> keys,
                             absl::Span<const float> grads, int64_t step_arg,
                             uint64_t replay_lsn) {
  PSDB_RETURN_IF_ERROR(CheckBatch(keys.size()));
  const size_t n = keys.size();
  const size_t d = static_cast<size_t>(dim());
  if (grads.size() != n * d) {
    return absl::InvalidArgumentError(
        absl::StrCat("table ", name(), ": push of ", n, " keys of dim ", d,
                     " needs ", n * d, " gradient floats, got ", grads.size()));
  }
  Scratch& sc = tls;
  // De-duplicate and sum; find non-finite gradients.
  sc.dedup.Reset(n);
  sc.occ.clear();
  sc.skip.clear();
  sc.gsum.resize(n * d);
  auto refuse = [&](size_t i, absl::string_view what) {
    return absl::InvalidArgumentError(
        absl::StrCat("table ", name(), ": non-finite or out-of-range ", what,
                     " for key ", KeyString(keys[i]), " at position ", i,
                     " (|g| must be <= ", kMaxGradient, "; nothing applied)"));
  };
  const bool reject = spec_.non_finite == NonFinitePolicy::kReject;
  for (size_t i = 0; i < n; ++i) {
    const float* g = grads.data() + i * d;
    const bool ok = AllInRange(g, d);
    if (!ok && reject) return refuse(i, "gradient");
    bool inserted;
    const uint32_t u = sc.dedup.Insert(keys[i], &inserted);
    float* acc = sc.gsum.data() + u * d;
    // The first occurrence is copied, not added to 0.0f (which would turn
    // -0.0f into +0.0f); later ones are added in batch order.
    // Partitioner::GatherSum sums a remote push the same way: keep them equal.
    if (inserted) {
      sc.occ.push_back(1);
      sc.skip.push_back(!ok);
      std::memcpy(acc, g, 4 * d);
    } else {
      ++sc.occ[u];
      sc.skip[u] |= !ok;
      for (size_t j = 0; j < d; ++j) acc[j] += g[j];
      // The sum of a key's duplicates must be in range too.
      if (!sc.skip[u] && !AllInRange(acc, d)) {
        if (reject) return refuse(i, "sum of the gradients");
        sc.skip[u] = 1;
      }
    }
  }
  bool updated = false;
  if (replay_lsn != 0) {
    return ApplyPush(ResolveStep(step_arg), step_arg, replay_lsn,
                     /*replay=*/true, &updated);
  }
  if (wal_ == nullptr) {
    return ApplyPush(/*step=*/0, step_arg, 0, /*replay=*/false, &updated);
  }
  // Logged: append and apply in one critical section (LSN order = apply
  // order for this table's rows), then wait for the group write.
  // The record is the de-duplicated push (what ApplyPush applies), built
  // outside the lock; only its step is set inside.
  const size_t nu = sc.dedup.unique().size();
  EncodePushSumsRecord(name(), 0, sc.dedup.unique(), sc.occ,
                       absl::MakeConstSpan(sc.gsum.data(), nu * d),
                       static_cast<int>(d), sc.skip, &WalPayload());
  uint64_t lsn;
  absl::Status s;
  {
    Wal::ApplyScope scope(wal_);
    absl::MutexLock l(&wal_mu_);
    // Every step change of a logged table happens under wal_mu_: a push
    // refused before it updated a row puts the step back.
    const int64_t step_before = step_.load(std::memory_order_relaxed);
    const int64_t step = ResolveStep(step_arg);
    std::memcpy(WalPayload().data() + WalPushStepOffset(name().size()), &step,
                8);
    lsn = wal_->AppendFramed(WalRecordType::kPushSums, &WalPayload());
    s = ApplyPush(step, step_arg, lsn, /*replay=*/false, &updated);
    if (!s.ok() && !updated)
      step_.store(step_before, std::memory_order_relaxed);
    if (!s.ok()) {
      wal_->Append(WalRecordType::kAbort,
                   absl::string_view(reinterpret_cast<const char*>(&lsn), 8));
    }
  }
  PSDB_RETURN_IF_ERROR(s);
  return wal_->WaitWritten(lsn);
}

absl::Status Table::ApplyPush(int64_t step, int64_t step_arg, uint64_t lsn,
                              bool replay, bool* updated) {
  *updated = false;
  Scratch& sc = tls;
  const size_t d = static_cast<size_t>(dim());
  const absl::Span<const uint64_t> ukeys = sc.dedup.unique();
  const size_t nu = ukeys.size();
  // The step is taken when the first row is updated (or at the end of a
  // push that updated none), so a push refused before that (Materialize)
  // leaves the table step as it was.
  auto take_step = [&] {
    if (step == 0) step = ResolveStep(step_arg);
  };

  sc.work.clear();
  for (uint32_t u = 0; u < nu; ++u) {
    if (!sc.skip[u]) sc.work.push_back(u);
  }
  const size_t nw = sc.work.size();
  if (nw == 0) {
    take_step();  // a push of only skipped rows still counts as a step
    return absl::OkStatus();
  }
  const float* gsum = sc.gsum.data();
  const std::vector<uint32_t>& occ = sc.occ;
  const bool track = mem_.has_lsn() && lsn != 0;
  auto apply = [&](uint32_t u, uint32_t slot) {
    take_step();
    *updated = true;
    if (track) {
      // Replay: the row already includes this record (it reached disk).
      if (replay && *mem_.lsn(slot) >= lsn) return;
      *mem_.lsn(slot) = lsn;
    }
    // An update that would leave a non-finite value or state (an
    // accumulator overflowing float after many huge gradients) is undone:
    // a stored row is always finite (what a checkpoint must hold).
    float* values = mem_.values(slot);
    float* state = mem_.state(slot);
    std::memcpy(sc.undo.data(), values, 4 * d);
    std::memcpy(sc.undo.data() + d, state, 4 * state_size_);
    optim::Apply(spec_.optimizer, absl::MakeSpan(values, d),
                 absl::MakeSpan(state, state_size_),
                 absl::MakeConstSpan(gsum + u * d, d), step);
    if (!AllFinite(values, d) || !AllFinite(state, state_size_)) {
      std::memcpy(values, sc.undo.data(), 4 * d);
      std::memcpy(state, sc.undo.data() + d, 4 * state_size_);
      non_finite_updates_.fetch_add(1, std::memory_order_relaxed);
      mem_.Touch(slot);
      return;
    }
    RowHeader* h = mem_.header(slot);
    h->last_update_step = std::max(h->last_update_step, step);
    ++h->update_count;
    h->frequency += occ[u];
    Stripe& stripe = mem_.stripe(mem_.StripeOf(ukeys[u]));
    stripe.mu.AssertHeld();  // on_resident runs under it (Materialize)
    MarkDirty(stripe, slot);
    mem_.Touch(slot);
  };

  sc.undo.resize(d + state_size_);

  // Pass 1: look up (no change yet).
  mem_.AdvanceTick();
  sc.groups.Build(mem_, nw, [&](size_t w) { return ukeys[sc.work[w]]; });
  sc.slots.assign(nu, kNoSlot);
  sc.miss_keys.clear();
  sc.miss_occ.clear();
  sc.miss_unique.clear();
  const int ns = mem_.num_stripes();
  for (int s = 0; s < ns; ++s) {
    const uint32_t b = sc.groups.bounds[s], e = sc.groups.bounds[s + 1];
    if (b == e) continue;
    Stripe& st = mem_.stripe(s);
    absl::MutexLock l(&st.mu);
    for (uint32_t j = b; j < e; ++j) {
      const uint32_t u = sc.work[sc.groups.order[j]];
      auto it = st.index.find(ukeys[u]);
      if (it == st.index.end()) {
        sc.miss_keys.push_back(ukeys[u]);
        sc.miss_occ.push_back(occ[u]);
        sc.miss_unique.push_back(u);
      } else {
        sc.slots[u] = it->second;
      }
    }
  }
  hits_.fetch_add(nw - sc.miss_keys.size(), std::memory_order_relaxed);
  misses_.fetch_add(sc.miss_keys.size(), std::memory_order_relaxed);
  // Misses: load or create (decoding everything first), apply on insert.
  if (!sc.miss_keys.empty()) {
    const std::vector<uint32_t>& mu = sc.miss_unique;
    PSDB_RETURN_IF_ERROR(Materialize(
        sc.miss_keys, sc.miss_occ, MissMode::kCreate,
        [&](size_t i, uint32_t slot) { apply(mu[i], slot); }, [&](size_t) {},
        /*refusable=*/true, /*dirties=*/true));
  }
  // Pass 2: apply to the hits of pass 1 whose slot still holds their key.
  std::vector<uint64_t> retry_keys;
  std::vector<uint32_t> retry_occ, retry_u;
  for (int s = 0; s < ns; ++s) {
    const uint32_t b = sc.groups.bounds[s], e = sc.groups.bounds[s + 1];
    if (b == e) continue;
    Stripe& st = mem_.stripe(s);
    absl::MutexLock l(&st.mu);
    for (uint32_t j = b; j < e; ++j) {
      const uint32_t u = sc.work[sc.groups.order[j]];
      const uint32_t slot = sc.slots[u];
      if (slot == kNoSlot) continue;
      if ((mem_.LoadFlags(slot) & kOccupied) != 0 &&
          mem_.LoadKey(slot) == ukeys[u]) {
        apply(u, slot);
      } else {
        retry_keys.push_back(ukeys[u]);
        retry_occ.push_back(occ[u]);
        retry_u.push_back(u);
      }
    }
  }
  if (!retry_keys.empty()) {
    PSDB_RETURN_IF_ERROR(Materialize(
        retry_keys, retry_occ, MissMode::kCreate,
        [&](size_t i, uint32_t slot) { apply(retry_u[i], slot); },
        [&](size_t) {}));
  }
  take_step();  // a push whose keys were all below admission counts too
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
