#include "rpc/client/remote_client.h"

#include <algorithm>
#include <cstring>
#include <map>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/functional/function_ref.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "manifest/manifest.h"
#include "optim/optimizer.h"
#include "rpc/client/consistent_read.h"
#include "rpc/client/fan_out.h"
#include "rpc/wire/convert.h"
#include "util/status_macros.h"

namespace psdb::rpc {
namespace {

using internal::Call;
using internal::Chunk;
using internal::DoneFn;
using internal::FanOut;
using internal::RoutedMap;
using internal::ThreadPartitioner;

absl::Status TableChanged(absl::string_view table, absl::string_view what) {
  return absl::AbortedError(absl::StrCat(
      "table '", table, "' changed on the server during the call (", what,
      "); retry"));
}

}  // namespace

class RemoteClient::Impl {
 public:
  explicit Impl(std::unique_ptr<FanOut> fan_out)
      : fan_out_(std::move(fan_out)), options_(fan_out_->options()) {}

  uint64_t epoch() const { return fan_out_->map()->cluster.epoch(); }

  absl::Status CreateTable(const TableSpec& spec) {
    PSDB_RETURN_IF_ERROR(fan_out_->RefuseWriteToReplicas("CreateTable"));
    PSDB_RETURN_IF_ERROR(ValidateTableSpec(spec));
    const absl::Time deadline = Deadline();
    v1::CreateTableRequest req;
    *req.mutable_spec() = TableSpecToProto(spec);
    PSDB_RETURN_IF_ERROR(fan_out_->Broadcast<v1::CreateTableResponse>(
        std::move(req), /*idempotent=*/true, deadline,
        [](auto* async, grpc::ClientContext* ctx,
           const v1::CreateTableRequest* req, v1::CreateTableResponse* resp,
           DoneFn done) {
          async->CreateTable(ctx, req, resp, std::move(done));
        }));
    absl::MutexLock lock(&mu_);
    specs_[spec.name] = spec;
    return absl::OkStatus();
  }

  absl::Status DropTable(absl::string_view name) {
    PSDB_RETURN_IF_ERROR(fan_out_->RefuseWriteToReplicas("DropTable"));
    PSDB_RETURN_IF_ERROR(ValidateTableName(name));
    const absl::Time deadline = Deadline();
    {
      absl::MutexLock lock(&mu_);
      specs_.erase(std::string(name));
      steps_.erase(std::string(name));
    }
    v1::DropTableRequest req;
    req.set_name(std::string(name));
    return fan_out_->Broadcast<v1::DropTableResponse>(
        std::move(req), /*idempotent=*/false, deadline,
        [](auto* async, grpc::ClientContext* ctx,
           const v1::DropTableRequest* req, v1::DropTableResponse* resp,
           DoneFn done) { async->DropTable(ctx, req, resp, std::move(done)); },
        internal::AcceptAnswers(),
        [](const RoutedMap& map, absl::Span<const Call> calls,
           absl::Status status) -> absl::Status {
          if (!absl::IsNotFound(status)) return status;
          // A table some servers had already dropped (an earlier,
          // interrupted drop) is dropped; NotFound only when no server had
          // it.
          for (const Call& call : calls) {
            if (call.status.ok()) return absl::OkStatus();
            if (call.status.error_code() != grpc::StatusCode::NOT_FOUND) {
              return FanOut::CallError(map, call);
            }
          }
          return status;
        });
  }

