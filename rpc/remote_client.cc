#include "rpc/remote_client.h"

#include <algorithm>
#include <cstring>
#include <deque>
#include <map>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "grpcpp/grpcpp.h"
#include "optim/optimizer.h"
#include "rpc/convert.h"
#include "rpc/key_router.h"
#include "rpc/psdb.grpc.pb.h"
#include "store/manifest.h"
#include "util/status_macros.h"

namespace psdb::rpc {
namespace {

using Stub = v1::ParameterService::Stub;
using DoneFn = std::function<void(grpc::Status)>;

// The servers the client routes to under one epoch.
struct Map {
  ClusterView view;
  std::vector<std::unique_ptr<Stub>> stubs;
  std::unique_ptr<KeyRouter> router;
};

// One RPC of a fan-out: `start` issues it on a stub with a fresh context.
struct Call {
  int server = 0;
  std::function<void(Stub*, grpc::ClientContext*, DoneFn)> start;
  grpc::Status status;
};

// Keys in first-occurrence order and each position's index among them.
struct Dedup {
  std::vector<uint64_t> unique;
  std::vector<uint32_t> inverse;
};

Dedup Deduplicate(absl::Span<const uint64_t> keys) {
  Dedup d;
  d.inverse.resize(keys.size());
  d.unique.reserve(keys.size());
  absl::flat_hash_map<uint64_t, uint32_t> index;
  index.reserve(keys.size());
  for (size_t i = 0; i < keys.size(); ++i) {
    auto [it, inserted] =
        index.try_emplace(keys[i], static_cast<uint32_t>(d.unique.size()));
    if (inserted) d.unique.push_back(keys[i]);
    d.inverse[i] = it->second;
  }
  return d;
}

// Per server, the chunks (of at most max_keys unique indices) it owns.
std::vector<std::vector<std::vector<uint32_t>>> Route(
    const Map& map, absl::Span<const uint64_t> unique, size_t max_keys) {
  const int n = map.router->num_servers();
  std::vector<std::vector<uint32_t>> owned(n);
  for (size_t u = 0; u < unique.size(); ++u) {
    owned[n == 1 ? 0 : map.router->Owner(unique[u])].push_back(
        static_cast<uint32_t>(u));
  }
  std::vector<std::vector<std::vector<uint32_t>>> chunks(n);
  for (int s = 0; s < n; ++s) {
    for (size_t begin = 0; begin < owned[s].size(); begin += max_keys) {
      const size_t end = std::min(owned[s].size(), begin + max_keys);
      chunks[s].emplace_back(owned[s].begin() + begin, owned[s].begin() + end);
    }
  }
  return chunks;
}

absl::Status TableChanged(absl::string_view table, absl::string_view what) {
  return absl::AbortedError(absl::StrCat(
      "table '", table, "' changed on the server during the call (", what,
      "); retry"));
}

}  // namespace

class RemoteClient::Impl {
 public:
  explicit Impl(const RemoteClientOptions& options) : options_(options) {}

  absl::Status Init() {
    if (options_.servers.empty()) {
      return absl::InvalidArgumentError("RemoteClient: no servers given");
    }
    if (options_.max_batch_keys == 0 || options_.max_attempts < 1) {
      return absl::InvalidArgumentError(
          "RemoteClient: max_batch_keys and max_attempts must be positive");
    }
    ClusterView view;
    view.epoch = options_.cluster_epoch;
    view.servers = options_.servers;
    PSDB_ASSIGN_OR_RETURN(std::shared_ptr<const Map> map, MakeMap(view));
    absl::MutexLock lock(&mu_);
    map_ = std::move(map);
    return absl::OkStatus();
  }

  uint64_t epoch() const {
    absl::MutexLock lock(&mu_);
    return map_->view.epoch;
  }

