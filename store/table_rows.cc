// Table's whole-row reads and writes (store/table.h): PullRows, PutRows,
// the replay of a logged PutRows, and LastOccurrences, the "last occurrence
// wins" de-duplication PutRows shares with IngestRows.
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/types/span.h"
#include "optim/optimizer.h"
#include "store/row_codec.h"
#include "store/table.h"
#include "util/key_dedup.h"
#include "util/status_macros.h"

namespace psdb::internal {

absl::Status Table::PullRows(absl::Span<const uint64_t> keys, RowBatch* out,
                             bool serving, std::vector<uint8_t>* present) {
  PSDB_RETURN_IF_ERROR(CheckBatch(keys.size()));
  if (out == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat("table ", name(), ": PullRows output is null"));
  }
  const size_t n = keys.size();
  const size_t d = static_cast<size_t>(dim());
  const size_t ss = static_cast<size_t>(state_size_);
  KeyDedup dedup;
  dedup.Reset(n);
  std::vector<uint32_t> inverse(n), occ;
  for (size_t i = 0; i < n; ++i) {
    bool inserted;
    const uint32_t u = dedup.Insert(keys[i], &inserted);
    if (inserted) occ.push_back(0);
    if (!serving) ++occ[u];
    inverse[i] = u;
  }
  const absl::Span<const uint64_t> ukeys = dedup.unique();
  const size_t nu = ukeys.size();
  RowBatch u;
  u.Resize(dim(), state_size_, nu);
  std::vector<uint8_t> upresent(present != nullptr ? nu : 0, 1);
  auto copy_out = [&](size_t i, uint32_t slot) {
    RowHeader* h = mem_.header(slot);
    h->frequency += occ[i];
    std::memcpy(u.values.data() + i * d, mem_.values(slot), 4 * d);
    if (ss > 0) std::memcpy(u.state.data() + i * ss, mem_.state(slot), 4 * ss);
    u.headers[i] = *h;
    mem_.Touch(slot);
  };
  // Look up everything; the misses go through Materialize.
  Misses m;
  LookUpOrMiss(ukeys, occ, copy_out, &m);
  hits_.fetch_add(nu - m.keys.size(), std::memory_order_relaxed);
  misses_.fetch_add(m.keys.size(), std::memory_order_relaxed);
  if (!m.keys.empty()) {
    PSDB_RETURN_IF_ERROR(Materialize(
        m.keys, m.occurrences, serving ? MissMode::kServing : MissMode::kCreate,
        [&](size_t j, uint32_t slot) { copy_out(m.index[j], slot); },
        [&](size_t j) {
          const size_t i = m.index[j];
          if (present != nullptr) upresent[i] = 0;
          DefaultRow(spec_, ukeys[i],
                     absl::MakeSpan(u.values.data() + i * d, d));
          optim::InitState(spec_.optimizer, dim(),
                           absl::MakeSpan(u.state.data() + i * ss, ss));
          u.headers[i] = RowHeader{};
        },
        /*refusable=*/true));
  }
  out->Resize(dim(), state_size_, n);
  for (size_t i = 0; i < n; ++i) {
    const size_t k = inverse[i];
    std::memcpy(out->values.data() + i * d, u.values.data() + k * d, 4 * d);
    if (ss > 0) {
      std::memcpy(out->state.data() + i * ss, u.state.data() + k * ss, 4 * ss);
    }
    out->headers[i] = u.headers[k];
  }
  if (present != nullptr) {
    present->resize(n);
    for (size_t i = 0; i < n; ++i) (*present)[i] = upresent[inverse[i]];
  }
  return absl::OkStatus();
}

void Table::LastOccurrences(absl::Span<const uint64_t> keys, KeyDedup* dedup,
                            std::vector<uint32_t>* last) {
  dedup->Reset(keys.size());
  last->clear();
  for (size_t i = 0; i < keys.size(); ++i) {
    bool inserted;
    const uint32_t u = dedup->Insert(keys[i], &inserted);
    if (inserted) last->push_back(0);
    (*last)[u] = static_cast<uint32_t>(i);
  }
}

absl::Status Table::PutRows(absl::Span<const uint64_t> keys,
                            const RowBatch& rows) {
  return PutRowsImpl(keys, rows, /*replay_lsn=*/0);
}

absl::Status Table::ReplayPutRows(uint64_t lsn, absl::Span<const uint64_t> keys,
                                  const RowBatch& rows) {
  std::vector<uint8_t> keep;
  PSDB_RETURN_IF_ERROR(ReplayKeep(keys, lsn, &keep));
  std::vector<uint64_t> k;
  RowBatch r;
  r.dim = rows.dim;
  r.state_size = rows.state_size;
  for (size_t i = 0; i < keys.size(); ++i) {
    if (!keep[i]) continue;
    k.push_back(keys[i]);
    r.AppendFrom(rows, i);
  }
  if (k.empty()) return absl::OkStatus();
  return PutRowsImpl(k, r, lsn);
}

