// Table's pull path (store/table.h, "Data path"): hits are copied under
// each stripe's lock, misses de-duplicated and brought in by Materialize
// (created, or the table's default for a serving pull), then scattered.
#include <cstring>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/types/span.h"
#include "store/table.h"
#include "store/table_impl.h"
#include "util/status_macros.h"

namespace psdb::internal {

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
  TableScratch& sc = ThreadScratch();
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

}  // namespace psdb::internal
