#include "psdb/parameter_client.h"

#include <algorithm>
#include <map>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"

namespace psdb {

absl::StatusOr<ReadVersion> ParameterClient::PullConsistent(
    absl::Span<const TableRead> reads, const ConsistentReadOptions& options) {
  if (!options.version.empty()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "version ", options.version,
        " asked of a client without checkpoint versions (versions are read "
        "from serving replicas, ps-server --serve_from)"));
  }
  PullOptions pull;
  pull.serving = options.serving;
  for (const TableRead& read : reads) {
    if (absl::Status s = Pull(read.table, read.keys, read.out, pull); !s.ok()) {
      return s;
    }
  }
  return ReadVersion{};
}

StoreStats MergeStoreStats(absl::Span<const StoreStats> parts) {
  StoreStats merged;
  std::map<std::string, TableStats> tables;
  for (const StoreStats& s : parts) {
    for (const TableStats& t : s.tables) {
      TableStats& m = tables[t.name];
      m.name = t.name;
      m.memory_rows += t.memory_rows;
      m.memory_bytes += t.memory_bytes;
      m.disk_rows += t.disk_rows;
      m.disk_bytes += t.disk_bytes;
      m.hits += t.hits;
      m.misses += t.misses;
      m.created += t.created;
      m.evictions += t.evictions;
      m.background_evictions += t.background_evictions;
      m.disk_compaction_pending |= t.disk_compaction_pending;
      m.dirty_writes += t.dirty_writes;
      m.disk_write_errors += t.disk_write_errors;
      m.non_finite_updates += t.non_finite_updates;
      m.not_admitted += t.not_admitted;
      m.step = std::max(m.step, t.step);
    }
    merged.memory_budget_bytes += s.memory_budget_bytes;
    merged.memory_used_bytes += s.memory_used_bytes;
    merged.memory_yielded_bytes += s.memory_yielded_bytes;
    merged.disk_running_compactions += s.disk_running_compactions;
    merged.disk_reserve_bytes += s.disk_reserve_bytes;
    merged.disk_reserve_held_bytes += s.disk_reserve_held_bytes;
    merged.checkpoints = std::max(merged.checkpoints, s.checkpoints);
    merged.last_checkpoint_duration =
        std::max(merged.last_checkpoint_duration, s.last_checkpoint_duration);
    merged.total_checkpoint_duration =
        std::max(merged.total_checkpoint_duration, s.total_checkpoint_duration);
  }
  for (auto& [name, t] : tables) merged.tables.push_back(std::move(t));
  return merged;
}

}  // namespace psdb
