// ps-bench's `serve --freshness` scenario (issue 33's benchmark): how soon a
// serving replica serves a checkpoint that changes a few rows, by the size
// of the table.
//
// For each size in --sizes: an in-process Store writes a checkpoint of that
// many dim-float rows (serve_checkpoints.h's CheckpointWriter; it waits for
// the store's compactions to finish first, so the checkpoint is the base a
// trained table settles into), and `ps-server --serve_from` follows the
// root with --memory_budget_mb. Then --repeats rounds, each at a fixed
// offered load (--load_rps lookups/s of --batch_keys Zipf keys, open loop):
// a steady window of --steady_s, then a --delta_rows-row change is
// checkpointed into the root. Measured per round:
//   serve_s      from the moment the checkpoint's manifest is in place (its
//                Checkpoint call returned) until the replica's Stats report
//                the new step (polled every 2 ms)
//   bytes_read   what the replica read from checkpoint files for the swap
//                (its own count, from its log line)
//   delta        whether it was laid over its base (rpc/server/
//                checkpoint_follower.h) rather than opened whole
//   peak_rss     the replica's largest RSS sampled every 5 ms from the
//                write's start until 0.5 s after it served the new step
//   p99          lookups in the swap window over the steady window's
// Ratios (median over rounds; sizes smallest and largest):
//   serve_s_largest            seconds, <= 0.5
//   serve_s_largest_vs_smallest  <= 1.2
//   bytes_read_largest_vs_smallest <= 1.2
//   peak_rss_vs_bound          peak RSS / (budget + 2 x delta + 100 MiB), <= 1
//   swap_p99_vs_steady         at the largest size, <= 1.5
//   swap_failed_requests       <= 0
//
// Thread-safety: one call at a time.
#ifndef PSDB_TOOLS_BENCH_FRESHNESS_BENCH_H_
#define PSDB_TOOLS_BENCH_FRESHNESS_BENCH_H_

#include <ostream>

namespace psdb::bench {

// argv[0] = "serve", one argument --freshness; see --help.
int RunFreshnessBench(int argc, const char* const* argv, std::ostream& out,
                      std::ostream& err);

}  // namespace psdb::bench

#endif  // PSDB_TOOLS_BENCH_FRESHNESS_BENCH_H_