  absl::Status CreateTable(const TableSpec& spec) {
    PSDB_RETURN_IF_ERROR(ValidateTableSpec(spec));
    const absl::Time deadline = Deadline();
    v1::CreateTableRequest req;
    *req.mutable_spec() = TableSpecToProto(spec);
    PSDB_RETURN_IF_ERROR(WithMap(true, [&](const Map& map) {
      req.set_cluster_epoch(map.view.epoch);
      std::vector<v1::CreateTableResponse> resps(map.stubs.size());
      std::vector<Call> calls = ToAll(map, [&](int s) {
        return [&req, resp = &resps[s]](Stub* stub, grpc::ClientContext* ctx,
                                        DoneFn done) {
          stub->async()->CreateTable(ctx, &req, resp, std::move(done));
        };
      });
      return RunCalls(map, calls, /*idempotent=*/true, deadline);
    }));
    absl::MutexLock lock(&mu_);
    specs_[spec.name] = spec;
    return absl::OkStatus();
  }

  absl::Status DropTable(absl::string_view name) {
    PSDB_RETURN_IF_ERROR(ValidateTableName(name));
    const absl::Time deadline = Deadline();
    {
      absl::MutexLock lock(&mu_);
      specs_.erase(std::string(name));
      steps_.erase(std::string(name));
    }
    v1::DropTableRequest req;
    req.set_name(std::string(name));
    return WithMap(false, [&](const Map& map) -> absl::Status {
      req.set_cluster_epoch(map.view.epoch);
      std::vector<v1::DropTableResponse> resps(map.stubs.size());
      std::vector<Call> calls = ToAll(map, [&](int s) {
        return [&req, resp = &resps[s]](Stub* stub, grpc::ClientContext* ctx,
                                        DoneFn done) {
          stub->async()->DropTable(ctx, &req, resp, std::move(done));
        };
      });
      absl::Status status = RunCalls(map, calls, false, deadline);
      if (!absl::IsNotFound(status)) return status;
      // A table some servers had already dropped (an earlier, interrupted
      // drop) is dropped; NotFound only when no server had it.
      for (const Call& call : calls) {
        if (call.status.ok()) return absl::OkStatus();
        if (call.status.error_code() != grpc::StatusCode::NOT_FOUND) {
          return Annotated(map, call);
        }
      }
      return status;
    });
  }

  absl::StatusOr<std::vector<TableSpec>> ListTables() {
    const absl::Time deadline = Deadline();
    std::vector<TableSpec> tables;
    PSDB_RETURN_IF_ERROR(WithMap(true, [&](const Map& map) -> absl::Status {
      v1::ListTablesRequest req;
      req.set_cluster_epoch(map.view.epoch);
      std::vector<v1::ListTablesResponse> resps(map.stubs.size());
      std::vector<Call> calls = ToAll(map, [&](int s) {
        return [&req, resp = &resps[s]](Stub* stub, grpc::ClientContext* ctx,
                                        DoneFn done) {
          stub->async()->ListTables(ctx, &req, resp, std::move(done));
        };
      });
      PSDB_RETURN_IF_ERROR(RunCalls(map, calls, true, deadline));
      absl::flat_hash_map<std::string, TableSpec> merged;
      for (const v1::ListTablesResponse& resp : resps) {
        for (const v1::TableSpec& p : resp.tables()) {
          PSDB_ASSIGN_OR_RETURN(TableSpec spec, TableSpecFromProto(p));
          merged.try_emplace(spec.name, std::move(spec));
        }
      }
      tables.clear();
      for (auto& [name, spec] : merged) tables.push_back(std::move(spec));
      std::sort(tables.begin(), tables.end(),
                [](const TableSpec& a, const TableSpec& b) {
                  return a.name < b.name;
                });
      return absl::OkStatus();
    }));
    absl::MutexLock lock(&mu_);
    for (const TableSpec& spec : tables) specs_[spec.name] = spec;
    return tables;
  }

  absl::StatusOr<TableSpec> GetTable(absl::string_view name) {
    PSDB_RETURN_IF_ERROR(ValidateTableName(name));
    {
      absl::MutexLock lock(&mu_);
      auto it = specs_.find(std::string(name));
      if (it != specs_.end()) return it->second;
    }
    PSDB_ASSIGN_OR_RETURN(std::vector<TableSpec> tables, ListTables());
    for (TableSpec& spec : tables) {
      if (spec.name == name) return std::move(spec);
    }
    return absl::NotFoundError(absl::StrCat("unknown table '", name, "'"));
  }

