// ps-bench's `store` scenario (issue 2's benchmark, issue 34's equal-memory
// peer). In one run, on one pre-generated Zipf(alpha) stream of
// batch_keys-key batches over a table of `rows` rows (all created before
// measuring), pulls and pushes (--optimizer, Adagrad by default) are
// measured on:
//   psdb_mem       psdb, memory budget holding the whole table
//   psdb_tiered    psdb, memory budget of budget_fraction of the table's
//                  bytes
//   rocksdb        RocksDB used directly within that same memory: memtables,
//                  blocks, index and filters charged to one cache of the
//                  budget, as psdb charges its own RocksDB share
//   rocksdb_cache  RocksDB used directly, a block cache of the budget and
//                  its memtables, index and filters outside it
//   hashmap        flat hash map + one row array: the memory limit
//   psdb_wal       psdb_mem with Durability::kWal (a write-ahead log record
//                  written to the OS before each push returns)
// (tools/bench/store_systems.h defines them). Each system is loaded, warmed
// up with the stream's first warmup_batches batches, then timed on the
// next `batches` batches (pull then push per batch, timed separately), and
// destroyed before the next one starts; --repeats rounds run every system
// in turn, and each ratio is the median over the rounds. In the first
// round, on psdb_mem: a full checkpoint (every row dirty), an update of
// touch_fraction of the rows, and an incremental checkpoint.
//
// Output: a human-readable report, or with --json one JSON object whose
// "ratios" map holds mem_vs_limit_pull, mem_vs_limit_push,
// tiered_vs_rocksdb_pull, tiered_vs_rocksdb_push (against the
// equal-memory peer), tiered_vs_rocksdb_cache_pull and _push (against
// rocksdb_cache), incremental_vs_full_checkpoint (time of the incremental
// over the full), wal_vs_checkpoint_push (psdb_wal's pushes/s over
// psdb_mem's) and the peak RSS of psdb_tiered and of the equal-memory peer
// over 1.5 x budget + rss_base_mb.
// Rates are keys per wall-clock second; the report also gives keys per
// process CPU second (all threads, RocksDB's background work included) and
// "ratios_cpu", the same ratios from those, which hold up on a machine
// shared with other work where wall time includes waiting for a core.
//
// Thread-safety: one call at a time (it owns the process's benchmark run).
#ifndef PSDB_TOOLS_BENCH_STORE_BENCH_H_
#define PSDB_TOOLS_BENCH_STORE_BENCH_H_

#include <ostream>

namespace psdb::bench {

// argv[0] = "store"; see the usage text (--help) for flags.
int RunStoreBench(int argc, const char* const* argv, std::ostream& out,
                  std::ostream& err);

}  // namespace psdb::bench

#endif  // PSDB_TOOLS_BENCH_STORE_BENCH_H_
