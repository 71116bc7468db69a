// SyncAggregator: the server side of synchronous (BSP) training. In sync
// mode every worker sends each server one push per (table, step) — empty
// when the server owns none of its keys (RemoteClientOptions::
// push_to_every_server) — carrying its worker id and the step. The
// aggregator keeps each worker's gradients for the step apart; when the
// last of the num_workers workers has pushed, it reduces them per key (the
// mean of the worker gradients by default, a key a worker did not touch
// counting as a zero gradient from it; or their sum) and calls `apply` once
// with the unique keys and reduced gradients, so the table's optimizer runs
// once per key for the whole step. The push that completes the step returns
// after the apply, so a worker that has seen every worker's push of step s
// acknowledged (e.g. after SchedulerClient::StepClock(s, 0)) pulls values
// that include all of step s.
//
// Determinism: the reduction adds workers in id order (0, 1, ...), each
// worker's duplicates summed in order of occurrence first, so the result does
// not depend on arrival order.
//
// Rounds: a round is (table, step, epoch), the epoch being the cluster
// epoch the push was routed with. Live resharding (rpc/server/resharder.h)
// can apply part of a step's keys under the old map and re-sent keys under
// the new one: two rounds of one step, over disjoint keys, applied in
// (step, epoch) order.
//
// Errors (nothing is recorded): worker id out of range, a (step, epoch) at
// or below the table's last applied one ("arrived after step N was
// applied"), a second push of one worker for a round, wrong gradient
// length. An error of
// `apply` is returned to the completing push and the step is dropped
// (logged in the message).
//
// Thread-safety: thread-safe; `apply` is called with the aggregator's lock
// held (one step of one table at a time, in completion order).
#ifndef PSDB_RPC_SERVER_SYNC_AGGREGATOR_H_
#define PSDB_RPC_SERVER_SYNC_AGGREGATOR_H_

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/types/span.h"

namespace psdb::rpc {

enum class SyncReduce { kMean, kSum };

struct SyncOptions {
  // Workers whose pushes make up a step; 0 = async (no aggregation).
  // Default: 0
  int num_workers = 0;
  // How a step's worker gradients are combined. Default: kMean
  SyncReduce reduce = SyncReduce::kMean;
};

class SyncAggregator {
 public:
  using ApplyFn = std::function<absl::Status(
      absl::string_view table, absl::Span<const uint64_t> keys,
      absl::Span<const float> grads, int64_t step)>;

  // REQUIRES: options.num_workers >= 1.
  SyncAggregator(const SyncOptions& options, ApplyFn apply);
  SyncAggregator(const SyncAggregator&) = delete;
  SyncAggregator& operator=(const SyncAggregator&) = delete;

  // Records worker `worker_id`'s gradients of `step` (>= 1) for `table`
  // (grads.size() == keys.size() * dim); applies the step if it was the
  // last worker missing.
  // `epoch`: the cluster epoch the push was routed with (0 = unchecked).
  absl::Status Push(absl::string_view table, int dim, int worker_id,
                    int64_t step, absl::Span<const uint64_t> keys,
                    absl::Span<const float> grads, uint64_t epoch = 0);

  // Rounds of `table` waiting for workers, and the last step applied.
  int pending_steps(absl::string_view table) const;
  int64_t last_applied_step(absl::string_view table) const;
  // Rounds of every table waiting for workers.
  int pending_rounds() const;
  // Calls `fn` with the table, step and keys of each push recorded in a
  // round that still waits for workers (what that round's apply will
  // write), under the aggregator's lock.
  void ForEachPendingPush(
      absl::FunctionRef<void(absl::string_view table, int64_t step,
                             absl::Span<const uint64_t> keys)>
          fn) const;

 private:
  struct WorkerPart {
    bool arrived = false;
    std::vector<uint64_t> keys;
    std::vector<float> grads;
  };
  struct Step {
    int dim = 0;
    int arrived = 0;
    std::vector<WorkerPart> workers;
  };
  // (step, epoch).
  using Round = std::pair<int64_t, uint64_t>;
  struct Table {
    Round last_applied{0, 0};
    std::map<Round, Step> steps;
  };

  absl::Status ApplyLocked(absl::string_view table, int64_t step_number,
                           Step& step) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const SyncOptions options_;
  const ApplyFn apply_;
  mutable absl::Mutex mu_;
  absl::flat_hash_map<std::string, Table> tables_ ABSL_GUARDED_BY(mu_);
};

}  // namespace psdb::rpc

#endif  // PSDB_RPC_SERVER_SYNC_AGGREGATOR_H_
