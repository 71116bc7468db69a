// Table's miss path (store/table.h, "Data path"): Materialize brings a
// batch's keys that are not resident into memory (one MultiGet, decode,
// create, insert under the stripe locks, the lost-update guard), with its
// locked fallback MaterializeLocked, and LookUpOrMiss, the one-key-at-a-time
// lookup of the whole-row paths. Every operation that touches rows uses it.
#include <algorithm>
#include <cstring>
#include <numeric>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/types/span.h"
#include "optim/optimizer.h"
#include "store/row_codec.h"
#include "store/stripe_groups.h"
#include "store/table.h"
#include "store/table_impl.h"
#include "util/status_macros.h"

namespace psdb::internal {
namespace {

// Optimistic read-then-insert rounds before Materialize falls back to
// reading under the stripe lock.
constexpr int kOptimisticRounds = 3;

}  // namespace

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

}  // namespace psdb::internal
