#include "tools/bench/timing.h"

#include <atomic>
#include <chrono>
#include <thread>

#include "util/status_macros.h"

namespace psdb::bench {

absl::Status ParseRounds(const tools::Args& args, RoundsOptions* rounds) {
  PSDB_ASSIGN_OR_RETURN(const int64_t repeats,
                        args.GetInt("repeats", rounds->repeats, 1, 1000));
  rounds->repeats = static_cast<int>(repeats);
  PSDB_ASSIGN_OR_RETURN(
      rounds->min_seconds,
      args.GetDouble("min_seconds", rounds->min_seconds, 0, 3600));
  return absl::OkStatus();
}

absl::StatusOr<double> RunThreads(int threads,
                                  const std::function<absl::Status(int)>& fn) {
  using Clock = std::chrono::steady_clock;
  std::vector<absl::Status> status(threads);
  std::vector<std::thread> pool;
  pool.reserve(threads);
  const auto t0 = Clock::now();
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&, t] { status[t] = fn(t); });
  }
  for (std::thread& th : pool) th.join();
  const double seconds =
      std::chrono::duration<double>(Clock::now() - t0).count();
  for (const absl::Status& st : status) PSDB_RETURN_IF_ERROR(st);
  return seconds;
}

absl::StatusOr<PhaseTiming> RunTimedPhase(
    int threads, uint64_t min_batches, double min_seconds,
    const std::function<absl::Status(int thread, uint64_t i)>& batch) {
  using Clock = std::chrono::steady_clock;
  // The phase is timed from the instant the deadline is set, so a thread
  // start delayed by a busy machine cannot make it shorter than
  // min_seconds.
  const auto t0 = Clock::now();
  const auto deadline = t0 + std::chrono::duration_cast<Clock::duration>(
                                 std::chrono::duration<double>(min_seconds));
  std::atomic<bool> failed{false};
  std::atomic<uint64_t> total{0};
  PhaseTiming timing;
  PSDB_RETURN_IF_ERROR(RunThreads(threads, [&](int t) -> absl::Status {
                         uint64_t i = 0;
                         for (; !failed.load(std::memory_order_relaxed) &&
                                (i < min_batches || Clock::now() < deadline);
                              ++i) {
                           const absl::Status status = batch(t, i);
                           if (!status.ok()) {
                             failed.store(true, std::memory_order_relaxed);
                             return status;
                           }
                         }
                         total.fetch_add(i, std::memory_order_relaxed);
                         return absl::OkStatus();
                       }).status());
  timing.seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  timing.batches = total.load();
  return timing;
}

}  // namespace psdb::bench