  absl::StatusOr<std::vector<TableSpec>> ListTables() {
    const absl::Time deadline = Deadline();
    std::vector<TableSpec> tables;
    PSDB_RETURN_IF_ERROR(fan_out_->Broadcast<v1::ListTablesResponse>(
        v1::ListTablesRequest(), /*idempotent=*/true, deadline,
        [](auto* async, grpc::ClientContext* ctx,
           const v1::ListTablesRequest* req, v1::ListTablesResponse* resp,
           DoneFn done) { async->ListTables(ctx, req, resp, std::move(done)); },
        [&](absl::Span<const v1::ListTablesResponse> resps) -> absl::Status {
          // The union of the servers' tables, by name.
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
    std::vector<float> rows(keys.size() * dim);  // unique keys' first
    std::vector<uint32_t> inverse;
    PSDB_RETURN_IF_ERROR((ReadUnique<v1::PullRequest, v1::PullResponse>(
        table, keys,
        [](auto* async, grpc::ClientContext* ctx, const v1::PullRequest* req,
           v1::PullResponse* resp,
           DoneFn done) { async->Pull(ctx, req, resp, std::move(done)); },
        [&](v1::PullRequest& req) {
          req.set_serving(options.serving);
          req.set_version(options.version);
        },
        [&](const v1::PullResponse& resp,
            absl::Span<const uint32_t> at) -> absl::Status {
          if (static_cast<size_t>(resp.dim()) != dim ||
              resp.values().size() != at.size() * dim * sizeof(float)) {
            return TableChanged(table, "dim");
          }
          const float* base =
              reinterpret_cast<const float*>(resp.values().data());
          for (size_t j = 0; j < at.size(); ++j) {
            std::memcpy(rows.data() + at[j] * dim, base + j * dim,
                        dim * sizeof(float));
          }
          return absl::OkStatus();
        },
        &inverse)));
    for (size_t i = 0; i < keys.size(); ++i) {
      std::memcpy(out.data() + i * dim, rows.data() + inverse[i] * dim,
                  dim * sizeof(float));
    }
    return absl::OkStatus();
  }

  absl::StatusOr<ReadVersion> PullConsistent(
      absl::Span<const TableRead> reads, const ConsistentReadOptions& options) {
    std::vector<int> dims;
    for (const TableRead& read : reads) {
      PSDB_ASSIGN_OR_RETURN(TableSpec spec, GetTable(read.table));
      dims.push_back(spec.dim);
    }
    return internal::PullConsistent(*fan_out_, reads, dims, options, Deadline(),
                                    &floor_);
  }

  absl::Status Push(absl::string_view table, absl::Span<const uint64_t> keys,
                    absl::Span<const float> grads, const PushOptions& options) {
    PSDB_RETURN_IF_ERROR(fan_out_->RefuseWriteToReplicas("Push"));
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
    const int32_t worker_id = options_.worker_id.value_or(options.worker_id);
    // Said on every push: a server in the other mode refuses it
    // (PushRequest.mode).
    const v1::PushMode mode = options_.push_to_every_server
                                  ? v1::PUSH_MODE_SYNC
                                  : v1::PUSH_MODE_ASYNC;
    Partitioner& part = ThreadPartitioner();
    // Duplicates summed in order of occurrence (the store's order), once:
    // re-sent keys carry the same sums.
    std::shared_ptr<const RoutedMap> map = fan_out_->map();
    PSDB_RETURN_IF_ERROR(part.Partition(map->cluster.ring(), keys));
    std::vector<uint64_t> pending(part.sent_keys().begin(),
                                  part.sent_keys().end());
    std::vector<float> pending_grads(part.num_sent() * dim);
    PSDB_RETURN_IF_ERROR(
        part.GatherSum<float>(grads, dim, absl::MakeSpan(pending_grads)));
    return Forget(
        table,
        ResendRefused(
            map, deadline, pending,
            [&](const RoutedMap& routed, const Partitioner& p,
                absl::Span<const uint32_t> index, std::vector<Call>* out_calls,
                std::vector<Chunk>* out_chunks) -> absl::Status {
              auto chunked =
                  fan_out_->ToOwners<v1::PushRequest, v1::PushResponse>(
                      routed, p, table, options_.push_to_every_server,
                      [](auto* async, grpc::ClientContext* ctx,
                         const v1::PushRequest* req, v1::PushResponse* resp,
                         DoneFn done) {
                        async->Push(ctx, req, resp, std::move(done));
                      });
              std::vector<float> sent(index.size() * dim);
              for (size_t j = 0; j < index.size(); ++j) {
                std::copy_n(pending_grads.begin() + index[j] * dim, dim,
                            sent.begin() + j * dim);
              }
              for (size_t c = 0; c < chunked.chunks.size(); ++c) {
                v1::PushRequest& req = chunked.reqs[c];
                req.set_step(step);
                req.set_worker_id(worker_id);
                req.set_mode(mode);
                FloatsToBytes(absl::MakeConstSpan(sent).subspan(
                                  chunked.chunks[c].begin * dim,
                                  chunked.chunks[c].size() * dim),
                              req.mutable_grads());
              }
              absl::Status status =
                  fan_out_->Run(routed, chunked.calls, false, deadline);
              *out_calls = std::move(chunked.calls);
              *out_chunks = std::move(chunked.chunks);
              return status;
            }));
  }

  absl::Status PullRows(absl::string_view table,
                        absl::Span<const uint64_t> keys, RowBatch* out) {
    PSDB_ASSIGN_OR_RETURN(TableSpec spec, GetTable(table));
    const int dim = spec.dim;
    const int state_size = optim::StateSize(spec.optimizer, dim);
    if (keys.empty()) {
      out->Resize(dim, state_size, 0);
      return absl::OkStatus();
    }
    RowBatch rows;  // unique keys' first
    rows.Resize(dim, state_size, keys.size());
    std::vector<uint32_t> inverse;
    PSDB_RETURN_IF_ERROR((ReadUnique<v1::PullRowsRequest, v1::PullRowsResponse>(
        table, keys,
        [](auto* async, grpc::ClientContext* ctx,
           const v1::PullRowsRequest* req, v1::PullRowsResponse* resp,
           DoneFn done) { async->PullRows(ctx, req, resp, std::move(done)); },
        [](v1::PullRowsRequest&) {},
        [&](const v1::PullRowsResponse& resp,
            absl::Span<const uint32_t> at) -> absl::Status {
          const v1::RowBlock& block = resp.rows();
          if (block.dim() != dim || block.state_size() != state_size) {
            return TableChanged(table, "row shape");
          }
          RowBatch got;
          PSDB_RETURN_IF_ERROR(FromProto(block, at.size(), &got));
          for (size_t j = 0; j < at.size(); ++j) {
            std::memcpy(rows.values.data() + at[j] * dim,
                        got.values.data() + j * dim, dim * sizeof(float));
            if (state_size > 0) {
              std::memcpy(rows.state.data() + at[j] * state_size,
                          got.state.data() + j * state_size,
                          state_size * sizeof(float));
            }
            rows.headers[at[j]] = got.headers[j];
          }
          return absl::OkStatus();
        },
        &inverse)));
    out->Resize(dim, state_size, 0);
    for (size_t i = 0; i < keys.size(); ++i) out->AppendFrom(rows, inverse[i]);
    return absl::OkStatus();
  }

  absl::Status PutRows(absl::string_view table, absl::Span<const uint64_t> keys,
                       const RowBatch& rows) {
    PSDB_RETURN_IF_ERROR(fan_out_->RefuseWriteToReplicas("PutRows"));
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
    Partitioner& part = ThreadPartitioner();
    std::shared_ptr<const RoutedMap> map = fan_out_->map();
    PSDB_RETURN_IF_ERROR(part.Partition(map->cluster.ring(), keys));
    // Duplicates: the last one wins. `unique` holds one row per key, in
    // the partitioner's order; re-sent keys index into it.
    RowBatch unique;
    unique.Resize(dim, state_size, part.num_sent());
    PSDB_RETURN_IF_ERROR(
        part.Gather<float>(rows.values, dim, absl::MakeSpan(unique.values)));
    PSDB_RETURN_IF_ERROR(part.Gather<float>(rows.state, state_size,
                                            absl::MakeSpan(unique.state)));
    PSDB_RETURN_IF_ERROR(part.Gather<RowHeader>(
        rows.headers, 1, absl::MakeSpan(unique.headers)));
    const std::vector<uint64_t> pending(part.sent_keys().begin(),
                                        part.sent_keys().end());
    return Forget(
        table,
        ResendRefused(
            map, deadline, pending,
            [&](const RoutedMap& routed, const Partitioner& p,
                absl::Span<const uint32_t> index, std::vector<Call>* out_calls,
                std::vector<Chunk>* out_chunks) -> absl::Status {
              auto chunked =
                  fan_out_->ToOwners<v1::PutRowsRequest, v1::PutRowsResponse>(
                      routed, p, table, /*every_server=*/false,
                      [](auto* async, grpc::ClientContext* ctx,
                         const v1::PutRowsRequest* req,
                         v1::PutRowsResponse* resp, DoneFn done) {
                        async->PutRows(ctx, req, resp, std::move(done));
                      });
              for (size_t c = 0; c < chunked.chunks.size(); ++c) {
                const Chunk& chunk = chunked.chunks[c];
                RowBatch block;
                block.Resize(dim, state_size, 0);
                for (size_t j = chunk.begin; j < chunk.end; ++j) {
                  block.AppendFrom(unique, index[j]);
                }
                ToProto(block, chunked.reqs[c].mutable_rows());
              }
              absl::Status status =
                  fan_out_->Run(routed, chunked.calls, false, deadline);
              *out_calls = std::move(chunked.calls);
              *out_chunks = std::move(chunked.chunks);
              return status;
            }));
  }

  absl::StatusOr<CheckpointInfo> Checkpoint(absl::string_view root_dir,
                                            const CheckpointOptions& options) {
    PSDB_RETURN_IF_ERROR(fan_out_->RefuseWriteToReplicas("Checkpoint"));
    const absl::Time deadline = Deadline();
    v1::CheckpointRequest req;
    req.set_root_dir(std::string(root_dir));
    req.set_keep_last(options.keep_last);
    CheckpointInfo merged;
    PSDB_RETURN_IF_ERROR(fan_out_->Broadcast<v1::CheckpointResponse>(
        std::move(req), /*idempotent=*/false, deadline,
        [](auto* async, grpc::ClientContext* ctx,
           const v1::CheckpointRequest* req, v1::CheckpointResponse* resp,
           DoneFn done) { async->Checkpoint(ctx, req, resp, std::move(done)); },
        [&](absl::Span<const v1::CheckpointResponse> resps) -> absl::Status {
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
    PSDB_RETURN_IF_ERROR(fan_out_->Broadcast<v1::StatsResponse>(
        v1::StatsRequest(), /*idempotent=*/true, deadline,
        [](auto* async, grpc::ClientContext* ctx, const v1::StatsRequest* req,
           v1::StatsResponse* resp,
           DoneFn done) { async->Stats(ctx, req, resp, std::move(done)); },
        [&](absl::Span<const v1::StatsResponse> resps) -> absl::Status {
          std::vector<StoreStats> parts;
          for (const v1::StatsResponse& resp : resps) {
            parts.push_back(FromProto(resp));
          }
          merged = MergeStoreStats(parts);
          return absl::OkStatus();
        }));
    return merged;
  }

 private:
  absl::Time Deadline() const { return absl::Now() + options_.call_timeout; }

  // One attempt of a keyed call over `part`'s batch under `map`: index[j] is
  // the position in the caller's arrays of part.sent_keys()[j]. Returns Run's
  // status and leaves its calls and chunks.
  using WriteAttempt = std::function<absl::Status(
      const RoutedMap& map, const Partitioner& part,
      absl::Span<const uint32_t> index, std::vector<Call>* calls,
      std::vector<Chunk>* chunks)>;

  // Sends `keys` (unique) with `attempt`. A call refused with
  // FAILED_PRECONDITION was routed with a stale map and nothing of it ran
  // (the server checks ownership before anything else), so its keys, and
  // only they, are sent again under the refreshed map, up to three times
  // (live resharding: rpc/control/README.md). Calls that succeeded are not
  // repeated: a write is applied once, and a read counts its sightings
  // once. With push_to_every_server the re-sent push round goes to every
  // server of the new map, empty where it owns none of the keys. Any other
  // failure is returned as is: part of a write may have been applied.
  absl::Status ResendRefused(std::shared_ptr<const RoutedMap> map,
                             absl::Time deadline,
                             absl::Span<const uint64_t> keys,
                             const WriteAttempt& attempt) {
    std::vector<uint32_t> todo(keys.size());
    for (size_t i = 0; i < todo.size(); ++i) todo[i] = static_cast<uint32_t>(i);
    Partitioner part;
    for (int round = 0;; ++round) {
      std::vector<uint64_t> round_keys(todo.size());
      for (size_t i = 0; i < todo.size(); ++i) round_keys[i] = keys[todo[i]];
      PSDB_RETURN_IF_ERROR(part.Partition(map->cluster.ring(), round_keys));
      std::vector<uint32_t> index(part.num_sent());
      const absl::Span<const uint32_t> inverse = part.inverse();
      for (size_t i = 0; i < todo.size(); ++i) index[inverse[i]] = todo[i];
      std::vector<Call> calls;
      std::vector<Chunk> chunks;
      const absl::Status status = attempt(*map, part, index, &calls, &chunks);
      if (status.ok()) return status;
      std::vector<uint32_t> refused;
      bool any_refused = false;
      for (size_t c = 0; c < calls.size(); ++c) {
        const grpc::StatusCode code = calls[c].status.error_code();
        if (code == grpc::StatusCode::OK) continue;
        if (code != grpc::StatusCode::FAILED_PRECONDITION) return status;
        any_refused = true;
        for (size_t j = chunks[c].begin; j < chunks[c].end; ++j) {
          refused.push_back(index[j]);
        }
      }
      if (!any_refused || round >= 3) return status;
      // A server refuses with a new epoch only after the scheduler
      // published it, so a fresh map is there at once unless the refusal
      // was of another kind: wait briefly, not the whole deadline.
      absl::StatusOr<std::shared_ptr<const RoutedMap>> fresh =
          fan_out_->Refresh(*map,
                            std::min(deadline, absl::Now() + absl::Seconds(1)));
      if (!fresh.ok()) return status;
      map = *std::move(fresh);
      todo = std::move(refused);
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

  // The read of Pull and PullRows: partitions `keys` over the map, sends
  // each owner its unique keys (`send` starts a call, `prepare` completes
  // each request), and re-sends refused calls under the refreshed map.
  // `fill(resp, at)` is called once per answered call, at[j] being the unique
  // index of the call's j-th key (a call answered is not asked again, even when
  // another is refused: a read counts sightings). `*inverse` maps each of
  // `keys` to its unique index.
  template <typename Request, typename Response, typename Send>
  absl::Status ReadUnique(absl::string_view table,
                          absl::Span<const uint64_t> keys, Send send,
                          absl::FunctionRef<void(Request&)> prepare,
                          absl::FunctionRef<absl::Status(
                              const Response&, absl::Span<const uint32_t>)>
                              fill,
                          std::vector<uint32_t>* inverse) {
    const absl::Time deadline = Deadline();
    Partitioner& part = ThreadPartitioner();
    std::shared_ptr<const RoutedMap> map = fan_out_->map();
    PSDB_RETURN_IF_ERROR(part.Partition(map->cluster.ring(), keys));
    const std::vector<uint64_t> unique(part.sent_keys().begin(),
                                       part.sent_keys().end());
    inverse->assign(part.inverse().begin(), part.inverse().end());
    return Forget(
        table,
        ResendRefused(
            map, deadline, unique,
            [&](const RoutedMap& routed, const Partitioner& p,
                absl::Span<const uint32_t> index, std::vector<Call>* out_calls,
                std::vector<Chunk>* out_chunks) -> absl::Status {
              auto chunked = fan_out_->ToOwners<Request, Response>(
                  routed, p, table, /*every_server=*/false, send);
              for (Request& req : chunked.reqs) prepare(req);
              const absl::Status status =
                  fan_out_->Run(routed, chunked.calls, true, deadline);
              for (size_t c = 0; c < chunked.chunks.size(); ++c) {
                if (!chunked.calls[c].status.ok()) continue;
                const Chunk& chunk = chunked.chunks[c];
                PSDB_RETURN_IF_ERROR(
                    fill(chunked.resps[c],
                         index.subspan(chunk.begin, chunk.size())));
              }
              *out_calls = std::move(chunked.calls);
              *out_chunks = std::move(chunked.chunks);
              return status;
            }));
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

  const std::unique_ptr<FanOut> fan_out_;
  const RemoteClientOptions& options_;  // fan_out_'s
  mutable absl::Mutex mu_;
  absl::flat_hash_map<std::string, TableSpec> specs_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<std::string, int64_t> steps_ ABSL_GUARDED_BY(mu_);
  // The newest version PullConsistent returned.
  internal::VersionFloor floor_;
};

absl::StatusOr<std::unique_ptr<RemoteClient>> RemoteClient::Open(
    const RemoteClientOptions& options) {
  PSDB_ASSIGN_OR_RETURN(std::unique_ptr<FanOut> fan_out,
                        FanOut::Create(options));
  auto impl = std::make_unique<Impl>(std::move(fan_out));
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
absl::StatusOr<ReadVersion> RemoteClient::PullConsistent(
    absl::Span<const TableRead> reads, const ConsistentReadOptions& options) {
  return impl_->PullConsistent(reads, options);
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