  absl::Status Pull(absl::string_view table, absl::Span<const uint64_t> keys,
                    absl::Span<float> out, const PullOptions& options) {
    PSDB_ASSIGN_OR_RETURN(TableSpec spec, GetTable(table));
    const size_t dim = spec.dim;
    if (out.size() != keys.size() * dim) {
      return absl::InvalidArgumentError(absl::StrCat(
          "table '", table, "': out has ", out.size(), " floats, expected ",
          keys.size() * dim, " (", keys.size(), " keys of dim ", dim, ")"));
    }
    if (keys.empty()) return absl::OkStatus();
    const absl::Time deadline = Deadline();
    const Dedup d = Deduplicate(keys);
    return Forget(
        table, WithMap(true, [&](const Map& map) -> absl::Status {
          const auto chunks = Route(map, d.unique, options_.max_batch_keys);
          std::deque<v1::PullRequest> reqs;
          std::deque<v1::PullResponse> resps;
          std::deque<const std::vector<uint32_t>*> owners;
          std::vector<Call> calls;
          for (size_t s = 0; s < chunks.size(); ++s) {
            for (const std::vector<uint32_t>& chunk : chunks[s]) {
              v1::PullRequest& req = reqs.emplace_back();
              req.set_cluster_epoch(map.view.epoch);
              req.set_table(std::string(table));
              req.set_serving(options.serving);
              auto* k = req.mutable_keys();
              k->Resize(static_cast<int>(chunk.size()), 0);
              for (size_t j = 0; j < chunk.size(); ++j) {
                k->Set(static_cast<int>(j), d.unique[chunk[j]]);
              }
              v1::PullResponse* resp = &resps.emplace_back();
              owners.push_back(&chunk);
              calls.push_back(
                  Call{static_cast<int>(s),
                       [&req, resp](Stub* stub, grpc::ClientContext* ctx,
                                    DoneFn done) {
                         stub->async()->Pull(ctx, &req, resp, std::move(done));
                       },
                       {}});
            }
          }
          PSDB_RETURN_IF_ERROR(RunCalls(map, calls, true, deadline));
          std::vector<const float*> src(d.unique.size());
          for (size_t c = 0; c < resps.size(); ++c) {
            const std::vector<uint32_t>& chunk = *owners[c];
            const v1::PullResponse& resp = resps[c];
            if (static_cast<size_t>(resp.dim()) != dim ||
                resp.values().size() != chunk.size() * dim * sizeof(float)) {
              return TableChanged(table, "dim");
            }
            const float* base =
                reinterpret_cast<const float*>(resp.values().data());
            for (size_t j = 0; j < chunk.size(); ++j)
              src[chunk[j]] = base + j * dim;
          }
          for (size_t i = 0; i < keys.size(); ++i) {
            std::memcpy(out.data() + i * dim, src[d.inverse[i]],
                        dim * sizeof(float));
          }
          return absl::OkStatus();
        }));
  }

