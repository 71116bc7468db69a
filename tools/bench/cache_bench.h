// ps-bench's `cache` scenario (issue 5's benchmark). In one run:
//  1. Hit rates on independent-reference Zipf streams, for every N in --ns,
//     alpha in --alphas and capacity fraction in --capacities: LRU, LFU and
//     lookahead run on the cache's own SlotMap and policies
//     (cache/policy_sim.h), next to Che's approximation for LRU, the best
//     static hit rate and Belady's offline optimum on the same trace. Each
//     stream warms up on warmup_capacities x C accesses, then counts
//     `counted` accesses.
//  2. CPU-backend gather throughput: 4096-id Zipf batches of dim-64 rows
//     gathered by CpuBackend::Gather against the limit, a plain indexed copy
//     of the same rows from one array; the whole warm VocabCache::Lookup
//     (every row resident: de-dup, slot map, policy, pins, gather) is
//     measured against the same limit too.
//
// Output: a report, or with --json one JSON object with "results" (one
// entry per stream and policy: n, alpha, capacity, policy
// lru|lfu|lookahead|che|static_opt|belady, hit_rate), "gather" and "ratios":
// lru_minus_che_max_pp, lfu_vs_static_opt_min, lookahead_vs_belady_min,
// gather_vs_limit (CpuBackend::Gather over the plain copy, the issue's
// ratio) and lookup_vs_limit (the warm Lookup path over the plain copy).
//
// Thread-safety: one call at a time.
#ifndef PSDB_TOOLS_BENCH_CACHE_BENCH_H_
#define PSDB_TOOLS_BENCH_CACHE_BENCH_H_

#include <ostream>

namespace psdb::bench {

// argv[0] = "cache"; see the usage text (--help) for flags.
int RunCacheBench(int argc, const char* const* argv, std::ostream& out,
                  std::ostream& err);

}  // namespace psdb::bench

#endif  // PSDB_TOOLS_BENCH_CACHE_BENCH_H_
