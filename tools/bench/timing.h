// How ps-bench times what it measures, so that a figure on a shared, noisy
// machine means something: each timed phase runs for at least
// `--min_seconds`, and a scenario that compares systems alternates them over
// `--repeats` rounds (psdb, peer, limit, psdb, peer, limit, ...), so a burst
// of load from elsewhere lands on one round of each system rather than on
// one system's only measurement. report.h turns the rounds' ratios into a
// median with its min and max.
//
// Thread-safety: RoundsOptions is a plain value; RunThreads and
// RunTimedPhase call the given function from several threads at once (it
// must be safe for that) and return when every thread has finished.
#ifndef PSDB_TOOLS_BENCH_TIMING_H_
#define PSDB_TOOLS_BENCH_TIMING_H_

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "tools/common/args.h"

namespace psdb::bench {

// The flags `--repeats` and `--min_seconds`.
struct RoundsOptions {
  // Rounds over all systems; each ratio is reported as the median over
  // them. Default: 5
  int repeats = 5;
  // Each timed phase runs whole batches until at least this long has
  // passed (and at least one pass over its batches). 0: one pass.
  // Default: 2
  double min_seconds = 2;
};

// The flag names ParseRounds reads, for Args::CheckKnown lists.
inline constexpr const char* kRoundsFlags[] = {"repeats", "min_seconds"};

// Reads --repeats (1..1000) and --min_seconds (0..3600) over the defaults
// in *rounds. InvalidArgument naming the flag on a bad value.
absl::Status ParseRounds(const tools::Args& args, RoundsOptions* rounds);

// Runs fn(t) for t in [0, threads) on `threads` threads at once; returns
// the wall time in seconds, or the first error.
absl::StatusOr<double> RunThreads(int threads,
                                  const std::function<absl::Status(int)>& fn);

struct PhaseTiming {
  double seconds = 0;    // wall time, start to the last thread's end
  uint64_t batches = 0;  // batches run, all threads together
};

// A timed phase: each of `threads` threads runs batch(t, 0), batch(t, 1),
// ... until it has run at least `min_batches` and `min_seconds` have passed
// since the phase began (checked between batches, so the threads stop
// within one batch of each other). With min_seconds = 0 every thread runs
// exactly min_batches. Stops all threads at the first error and returns it.
// REQUIRES: threads >= 1, min_batches >= 1.
absl::StatusOr<PhaseTiming> RunTimedPhase(
    int threads, uint64_t min_batches, double min_seconds,
    const std::function<absl::Status(int thread, uint64_t i)>& batch);

}  // namespace psdb::bench

#endif  // PSDB_TOOLS_BENCH_TIMING_H_
