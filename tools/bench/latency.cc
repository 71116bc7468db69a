#include "tools/bench/latency.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <thread>

namespace psdb::bench {

OpenLoopResult RunOpenLoop(
    int threads, double requests_per_s, double max_seconds,
    const std::atomic<bool>* stop,
    const std::function<absl::Status(int thread, uint64_t i)>& request) {
  using Clock = std::chrono::steady_clock;
  std::vector<std::vector<LatencySample>> per_thread(threads);
  std::vector<absl::Status> errors(threads);
  std::vector<double> last_answer(threads, 0);
  const auto start = Clock::now();
  auto since_start = [start](Clock::time_point t) {
    return std::chrono::duration<double>(t - start).count();
  };
  std::vector<std::thread> pool;
  pool.reserve(threads);
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&, t] {
      for (uint64_t i = 0;; ++i) {
        const double intended = (i * threads + t) / requests_per_s;
        if (intended >= max_seconds) break;
        if (stop != nullptr && stop->load(std::memory_order_relaxed)) break;
        const auto when = start + std::chrono::duration_cast<Clock::duration>(
                                      std::chrono::duration<double>(intended));
        // Behind schedule: send at once; the wait is charged to latency.
        std::this_thread::sleep_until(when);
        const absl::Status status = request(t, i);
        const double done = since_start(Clock::now());
        per_thread[t].push_back({intended, done - intended, status.ok()});
        if (!status.ok() && errors[t].ok()) errors[t] = status;
        last_answer[t] = done;
      }
    });
  }
  for (std::thread& th : pool) th.join();
  OpenLoopResult result;
  result.start = start;
  for (int t = 0; t < threads; ++t) {
    result.samples.insert(result.samples.end(), per_thread[t].begin(),
                          per_thread[t].end());
    result.seconds = std::max(result.seconds, last_answer[t]);
    if (result.first_error.ok()) result.first_error = errors[t];
  }
  std::sort(result.samples.begin(), result.samples.end(),
            [](const LatencySample& a, const LatencySample& b) {
              return a.intended_s < b.intended_s;
            });
  return result;
}

double NearestRank(absl::Span<const double> sorted, double q) {
  if (sorted.empty()) return NAN;
  const double rank = std::ceil(q * static_cast<double>(sorted.size()));
  const size_t index = static_cast<size_t>(std::max(rank, 1.0)) - 1;
  return sorted[std::min(index, sorted.size() - 1)];
}

LatencySummary Summarize(absl::Span<const LatencySample> samples, double from_s,
                         double to_s) {
  LatencySummary summary;
  std::vector<double> latencies;
  for (const LatencySample& s : samples) {
    if (s.intended_s < from_s || s.intended_s >= to_s) continue;
    ++summary.requests;
    if (s.ok) {
      latencies.push_back(s.latency_s);
    } else {
      ++summary.failed;
    }
  }
  std::sort(latencies.begin(), latencies.end());
  summary.p50_s = NearestRank(latencies, 0.5);
  summary.p99_s = NearestRank(latencies, 0.99);
  summary.p999_s = NearestRank(latencies, 0.999);
  summary.max_s = latencies.empty() ? NAN : latencies.back();
  return summary;
}

}  // namespace psdb::bench