  absl::Status Push(absl::string_view table, absl::Span<const uint64_t> keys,
                    absl::Span<const float> grads, const PushOptions& options) {
    PSDB_ASSIGN_OR_RETURN(TableSpec spec, GetTable(table));
    const size_t dim = spec.dim;
    if (grads.size() != keys.size() * dim) {
      return absl::InvalidArgumentError(absl::StrCat(
          "table '", table, "': grads has ", grads.size(), " floats, expected ",
          keys.size() * dim, " (", keys.size(), " keys of dim ", dim, ")"));
    }
    if (options.step < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("table '", table, "': negative step ", options.step));
    }
    const absl::Time deadline = Deadline();
    PSDB_ASSIGN_OR_RETURN(int64_t step, NextStep(table, options.step));
    if (keys.empty() && !options_.push_to_every_server) {
      return absl::OkStatus();
    }
    const Dedup d = Deduplicate(keys);
    // Sum duplicates in order of occurrence (the store's order).
    std::vector<float> summed;
    const bool has_duplicates = d.unique.size() != keys.size();
    if (has_duplicates) {
      summed.assign(d.unique.size() * dim, 0.0f);
      std::vector<bool> seen(d.unique.size(), false);
      for (size_t i = 0; i < keys.size(); ++i) {
        float* dst = summed.data() + d.inverse[i] * dim;
        const float* g = grads.data() + i * dim;
        if (!seen[d.inverse[i]]) {
          seen[d.inverse[i]] = true;
          std::memcpy(dst, g, dim * sizeof(float));
        } else {
          for (size_t j = 0; j < dim; ++j) dst[j] += g[j];
        }
      }
    }
    const float* unique_grads = has_duplicates ? summed.data() : grads.data();
    // A push is not re-routed after a map change: some servers may have
    // applied their part. The map is refreshed for the next call.
    return Forget(
        table, WithMap(false, [&](const Map& map) -> absl::Status {
          const auto chunks = Route(map, d.unique, options_.max_batch_keys);
          std::deque<v1::PushRequest> reqs;
          std::deque<v1::PushResponse> resps;
          std::vector<Call> calls;
          const std::vector<uint32_t> no_keys;
          for (size_t s = 0; s < chunks.size(); ++s) {
            std::vector<const std::vector<uint32_t>*> parts;
            for (const std::vector<uint32_t>& chunk : chunks[s]) {
              parts.push_back(&chunk);
            }
            if (parts.empty() && options_.push_to_every_server) {
              parts.push_back(&no_keys);
            }
            for (const std::vector<uint32_t>* part : parts) {
              const std::vector<uint32_t>& chunk = *part;
              v1::PushRequest& req = reqs.emplace_back();
              req.set_cluster_epoch(map.view.epoch);
              req.set_table(std::string(table));
              req.set_step(step);
              req.set_worker_id(options.worker_id);
              auto* k = req.mutable_keys();
              k->Resize(static_cast<int>(chunk.size()), 0);
              std::string* g = req.mutable_grads();
              g->resize(chunk.size() * dim * sizeof(float));
              char* dst = g->data();
              for (size_t j = 0; j < chunk.size(); ++j) {
                k->Set(static_cast<int>(j), d.unique[chunk[j]]);
                std::memcpy(dst + j * dim * sizeof(float),
                            unique_grads + chunk[j] * dim, dim * sizeof(float));
              }
              v1::PushResponse* resp = &resps.emplace_back();
              calls.push_back(
                  Call{static_cast<int>(s),
                       [&req, resp](Stub* stub, grpc::ClientContext* ctx,
                                    DoneFn done) {
                         stub->async()->Push(ctx, &req, resp, std::move(done));
                       },
                       {}});
            }
          }
          return RunCalls(map, calls, false, deadline);
        }));
  }

  absl::Status PullRows(absl::string_view table,
                        absl::Span<const uint64_t> keys, RowBatch* out) {
    PSDB_ASSIGN_OR_RETURN(TableSpec spec, GetTable(table));
    const int dim = spec.dim;
    if (keys.empty()) {
      out->Resize(dim, optim::StateSize(spec.optimizer, dim), 0);
      return absl::OkStatus();
    }
    const absl::Time deadline = Deadline();
    const Dedup d = Deduplicate(keys);
    return Forget(
        table, WithMap(true, [&](const Map& map) -> absl::Status {
          const auto chunks = Route(map, d.unique, options_.max_batch_keys);
          std::deque<v1::PullRowsRequest> reqs;
          std::deque<v1::PullRowsResponse> resps;
          std::deque<const std::vector<uint32_t>*> owners;
          std::vector<Call> calls;
          for (size_t s = 0; s < chunks.size(); ++s) {
            for (const std::vector<uint32_t>& chunk : chunks[s]) {
              v1::PullRowsRequest& req = reqs.emplace_back();
              req.set_cluster_epoch(map.view.epoch);
              req.set_table(std::string(table));
              auto* k = req.mutable_keys();
              k->Resize(static_cast<int>(chunk.size()), 0);
              for (size_t j = 0; j < chunk.size(); ++j) {
                k->Set(static_cast<int>(j), d.unique[chunk[j]]);
              }
              v1::PullRowsResponse* resp = &resps.emplace_back();
              owners.push_back(&chunk);
              calls.push_back(Call{
                  static_cast<int>(s),
                  [&req, resp](Stub* stub, grpc::ClientContext* ctx,
                               DoneFn done) {
                    stub->async()->PullRows(ctx, &req, resp, std::move(done));
                  },
                  {}});
            }
          }
          PSDB_RETURN_IF_ERROR(RunCalls(map, calls, true, deadline));
          const int state_size = resps.front().rows().state_size();
          std::vector<RowBatch> parts(resps.size());
          for (size_t c = 0; c < resps.size(); ++c) {
            const v1::RowBlock& block = resps[c].rows();
            if (block.dim() != dim || block.state_size() != state_size) {
              return TableChanged(table, "row shape");
            }
            PSDB_RETURN_IF_ERROR(
                FromProto(block, owners[c]->size(), &parts[c]));
          }
          // Unique index -> (part, row within it).
          std::vector<std::pair<uint32_t, uint32_t>> where(d.unique.size());
          for (size_t c = 0; c < parts.size(); ++c) {
            const std::vector<uint32_t>& chunk = *owners[c];
            for (size_t j = 0; j < chunk.size(); ++j) {
              where[chunk[j]] = {static_cast<uint32_t>(c),
                                 static_cast<uint32_t>(j)};
            }
          }
          out->Resize(dim, state_size, keys.size());
          for (size_t i = 0; i < keys.size(); ++i) {
            const auto [c, j] = where[d.inverse[i]];
            const RowBatch& part = parts[c];
            std::memcpy(out->values.data() + i * dim,
                        part.values.data() + j * dim, dim * sizeof(float));
            if (state_size > 0) {
              std::memcpy(out->state.data() + i * state_size,
                          part.state.data() + j * state_size,
                          state_size * sizeof(float));
            }
            out->headers[i] = part.headers[j];
          }
          return absl::OkStatus();
        }));
  }