absl::Status Table::PutRowsImpl(absl::Span<const uint64_t> keys,
                                const RowBatch& rows, uint64_t replay_lsn) {
  PSDB_RETURN_IF_ERROR(CheckBatch(keys.size()));
  const size_t n = keys.size();
  const size_t d = static_cast<size_t>(dim());
  const size_t ss = static_cast<size_t>(state_size_);
  if (rows.dim != dim() || rows.state_size != state_size_) {
    return absl::InvalidArgumentError(
        absl::StrCat("table ", name(), ": PutRows rows have dim ", rows.dim,
                     " state_size ", rows.state_size, ", table has dim ", dim(),
                     " state_size ", state_size_));
  }
  if (rows.size() != n || rows.values.size() != n * d ||
      rows.state.size() != n * ss) {
    return absl::InvalidArgumentError(
        absl::StrCat("table ", name(), ": PutRows of ", n, " keys got ",
                     rows.size(), " headers, ", rows.values.size(),
                     " values and ", rows.state.size(), " state floats"));
  }
  for (size_t i = 0; i < n; ++i) {
    if (!AllFinite(rows.values.data() + i * d, d) ||
        !AllFinite(rows.state.data() + i * ss, ss)) {
      return absl::InvalidArgumentError(
          absl::StrCat("table ", name(), ": PutRows row for key ", keys[i],
                       " at position ", i, " is not finite (nothing written)"));
    }
  }
  // Last occurrence of each key wins.
  KeyDedup dedup;
  std::vector<uint32_t> last;
  LastOccurrences(keys, &dedup, &last);
  const absl::Span<const uint64_t> ukeys = dedup.unique();
  const bool replay = replay_lsn != 0;
  std::optional<Wal::ApplyScope> scope;
  std::optional<absl::MutexLock> order;
  uint64_t lsn = replay_lsn;
  if (wal_ != nullptr && !replay) {
    scope.emplace(wal_);
    order.emplace(&wal_mu_);
    EncodePutRowsRecord(name(), keys, rows, &WalPayload());
    lsn = wal_->AppendFramed(WalRecordType::kPutRows, &WalPayload());
  }
  const bool track = mem_.has_lsn() && lsn != 0;
  auto assign = [&](size_t u, uint32_t slot) {
    if (track) {
      if (replay && *mem_.lsn(slot) >= lsn) return;
      *mem_.lsn(slot) = lsn;
    }
    const size_t i = last[u];
    std::memcpy(mem_.values(slot), rows.values.data() + i * d, 4 * d);
    if (ss > 0)
      std::memcpy(mem_.state(slot), rows.state.data() + i * ss, 4 * ss);
    *mem_.header(slot) = rows.headers[i];
    Stripe& stripe = mem_.stripe(mem_.StripeOf(ukeys[u]));
    stripe.mu.AssertHeld();  // on_resident runs under it (Materialize)
    MarkDirty(stripe, slot);
    mem_.Touch(slot);
  };
  // Misses first (the only part that can be refused), then the keys that
  // were resident, so a refused call assigns nothing; one evicted in
  // between is materialized again.
  Misses m;
  std::vector<uint32_t> hits;
  LookUpOrMiss(
      ukeys, {}, [&](size_t u, uint32_t) { hits.push_back(u); }, &m);
  if (!m.keys.empty()) {
    PSDB_RETURN_IF_ERROR(Materialize(
        m.keys, m.occurrences, MissMode::kAssign,
        [&](size_t j, uint32_t slot) { assign(m.index[j], slot); },
        [&](size_t) {},
        /*refusable=*/true));
  }
  m = Misses();
  LookUpOrMiss(ukeys, {}, assign, &m, &hits);
  absl::Status s;
  if (!m.keys.empty()) {
    s = Materialize(
        m.keys, m.occurrences, MissMode::kAssign,
        [&](size_t j, uint32_t slot) { assign(m.index[j], slot); },
        [&](size_t) {});
  }
  if (wal_ == nullptr || replay) return s;
  if (!s.ok()) {
    wal_->Append(WalRecordType::kAbort,
                 absl::string_view(reinterpret_cast<const char*>(&lsn), 8));
  }
  order.reset();
  scope.reset();
  PSDB_RETURN_IF_ERROR(s);
  return wal_->WaitWritten(lsn);
}

}  // namespace psdb::internal
