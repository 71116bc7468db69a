// ps-bench's `serve` scenario (issue 13's benchmark): read-only serving
// replicas (`ps-server --serve_from`) against Redis, at peak and at a fixed
// offered load, and through a checkpoint swap.
//
// Setup, in one run: the benchmark writes a checkpoint of `rows` dim-float
// rows of table "emb" with an in-process Store (PutRows of the rows
// InitializeRow gives, server_systems.h's BenchTableSpec) under
// <dir>/ckpt, and starts:
//   serve         a serving replica whose memory budget holds the whole
//                 table (rows x slot bytes, plus a quarter)
//   serve_tiered  a second replica of the same root with --tiered_fraction
//                 (default 10%) of the table's bytes in memory; the rest is
//                 read from the checkpoint's RocksDB files
//   redis         redis-server holding the same rows as dim*4-byte values
//                 (the same bytes), read with MGET through hiredis,
//                 pipelined in --redis_chunk-key commands
// Clients: --threads threads (one connection each) sending batch_keys-key
// lookups drawn Zipf(alpha) over the rows (zipf.h), the same stream for
// every system; psdb through RemoteClient with serving pulls.
//
// Measured, each in --repeats rounds alternating over the systems:
//  1. Peak: closed loop (each thread sends its next lookup when the last
//     one is answered) for --min_seconds: rows/s. The throughput ratios
//     are of these peaks.
//  2. Fixed load: open loop (latency.h) at one offered load for every
//     system, --load_fraction (default 0.5) of the *slowest* system's
//     median peak: each system then runs at or below half of its own peak,
//     and their latencies are compared at the same request rate, which is
//     what a service sized for the slowest would see. Latency is measured
//     from each request's intended send time (no coordinated omission).
//     Reported: rows/s served, p50/p99/p999.
//  3. Swap (serve only; the other two are stopped first so they neither
//     swap nor take CPU): at the same fixed load, a steady window of
//     --min_seconds, then the benchmark changes --swap_fraction of the rows
//     (the hottest ranks; a Push at a new step) and writes an incremental
//     checkpoint into the same root; the replica (--follow_interval_s=1)
//     verifies it, warms it and swaps. The swap window runs from the start
//     of the checkpoint write until --swap_tail_s after the replica first
//     reports the new step (Stats). Reported: p99 in the swap window over
//     p99 in the steady window, and the failed requests in the swap window.
//
// --json: one object; "ratios" (report.h's contract: median over rounds,
// "ratios_min"/"ratios_max") holds
//   serve_vs_redis_rows         serve peak rows/s over Redis's (>= 2)
//   serve_vs_redis_p99          serve p99 over Redis p99, fixed load (<= 1)
//   serve_tiered_vs_redis_rows  serve_tiered peak rows/s over Redis's (>= 1)
//   serve_tiered_vs_redis_p99   the same for serve_tiered (no target)
//   swap_p99_vs_steady          swap-window p99 over steady p99 (<= 1.5)
//   swap_failed_requests        a count per swap round, not a ratio (<= 0)
// and "systems" each system's figures (peak rows/s per round; at the fixed
// load rows/s and p50/p99/p999 in ms, medians over rounds), "swaps" each
// swap round's windows.
//
// Thread-safety: one call at a time (it owns the process's benchmark run).
#ifndef PSDB_TOOLS_BENCH_SERVE_BENCH_H_
#define PSDB_TOOLS_BENCH_SERVE_BENCH_H_

#include <ostream>

namespace psdb::bench {

// argv[0] = "serve"; see the usage text (--help) for flags.
int RunServeBench(int argc, const char* const* argv, std::ostream& out,
                  std::ostream& err);

}  // namespace psdb::bench

#endif  // PSDB_TOOLS_BENCH_SERVE_BENCH_H_
