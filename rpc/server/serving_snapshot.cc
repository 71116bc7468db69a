#include "rpc/server/serving_snapshot.h"

#include <algorithm>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "optim/optimizer.h"
#include "shard/partitioner.h"
#include "util/status_macros.h"

namespace psdb::rpc {
namespace {

// A partitioner per thread for multi-shard snapshots (shard/partitioner.h).
Partitioner& ThreadPartitioner() {
  thread_local Partitioner partitioner;
  return partitioner;
}

// Index into ServingSnapshot::stores of `shard`. REQUIRES: it is held.
size_t StoreIndex(const std::vector<int>& shard_ids, ServerId shard) {
  return std::lower_bound(shard_ids.begin(), shard_ids.end(), shard) -
         shard_ids.begin();
}

PullOptions Serving() {
  PullOptions serving;
  serving.serving = true;
  return serving;
}

// Serving pull of one shard: the keys its delta holds from there, the
// others from its base store. `out` holds keys.size() rows of `dim`.
absl::Status PullShard(const Store& store, const DeltaRows* delta,
                       absl::string_view table, size_t dim,
                       absl::Span<const uint64_t> keys, absl::Span<float> out) {
  Store& base = const_cast<Store&>(store);  // Pull is thread-safe
  if (delta == nullptr || !delta->HasTable(table)) {
    return base.Pull(table, keys, out, Serving());
  }
  std::vector<uint64_t> missed;
  std::vector<size_t> where;
  for (size_t i = 0; i < keys.size(); ++i) {
    size_t row = 0;
    const ckpt::FileRows* file = delta->Find(table, keys[i], &row);
    if (file == nullptr) {
      missed.push_back(keys[i]);
      where.push_back(i);
      continue;
    }
    std::copy_n(file->rows.values.data() + row * dim, dim,
                out.data() + i * dim);
  }
  if (missed.empty()) return absl::OkStatus();
  std::vector<float> got(missed.size() * dim);
  PSDB_RETURN_IF_ERROR(
      base.Pull(table, missed, absl::MakeSpan(got), Serving()));
  for (size_t j = 0; j < missed.size(); ++j) {
    std::copy_n(got.data() + j * dim, dim, out.data() + where[j] * dim);
  }
  return absl::OkStatus();
}

// PullRows of one shard, like PullShard.
absl::Status PullShardRows(const Store& store, const DeltaRows* delta,
                           absl::string_view table,
                           absl::Span<const uint64_t> keys, RowBatch* out) {
  Store& base = const_cast<Store&>(store);  // PullRows is thread-safe
  if (delta == nullptr || !delta->HasTable(table)) {
    return base.PullRows(table, keys, out);
  }
  // Each key's source: its delta file and row, or (null) the base.
  std::vector<std::pair<const RowBatch*, size_t>> from(keys.size());
  std::vector<uint64_t> missed;
  for (size_t k = 0; k < keys.size(); ++k) {
    const ckpt::FileRows* file = delta->Find(table, keys[k], &from[k].second);
    if (file != nullptr) {
      from[k].first = &file->rows;
    } else {
      missed.push_back(keys[k]);
    }
  }
  RowBatch got;
  PSDB_RETURN_IF_ERROR(base.PullRows(table, missed, &got));
  PSDB_ASSIGN_OR_RETURN(TableSpec spec, base.GetTable(table));
  out->Resize(spec.dim, optim::StateSize(spec.optimizer, spec.dim), 0);
  size_t next_missed = 0;
  for (const auto& [rows, row] : from) {
    if (rows != nullptr) {
      out->AppendFrom(*rows, row);
    } else {
      out->AppendFrom(got, next_missed++);
    }
  }
  return absl::OkStatus();
}

}  // namespace

bool ServingSnapshot::Holds(uint64_t key) const {
  if (!ring.has_value()) return true;
  return std::binary_search(shard_ids.begin(), shard_ids.end(),
                            ring->Owner(key));
}

absl::Status ServingSnapshot::Pull(absl::string_view table,
                                   absl::Span<const uint64_t> keys,
                                   absl::Span<float> out) const {
  // One store and no rows over it for the table: the store checks it all.
  if (stores.size() == 1 &&
      (deltas[0] == nullptr || !deltas[0]->HasTable(table))) {
    return stores[0]->Pull(table, keys, out, Serving());
  }
  PSDB_ASSIGN_OR_RETURN(TableSpec spec, GetTable(table));
  const size_t dim = static_cast<size_t>(spec.dim);
  if (out.size() != keys.size() * dim) {
    return absl::InvalidArgumentError(absl::StrCat(
        "table ", table, ": pull of ", keys.size(), " keys of dim ", dim,
        " needs ", keys.size() * dim, " output floats, got ", out.size()));
  }
  if (stores.size() == 1) {
    return PullShard(*stores[0], deltas[0].get(), table, dim, keys, out);
  }
  Partitioner& partitioner = ThreadPartitioner();
  PSDB_RETURN_IF_ERROR(partitioner.Partition(*ring, keys));
  std::vector<float> sent(partitioner.num_sent() * dim);
  for (uint32_t p : partitioner.nonempty_parts()) {
    const size_t i = StoreIndex(shard_ids, partitioner.part_server(p));
    const absl::Span<const uint64_t> part = partitioner.part_keys(p);
    PSDB_RETURN_IF_ERROR(
        PullShard(*stores[i], deltas[i].get(), table, dim, part,
                  absl::MakeSpan(sent).subspan(partitioner.part_offset(p) * dim,
                                               part.size() * dim)));
  }
  return partitioner.Scatter<float>(sent, dim, out);
}

absl::Status ServingSnapshot::PullRows(absl::string_view table,
                                       absl::Span<const uint64_t> keys,
                                       RowBatch* out) const {
  if (out == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat("table ", table, ": PullRows output is null"));
  }
  if (stores.size() == 1) {
    return PullShardRows(*stores[0], deltas[0].get(), table, keys, out);
  }
  Partitioner& partitioner = ThreadPartitioner();
  PSDB_RETURN_IF_ERROR(partitioner.Partition(*ring, keys));
  // Each part's rows, then every position copied from its key's part row.
  std::vector<RowBatch> parts(partitioner.num_parts());
  std::vector<std::pair<uint32_t, uint32_t>> where(partitioner.num_sent());
  for (uint32_t p : partitioner.nonempty_parts()) {
    const size_t i = StoreIndex(shard_ids, partitioner.part_server(p));
    PSDB_RETURN_IF_ERROR(PullShardRows(*stores[i], deltas[i].get(), table,
                                       partitioner.part_keys(p), &parts[p]));
    for (size_t j = 0; j < parts[p].size(); ++j) {
      where[partitioner.part_offset(p) + j] = {p, static_cast<uint32_t>(j)};
    }
  }
  PSDB_ASSIGN_OR_RETURN(TableSpec spec, GetTable(table));
  out->Resize(spec.dim, optim::StateSize(spec.optimizer, spec.dim), 0);
  for (size_t k = 0; k < keys.size(); ++k) {
    const auto [p, j] = where[partitioner.inverse()[k]];
    out->AppendFrom(parts[p], j);
  }
  return absl::OkStatus();
}

StoreStats ServingSnapshot::Stats() const {
  std::vector<StoreStats> parts;
  for (const auto& store : stores) parts.push_back(store->Stats());
  StoreStats merged = MergeStoreStats(parts);
  for (TableStats& t : merged.tables) {
    auto it = table_steps.find(t.name);
    if (it != table_steps.end()) t.step = it->second;
  }
  for (const auto& delta : deltas) {
    if (delta != nullptr) merged.memory_used_bytes += delta->bytes();
  }
  return merged;
}

}  // namespace psdb::rpc