  absl::Status PutRows(absl::string_view table, absl::Span<const uint64_t> keys,
                       const RowBatch& rows) {
    PSDB_ASSIGN_OR_RETURN(TableSpec spec, GetTable(table));
    const int dim = spec.dim;
    const int state_size = optim::StateSize(spec.optimizer, dim);
    if (rows.size() != keys.size() || rows.dim != dim ||
        rows.state_size != state_size ||
        rows.values.size() != keys.size() * dim ||
        rows.state.size() != keys.size() * state_size) {
      return absl::InvalidArgumentError(absl::StrCat(
          "table '", table, "': PutRows of ", keys.size(), " keys got ",
          rows.size(), " rows of dim ", rows.dim, " and state_size ",
          rows.state_size, " (", rows.values.size(), " values, ",
          rows.state.size(), " state floats); the table has dim ", dim,
          " and state_size ", state_size));
    }
    if (keys.empty()) return absl::OkStatus();
    const absl::Time deadline = Deadline();
    const Dedup d = Deduplicate(keys);
    // Duplicates: the last one wins.
    std::vector<uint32_t> last(d.unique.size());
    for (size_t i = 0; i < keys.size(); ++i) {
      last[d.inverse[i]] = static_cast<uint32_t>(i);
    }
    return Forget(
        table, WithMap(false, [&](const Map& map) -> absl::Status {
          const auto chunks = Route(map, d.unique, options_.max_batch_keys);
          std::deque<v1::PutRowsRequest> reqs;
          std::deque<v1::PutRowsResponse> resps;
          std::vector<Call> calls;
          for (size_t s = 0; s < chunks.size(); ++s) {
            for (const std::vector<uint32_t>& chunk : chunks[s]) {
              v1::PutRowsRequest& req = reqs.emplace_back();
              req.set_cluster_epoch(map.view.epoch);
              req.set_table(std::string(table));
              RowBatch part;
              part.Resize(dim, state_size, chunk.size());
              auto* k = req.mutable_keys();
              k->Resize(static_cast<int>(chunk.size()), 0);
              for (size_t j = 0; j < chunk.size(); ++j) {
                const size_t i = last[chunk[j]];
                k->Set(static_cast<int>(j), d.unique[chunk[j]]);
                std::memcpy(part.values.data() + j * dim,
                            rows.values.data() + i * dim, dim * sizeof(float));
                if (state_size > 0) {
                  std::memcpy(part.state.data() + j * state_size,
                              rows.state.data() + i * state_size,
                              state_size * sizeof(float));
                }
                part.headers[j] = rows.headers[i];
              }
              ToProto(part, req.mutable_rows());
              v1::PutRowsResponse* resp = &resps.emplace_back();
              calls.push_back(Call{
                  static_cast<int>(s),
                  [&req, resp](Stub* stub, grpc::ClientContext* ctx,
                               DoneFn done) {
                    stub->async()->PutRows(ctx, &req, resp, std::move(done));
                  },
                  {}});
            }
          }
          return RunCalls(map, calls, false, deadline);
        }));
  }

