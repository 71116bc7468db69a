// Latency under a fixed offered load, for ps-bench scenarios that report
// percentiles (`serve`): an open-loop request schedule and exact percentiles
// of its samples.
//
// Open loop: RunOpenLoop sends requests on a fixed schedule that does not
// wait for answers — thread t sends its i-th request at
// start + (i * threads + t) / requests_per_s, so the threads together send
// evenly spaced requests at the offered rate. Each request's latency is
// measured from its *intended* send time, not from when the thread got to
// send it: when the system stalls, the requests that queue up behind the
// stall are charged for the wait. A closed loop (send, wait, send) would
// instead send fewer requests during a stall and hide it ("coordinated
// omission", G. Tene, "How NOT to Measure Latency", 2015; wrk2 and
// HdrHistogram correct for it the same way).
//
// Percentiles are exact (nearest rank over the sorted samples): a run of
// minutes at benchmark rates holds at most a few million samples, so
// sorting them is cheaper than getting a histogram's bucket error right.
//
// Thread-safety: RunOpenLoop calls `request` from `threads` threads at once
// (it must be safe for that, one thread per index) and returns when all have
// finished; the rest are pure functions over plain values.
#ifndef PSDB_TOOLS_BENCH_LATENCY_H_
#define PSDB_TOOLS_BENCH_LATENCY_H_

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"

namespace psdb::bench {

// One request of an open-loop run. Times are seconds since the run began.
struct LatencySample {
  double intended_s = 0;  // when the schedule said to send it
  double latency_s = 0;   // from intended_s to the answer
  bool ok = true;         // false: the request returned an error
};

struct OpenLoopResult {
  // When the run began: the zero of every time in `samples`.
  std::chrono::steady_clock::time_point start;
  // Every request sent, in order of intended send time.
  std::vector<LatencySample> samples;
  // From the start to the last answer.
  double seconds = 0;
  // The first failed request's error (OK if none failed).
  absl::Status first_error;
};

// Sends requests on the schedule above until the next intended send time is
// `max_seconds` after the start, or `*stop` (when given) is set. A request
// that fails is recorded (ok = false) and the run goes on: failures are
// what a scenario counts, not a reason to stop measuring.
// REQUIRES: threads >= 1, requests_per_s > 0, max_seconds >= 0.
OpenLoopResult RunOpenLoop(
    int threads, double requests_per_s, double max_seconds,
    const std::atomic<bool>* stop,
    const std::function<absl::Status(int thread, uint64_t i)>& request);

// Percentiles of the successful requests' latencies, and the count of
// failed ones, over the samples whose intended send time is in
// [from_s, to_s).
struct LatencySummary {
  uint64_t requests = 0;  // all, failed included
  uint64_t failed = 0;
  double p50_s = 0;  // NaN when no request succeeded
  double p99_s = 0;
  double p999_s = 0;
  double max_s = 0;
};
LatencySummary Summarize(absl::Span<const LatencySample> samples,
                         double from_s = 0, double to_s = 1e300);

// The nearest-rank q-quantile (0 < q <= 1) of `sorted` (ascending): the
// smallest value with at least q of the values at or below it, i.e.
// sorted[ceil(q * n) - 1]. NaN if empty.
double NearestRank(absl::Span<const double> sorted, double q);

}  // namespace psdb::bench

#endif  // PSDB_TOOLS_BENCH_LATENCY_H_
