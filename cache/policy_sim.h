// Cache-policy simulation and the theory it is checked against.
//
// SimulateHitRate drives a real SlotMap (the index and eviction classes
// VocabCache uses) over a trace of ids cut into batches, with no row data,
// so hit rates measured here are those of the cache's own policy code. The
// reference figures are computed independently:
//  - Che's approximation for LRU under the independent reference model
//    (Che, Tung, Wang, IEEE JSAC 2002; Fricker, Robert, Roberts 2012):
//    find T with sum_i (1 - exp(-p_i T)) = C, then H = sum_i p_i (1 - exp(-p_i
//    T)).
//  - The best static hit rate: the C most popular ids cached, H = sum_{i<=C}
//  p_i.
//  - Belady's offline optimum (MIN) on the same trace, one access at a time,
//    every miss inserted.
//
// Hit rates are per access after a warm-up: an access misses when its id is
// not cached at the start of its batch and it is the id's first access in
// the batch (the row is fetched once and serves the batch's duplicates).
//
// Thread-safety: pure functions.
#ifndef PSDB_CACHE_POLICY_SIM_H_
#define PSDB_CACHE_POLICY_SIM_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "cache/policy.h"

namespace psdb::cache {

// Zipf popularities p_i = i^-alpha / sum_j j^-alpha, i = 1..n (descending).
std::vector<double> ZipfProbabilities(int64_t n, double alpha);

// `length` independent draws from `probs` (std::mt19937_64 seeded with
// `seed`, inverse-CDF sampling); the i-th most popular item's id is
// Mix64(i), so ids look like hashed features. Deterministic on every
// platform.
std::vector<uint64_t> ZipfTrace(absl::Span<const double> probs, int64_t length,
                                uint64_t seed);

double CheLruHitRate(absl::Span<const double> probs, int64_t capacity);
// REQUIRES: probs sorted in descending order.
double StaticOptimumHitRate(absl::Span<const double> probs, int64_t capacity);
// Per-access hit rate of MIN over trace[warmup..), the cache warmed on the
// accesses before.
double BeladyHitRate(absl::Span<const uint64_t> trace, int64_t capacity,
                     int64_t warmup);

struct SimOptions {
  PolicyKind policy = PolicyKind::kLru;
  // Rows the cache holds. REQUIRED.
  int32_t capacity = 0;
  // Ids per batch. Default: 1
  int32_t batch_size = 1;
  // Lookahead: batches announced ahead of the current one. Default: 0
  int32_t lookahead_batches = 0;
  // Accesses before counting starts (rounded up to a batch). Default: 0
  int64_t warmup = 0;
};

struct SimResult {
  int64_t accesses = 0;  // counted accesses
  int64_t misses = 0;    // counted misses
  double hit_rate() const {
    return accesses == 0 ? 0.0 : 1.0 - static_cast<double>(misses) / accesses;
  }
};

// ResourceExhausted if a batch has more unique ids than `capacity`.
absl::StatusOr<SimResult> SimulateHitRate(absl::Span<const uint64_t> trace,
                                          const SimOptions& options);

}  // namespace psdb::cache

#endif  // PSDB_CACHE_POLICY_SIM_H_