  absl::StatusOr<CheckpointInfo> Checkpoint(absl::string_view root_dir,
                                            const CheckpointOptions& options) {
    const absl::Time deadline = Deadline();
    CheckpointInfo merged;
    PSDB_RETURN_IF_ERROR(WithMap(false, [&](const Map& map) -> absl::Status {
      v1::CheckpointRequest req;
      req.set_cluster_epoch(map.view.epoch);
      req.set_root_dir(std::string(root_dir));
      req.set_keep_last(options.keep_last);
      std::vector<v1::CheckpointResponse> resps(map.stubs.size());
      std::vector<Call> calls = ToAll(map, [&](int s) {
        return [&req, resp = &resps[s]](Stub* stub, grpc::ClientContext* ctx,
                                        DoneFn done) {
          stub->async()->Checkpoint(ctx, &req, resp, std::move(done));
        };
      });
      PSDB_RETURN_IF_ERROR(RunCalls(map, calls, false, deadline));
      merged = CheckpointInfo{};
      merged.path = std::string(root_dir);
      for (const v1::CheckpointResponse& resp : resps) {
        const CheckpointInfo info = FromProto(resp);
        if (resps.size() == 1) merged.path = info.path;
        merged.step = std::max(merged.step, info.step);
        merged.rows_flushed += info.rows_flushed;
        merged.rows_expired += info.rows_expired;
        merged.duration = std::max(merged.duration, info.duration);
      }
      return absl::OkStatus();
    }));
    return merged;
  }

