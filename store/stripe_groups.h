// StripeGroups: the items of one batch grouped by the memory tier's lock
// stripe of their key (a counting sort), so a caller locks each stripe once
// per batch (store/memory_tier.h). Internal to psdb_store.
//
//   StripeGroups g;  // keep it: it is scratch space reused batch to batch
//   g.Build(mem, keys.size(), [&](size_t i) { return keys[i]; });
//   for (int s = 0; s < mem.num_stripes(); ++s) {
//     // items g.order[j] for j in [g.bounds[s], g.bounds[s + 1]), in their
//     // batch order, all of stripe s
//   }
//
// Thread-safety: none; one per thread (or per call).
#ifndef PSDB_STORE_STRIPE_GROUPS_H_
#define PSDB_STORE_STRIPE_GROUPS_H_

#include <cstddef>
#include <cstdint>
#include <vector>

#include "store/memory_tier.h"

namespace psdb::internal {

struct StripeGroups {
  std::vector<uint32_t> stripe_of;
  std::vector<uint32_t> bounds;  // stripes + 1
  std::vector<uint32_t> order;

  template <typename KeyFn>
  void Build(const MemoryTier& mem, size_t n, KeyFn key) {
    const size_t ns = static_cast<size_t>(mem.num_stripes());
    stripe_of.resize(n);
    bounds.assign(ns + 1, 0);
    order.resize(n);
    for (size_t i = 0; i < n; ++i) {
      const uint32_t s = mem.StripeOf(key(i));
      stripe_of[i] = s;
      ++bounds[s + 1];
    }
    for (size_t s = 0; s < ns; ++s) bounds[s + 1] += bounds[s];
    // Fill using a moving cursor per stripe (reuses `bounds` shifted).
    cursor.assign(bounds.begin(), bounds.end() - 1);
    for (size_t i = 0; i < n; ++i) {
      order[cursor[stripe_of[i]]++] = static_cast<uint32_t>(i);
    }
  }

 private:
  std::vector<uint32_t> cursor;
};

}  // namespace psdb::internal

#endif  // PSDB_STORE_STRIPE_GROUPS_H_
