// Table's push path (store/table.h, "Data path"): validation,
// de-duplication and summing of the gradients, the write-ahead log record
// (kWal), the optimizer pass (ApplyPush) and the replay of logged pushes.
#include <algorithm>
#include <bit>
#include <cstring>
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
  TableScratch& sc = ThreadScratch();
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
  TableScratch& sc = ThreadScratch();
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
  TableScratch& sc = ThreadScratch();
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

}  // namespace psdb::internal