  absl::StatusOr<StoreStats> Stats() {
    const absl::Time deadline = Deadline();
    StoreStats merged;
    PSDB_RETURN_IF_ERROR(WithMap(true, [&](const Map& map) -> absl::Status {
      v1::StatsRequest req;
      req.set_cluster_epoch(map.view.epoch);
      std::vector<v1::StatsResponse> resps(map.stubs.size());
      std::vector<Call> calls = ToAll(map, [&](int s) {
        return [&req, resp = &resps[s]](Stub* stub, grpc::ClientContext* ctx,
                                        DoneFn done) {
          stub->async()->Stats(ctx, &req, resp, std::move(done));
        };
      });
      PSDB_RETURN_IF_ERROR(RunCalls(map, calls, true, deadline));
      merged = StoreStats{};
      std::map<std::string, TableStats> tables;
      for (const v1::StatsResponse& resp : resps) {
        const StoreStats s = FromProto(resp);
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
          m.not_admitted += t.not_admitted;
          m.step = std::max(m.step, t.step);
        }
        merged.memory_budget_bytes += s.memory_budget_bytes;
        merged.memory_used_bytes += s.memory_used_bytes;
        merged.disk_running_compactions += s.disk_running_compactions;
        merged.checkpoints = std::max(merged.checkpoints, s.checkpoints);
        merged.last_checkpoint_duration = std::max(
            merged.last_checkpoint_duration, s.last_checkpoint_duration);
        merged.total_checkpoint_duration = std::max(
            merged.total_checkpoint_duration, s.total_checkpoint_duration);
      }
      for (auto& [name, t] : tables) merged.tables.push_back(std::move(t));
      return absl::OkStatus();
    }));
    return merged;
  }

 private:
  absl::Time Deadline() const { return absl::Now() + options_.call_timeout; }

  absl::StatusOr<std::shared_ptr<const Map>> MakeMap(const ClusterView& view) {
    if (view.servers.empty()) {
      return absl::InvalidArgumentError("cluster map has no servers");
    }
    auto map = std::make_shared<Map>();
    map->view = view;
    for (const std::string& address : view.servers) {
      PSDB_ASSIGN_OR_RETURN(std::shared_ptr<grpc::ChannelCredentials> creds,
                            MakeChannelCredentials(options_.tls, address));
      grpc::ChannelArguments args;
      args.SetMaxReceiveMessageSize(-1);
      args.SetMaxSendMessageSize(-1);
      // Reconnect quickly to a restarted server.
      args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
      args.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, 100);
      args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 1000);
      // One connection per server address even for several clients in one
      // process would serialize them on one HTTP/2 connection; keep them
      // separate.
      args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
      if (!options_.tls.server_name_override.empty()) {
        args.SetSslTargetNameOverride(options_.tls.server_name_override);
      }
      map->stubs.push_back(v1::ParameterService::NewStub(
          grpc::CreateCustomChannel(address, creds, args)));
    }
    map->router = std::make_unique<KeyRouter>(
        static_cast<int>(view.servers.size()), view.epoch);
    return std::shared_ptr<const Map>(std::move(map));
  }

  std::shared_ptr<const Map> CurrentMap() const {
    absl::MutexLock lock(&mu_);
    return map_;
  }

  // Runs fn(map); on FAILED_PRECONDITION asks map_source for a fresh map
  // and, if its epoch changed, installs it and (when `reroute`) runs fn
  // again.
  absl::Status WithMap(bool reroute,
                       const std::function<absl::Status(const Map&)>& fn) {
    for (int attempt = 0;; ++attempt) {
      std::shared_ptr<const Map> map = CurrentMap();
      absl::Status status = fn(*map);
      if (!absl::IsFailedPrecondition(status) || !options_.map_source) {
        return status;
      }
      absl::StatusOr<ClusterView> fresh = options_.map_source();
      if (!fresh.ok() || fresh->epoch == map->view.epoch) return status;
      absl::StatusOr<std::shared_ptr<const Map>> next = MakeMap(*fresh);
      if (!next.ok()) return status;
      {
        absl::MutexLock lock(&mu_);
        if (map_->view.epoch == map->view.epoch) map_ = *std::move(next);
      }
      if (!reroute || attempt >= 2) return status;
    }
  }

  // Forgets a table's cached spec when the servers no longer know it.
  absl::Status Forget(absl::string_view table, absl::Status status) {
    if (absl::IsNotFound(status) || absl::IsAborted(status)) {
      absl::MutexLock lock(&mu_);
      specs_.erase(std::string(table));
    }
    return status;
  }

  // Per-table push step (see the header): `requested` if positive, else the
  // counter's next value.
  absl::StatusOr<int64_t> NextStep(absl::string_view table, int64_t requested) {
    const std::string name(table);
    bool known;
    {
      absl::MutexLock lock(&mu_);
      known = steps_.contains(name);
    }
    if (!known) {
      PSDB_ASSIGN_OR_RETURN(StoreStats stats, Stats());
      int64_t current = 0;
      for (const TableStats& t : stats.tables) {
        if (t.name == name) current = t.step;
      }
      absl::MutexLock lock(&mu_);
      steps_.try_emplace(name, current);
    }
    absl::MutexLock lock(&mu_);
    int64_t& counter = steps_[name];
    if (requested > 0) {
      counter = std::max(counter, requested);
      return requested;
    }
    return ++counter;
  }

  template <typename MakeStart>
  std::vector<Call> ToAll(const Map& map, MakeStart make_start) {
    std::vector<Call> calls;
    for (size_t s = 0; s < map.stubs.size(); ++s) {
      calls.push_back(
          Call{static_cast<int>(s), make_start(static_cast<int>(s)), {}});
    }
    return calls;
  }

  absl::Status Annotated(const Map& map, const Call& call) const {
    return Annotate(FromGrpcStatus(call.status),
                    absl::StrCat("server ", map.view.servers[call.server]));
  }

  // Issues every call in parallel and waits for all; retries the ones that
  // failed with UNAVAILABLE when `idempotent`, with backoff, within the
  // deadline. Returns the first failure (in call order), annotated with the
  // server's address.
  absl::Status RunCalls(const Map& map, std::vector<Call>& calls,
                        bool idempotent, absl::Time deadline) {
    struct Pending {
      absl::Mutex mu;
      int remaining ABSL_GUARDED_BY(mu) = 0;
    };
    std::vector<size_t> todo(calls.size());
    for (size_t i = 0; i < calls.size(); ++i) todo[i] = i;
    absl::Duration backoff = options_.initial_backoff;
    for (int attempt = 1;; ++attempt) {
      // Shared with the callbacks, which may still be unlocking after the
      // wait below returns.
      auto pending = std::make_shared<Pending>();
      std::vector<std::unique_ptr<grpc::ClientContext>> contexts;
      {
        absl::MutexLock lock(&pending->mu);
        pending->remaining = static_cast<int>(todo.size());
      }
      for (size_t i : todo) {
        auto ctx = std::make_unique<grpc::ClientContext>();
        ctx->set_deadline(absl::ToChronoTime(deadline));
        Call& call = calls[i];
        call.start(map.stubs[call.server].get(), ctx.get(),
                   [pending, &call](grpc::Status status) {
                     call.status = std::move(status);
                     absl::MutexLock lock(&pending->mu);
                     --pending->remaining;
                   });
        contexts.push_back(std::move(ctx));
      }
      {
        absl::MutexLock lock(&pending->mu);
        pending->mu.Await(absl::Condition(
            +[](Pending* p) ABSL_EXCLUSIVE_LOCKS_REQUIRED(p->mu) {
              return p->remaining == 0;
            },
            pending.get()));
      }
      std::vector<size_t> retry;
      if (idempotent) {
        for (size_t i : todo) {
          if (calls[i].status.error_code() == grpc::StatusCode::UNAVAILABLE) {
            retry.push_back(i);
          }
        }
      }
      if (retry.empty() || attempt >= options_.max_attempts ||
          absl::Now() + backoff >= deadline) {
        break;
      }
      absl::SleepFor(backoff);
      backoff = std::min(backoff * 2, options_.max_backoff);
      todo = std::move(retry);
    }
    for (const Call& call : calls) {
      if (!call.status.ok()) return Annotated(map, call);
    }
    return absl::OkStatus();
  }

  const RemoteClientOptions options_;
  mutable absl::Mutex mu_;
  std::shared_ptr<const Map> map_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<std::string, TableSpec> specs_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<std::string, int64_t> steps_ ABSL_GUARDED_BY(mu_);
};

