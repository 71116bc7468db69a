// Table's encoded row transfer for live resharding (Store::ReadEncodedRows,
// Store::IngestRows): rows travel in their RocksDB encoding
// (store/row_codec.h), so a source copies disk rows as stored and a
// destination checks each row's checksum instead of decoding and
// re-validating it.
#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "store/row_codec.h"
#include "store/stripe_groups.h"
#include "store/table.h"
#include "store/table_impl.h"
#include "util/key_dedup.h"
#include "util/status_macros.h"

namespace psdb::internal {

absl::Status Table::ReadEncodedRows(absl::Span<const uint64_t> keys,
                                    std::vector<uint64_t>* found,
                                    std::string* out) {
  PSDB_RETURN_IF_ERROR(CheckBatch(keys.size()));
  if (found == nullptr || out == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat("table ", name(), ": ReadEncodedRows output is null"));
  }
  const size_t d = static_cast<size_t>(dim());
  const size_t ss = static_cast<size_t>(state_size_);
  const size_t row_bytes = EncodedRowSize(dim(), state_size_);
  // Resident rows are encoded under their stripe lock, each stripe locked
  // once: its keys are looked up and their rows prefetched first, then
  // encoded, so the rows' cache misses overlap (a source reads rows that
  // nothing has touched lately). Row i goes to position i, and the rows of
  // keys not resident are squeezed out afterwards, which keeps the order.
  // Those keys are read from RocksDB below, as stored.
  const size_t n = keys.size();
  const size_t base = out->size();
  out->resize(base + n * row_bytes);
  char* const rows = out->data() + base;
  std::vector<uint8_t> resident(n, 0);
  std::vector<uint32_t> slots;
  StripeGroups groups;
  groups.Build(mem_, n, [&](size_t i) { return keys[i]; });
  for (int s = 0; s < mem_.num_stripes(); ++s) {
    const uint32_t b = groups.bounds[s], e = groups.bounds[s + 1];
    if (b == e) continue;
    Stripe& st = mem_.stripe(s);
    absl::MutexLock l(&st.mu);
    slots.clear();
    for (uint32_t j = b; j < e; ++j) {
      auto it = st.index.find(keys[groups.order[j]]);
      const uint32_t slot = it == st.index.end() ? kNoSlot : it->second;
      if (slot != kNoSlot) mem_.PrefetchRow(slot);
      slots.push_back(slot);
    }
    for (uint32_t j = b; j < e; ++j) {
      const uint32_t slot = slots[j - b];
      if (slot == kNoSlot) continue;
      const uint32_t i = groups.order[j];
      EncodeRowTo(*mem_.header(slot), absl::MakeConstSpan(mem_.values(slot), d),
                  absl::MakeConstSpan(mem_.state(slot), ss),
                  rows + i * row_bytes);
      resident[i] = 1;
    }
  }
  std::vector<uint64_t> misses;
  size_t kept = 0;
  for (size_t i = 0; i < n; ++i) {
    if (!resident[i]) {
      misses.push_back(keys[i]);
      continue;
    }
    if (kept != i) {
      std::memmove(rows + kept * row_bytes, rows + i * row_bytes, row_bytes);
    }
    ++kept;
    found->push_back(keys[i]);
  }
  out->resize(base + kept * row_bytes);
  if (misses.empty()) return absl::OkStatus();
  std::sort(misses.begin(), misses.end());  // RocksDB walks blocks in order
  const size_t m = misses.size();
  std::vector<char> kbuf(8 * m);
  std::vector<rocksdb::Slice> slices(m);
  for (size_t j = 0; j < m; ++j) {
    EncodeKey(misses[j], &kbuf[8 * j]);
    slices[j] = rocksdb::Slice(&kbuf[8 * j], 8);
  }
  std::vector<rocksdb::PinnableSlice> values(m);
  std::vector<rocksdb::Status> statuses(m);
  disk_->MultiGet(cf_, m, slices.data(), values.data(), statuses.data());
  for (size_t j = 0; j < m; ++j) {
    if (statuses[j].IsNotFound()) continue;  // no row (never materialized)
    if (!statuses[j].ok()) {
      return FromRocks(statuses[j],
                       absl::StrCat("table ", name(), " key ", misses[j]));
    }
    // Checked here too, so a corrupt row fails at its source, named.
    const absl::string_view value(values[j].data(), values[j].size());
    if (absl::Status s = VerifyRow(value, dim(), state_size_); !s.ok()) {
      return DataLoss(misses[j], s);
    }
    out->append(value.data(), value.size());
    found->push_back(misses[j]);
  }
  return absl::OkStatus();
}

absl::Status Table::IngestRows(absl::Span<const uint64_t> keys,
                               absl::string_view rows) {
  PSDB_RETURN_IF_ERROR(CheckBatch(keys.size()));
  const size_t n = keys.size();
  const size_t ss = static_cast<size_t>(state_size_);
  const size_t row_bytes = EncodedRowSize(dim(), state_size_);
  if (rows.size() != n * row_bytes) {
    return absl::InvalidArgumentError(absl::StrCat(
        "table ", name(), ": IngestRows of ", n, " keys got ", rows.size(),
        " bytes, expected ", n * row_bytes, " (", row_bytes, " per row)"));
  }
  auto row = [&](size_t i) { return rows.substr(i * row_bytes, row_bytes); };
  // Every row is checked before anything is written.
  for (size_t i = 0; i < n; ++i) {
    if (absl::Status s = VerifyRow(row(i), dim(), state_size_); !s.ok()) {
      return absl::DataLossError(absl::StrCat(
          "table ", name(), ": IngestRows row for key ", keys[i],
          " at position ", i, ": ", s.message(), " (nothing written)"));
    }
    if (!VerifiedRowIsFinite(row(i), dim(), state_size_)) {
      return absl::InvalidArgumentError(
          absl::StrCat("table ", name(), ": IngestRows row for key ", keys[i],
                       " at position ", i, " is not finite (nothing written)"));
    }
  }
  if (wal_ != nullptr) {
    // The write-ahead log records PutRows, not ingests: in wal mode the
    // rows are decoded and put, so a destination keeps the rows it received
    // across a kill like any other acknowledged write.
    RowBatch batch;
    batch.Resize(dim(), state_size_, n);
    for (size_t i = 0; i < n; ++i) {
      CopyVerifiedRow(row(i), dim(), state_size_, &batch.headers[i],
                      batch.values.data() + i * dim(),
                      ss > 0 ? batch.state.data() + i * ss : nullptr);
    }
    return PutRows(keys, batch);
  }
  // Last occurrence of each key wins, as in PutRows.
  KeyDedup dedup;
  std::vector<uint32_t> last;
  LastOccurrences(keys, &dedup, &last);
  const absl::Span<const uint64_t> ukeys = dedup.unique();
  auto assign = [&](size_t u, uint32_t slot) {
    CopyVerifiedRow(row(last[u]), dim(), state_size_, mem_.header(slot),
                    mem_.values(slot), ss > 0 ? mem_.state(slot) : nullptr);
    Stripe& stripe = mem_.stripe(mem_.StripeOf(ukeys[u]));
    stripe.mu.AssertHeld();  // on_resident runs under it (Materialize)
    MarkDirty(stripe, slot);
    mem_.Touch(slot);
  };
  Misses m;
  LookUpOrMiss(ukeys, {}, assign, &m);
  if (m.keys.empty()) return absl::OkStatus();
  return Materialize(
      m.keys, m.occurrences, MissMode::kOverwrite,
      [&](size_t j, uint32_t slot) { assign(m.index[j], slot); },
      [&](size_t) {});
}

}  // namespace psdb::internal
