#include "rpc/server/sync_aggregator.h"

#include <utility>

#include "absl/strings/str_cat.h"

namespace psdb::rpc {

SyncAggregator::SyncAggregator(const SyncOptions& options, ApplyFn apply)
    : options_(options), apply_(std::move(apply)) {}

absl::Status SyncAggregator::Push(absl::string_view table, int dim,
                                  int worker_id, int64_t step,
                                  absl::Span<const uint64_t> keys,
                                  absl::Span<const float> grads,
                                  uint64_t epoch) {
  if (worker_id < 0 || worker_id >= options_.num_workers) {
    return absl::InvalidArgumentError(absl::StrCat(
        "table '", table, "': sync push from worker ", worker_id,
        ", but the cluster has workers 0..", options_.num_workers - 1));
  }
  if (step < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "table '", table, "': a sync push needs an explicit step >= 1"));
  }
  if (dim < 1 || grads.size() != keys.size() * static_cast<size_t>(dim)) {
    return absl::InvalidArgumentError(
        absl::StrCat("table '", table, "': grads hold ", grads.size(),
                     " floats, expected ", keys.size(), " x ", dim));
  }
  absl::MutexLock lock(&mu_);
  Table& t = tables_[std::string(table)];
  const Round round{step, epoch};
  if (round <= t.last_applied) {
    const auto name = [](const Round& r) {
      return r.second == 0
                 ? absl::StrCat("step ", r.first)
                 : absl::StrCat("step ", r.first, " (epoch ", r.second, ")");
    };
    return absl::FailedPreconditionError(absl::StrCat(
        "table '", table, "': sync push of worker ", worker_id, " for ",
        name(round), " arrived after ", name(t.last_applied), " was applied"));
  }
  Step& s = t.steps[round];
  if (s.workers.empty()) {
    s.workers.resize(options_.num_workers);
    s.dim = dim;
  }
  WorkerPart& part = s.workers[worker_id];
  if (part.arrived) {
    return absl::AlreadyExistsError(
        absl::StrCat("table '", table, "': worker ", worker_id,
                     " already pushed step ", step));
  }
  part.arrived = true;
  part.keys.assign(keys.begin(), keys.end());
  part.grads.assign(grads.begin(), grads.end());
  if (++s.arrived < options_.num_workers) return absl::OkStatus();
  const absl::Status applied = ApplyLocked(table, step, s);
  t.steps.erase(round);
  if (round > t.last_applied) t.last_applied = round;
  return applied;
}

absl::Status SyncAggregator::ApplyLocked(absl::string_view table,
                                         int64_t step_number, Step& step) {
  const size_t dim = static_cast<size_t>(step.dim);
  // Unique keys in order of first occurrence over workers 0, 1, ...
  absl::flat_hash_map<uint64_t, size_t> index;
  std::vector<uint64_t> keys;
  std::vector<float> sum;
  for (const WorkerPart& part : step.workers) {
    for (size_t i = 0; i < part.keys.size(); ++i) {
      auto [it, inserted] = index.try_emplace(part.keys[i], keys.size());
      if (inserted) {
        keys.push_back(part.keys[i]);
        sum.resize(sum.size() + dim, 0.0f);
      }
    }
  }
  // Per worker, its own duplicates summed in order, then added to the total
  // in worker order.
  std::vector<float> mine;
  std::vector<bool> touched;
  for (const WorkerPart& part : step.workers) {
    mine.assign(keys.size() * dim, 0.0f);
    touched.assign(keys.size(), false);
    for (size_t i = 0; i < part.keys.size(); ++i) {
      const size_t u = index.at(part.keys[i]);
      touched[u] = true;
      for (size_t j = 0; j < dim; ++j) {
        mine[u * dim + j] += part.grads[i * dim + j];
      }
    }
    for (size_t u = 0; u < keys.size(); ++u) {
      if (!touched[u]) continue;
      for (size_t j = 0; j < dim; ++j) sum[u * dim + j] += mine[u * dim + j];
    }
  }
  if (options_.reduce == SyncReduce::kMean) {
    const float n = static_cast<float>(options_.num_workers);
    for (float& g : sum) g /= n;
  }
  if (keys.empty()) return absl::OkStatus();
  const absl::Status s = apply_(table, keys, sum, step_number);
  if (!s.ok()) {
    return absl::Status(s.code(),
                        absl::StrCat("applying sync step ", step_number,
                                     " of table '", table, "': ", s.message()));
  }
  return absl::OkStatus();
}

int SyncAggregator::pending_steps(absl::string_view table) const {
  absl::MutexLock lock(&mu_);
  auto it = tables_.find(table);
  return it == tables_.end() ? 0 : static_cast<int>(it->second.steps.size());
}

int64_t SyncAggregator::last_applied_step(absl::string_view table) const {
  absl::MutexLock lock(&mu_);
  auto it = tables_.find(table);
  return it == tables_.end() ? 0 : it->second.last_applied.first;
}

int SyncAggregator::pending_rounds() const {
  absl::MutexLock lock(&mu_);
  int n = 0;
  for (const auto& [name, t] : tables_) n += static_cast<int>(t.steps.size());
  return n;
}

void SyncAggregator::ForEachPendingPush(
    absl::FunctionRef<void(absl::string_view table, int64_t step,
                           absl::Span<const uint64_t> keys)>
        fn) const {
  absl::MutexLock lock(&mu_);
  for (const auto& [name, t] : tables_) {
    for (const auto& [round, step] : t.steps) {
      for (const WorkerPart& part : step.workers) {
        if (part.arrived) fn(name, round.first, part.keys);
      }
    }
  }
}

}  // namespace psdb::rpc