absl::StatusOr<std::unique_ptr<RemoteClient>> RemoteClient::Open(
    const RemoteClientOptions& options) {
  auto impl = std::make_unique<Impl>(options);
  PSDB_RETURN_IF_ERROR(impl->Init());
  return std::unique_ptr<RemoteClient>(new RemoteClient(std::move(impl)));
}

RemoteClient::RemoteClient(std::unique_ptr<Impl> impl)
    : impl_(std::move(impl)) {}
RemoteClient::~RemoteClient() = default;

absl::Status RemoteClient::CreateTable(const TableSpec& spec) {
  return impl_->CreateTable(spec);
}
absl::Status RemoteClient::DropTable(absl::string_view name) {
  return impl_->DropTable(name);
}
absl::StatusOr<std::vector<TableSpec>> RemoteClient::ListTables() {
  return impl_->ListTables();
}
absl::StatusOr<TableSpec> RemoteClient::GetTable(absl::string_view name) {
  return impl_->GetTable(name);
}
absl::Status RemoteClient::Pull(absl::string_view table,
                                absl::Span<const uint64_t> keys,
                                absl::Span<float> out,
                                const PullOptions& options) {
  return impl_->Pull(table, keys, out, options);
}
absl::Status RemoteClient::Push(absl::string_view table,
                                absl::Span<const uint64_t> keys,
                                absl::Span<const float> grads,
                                const PushOptions& options) {
  return impl_->Push(table, keys, grads, options);
}
absl::Status RemoteClient::PullRows(absl::string_view table,
                                    absl::Span<const uint64_t> keys,
                                    RowBatch* out) {
  return impl_->PullRows(table, keys, out);
}
absl::Status RemoteClient::PutRows(absl::string_view table,
                                   absl::Span<const uint64_t> keys,
                                   const RowBatch& rows) {
  return impl_->PutRows(table, keys, rows);
}
absl::StatusOr<CheckpointInfo> RemoteClient::Checkpoint(
    absl::string_view root_dir, const CheckpointOptions& options) {
  return impl_->Checkpoint(root_dir, options);
}
absl::StatusOr<StoreStats> RemoteClient::Stats() { return impl_->Stats(); }
uint64_t RemoteClient::epoch() const { return impl_->epoch(); }

}  // namespace psdb::rpc
