#include "rpc/server/server.h"

#include <algorithm>
#include <chrono>
#include <climits>
#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <optional>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "grpcpp/ext/proto_server_reflection_plugin.h"
#include "grpcpp/grpcpp.h"
#include "grpcpp/health_check_service_interface.h"
#include "manifest/manifest.h"
#include "rpc/server/read_lease.h"
#include "rpc/server/request_checks.h"
#include "rpc/server/resharder.h"
#include "rpc/server/server_metrics.h"
#include "rpc/server/thread_pool.h"
#include "rpc/wire/address.h"
#include "rpc/wire/convert.h"
#include "rpc/wire/metrics_http.h"
#include "rpc/wire/psdb.grpc.pb.h"
#include "store/shard_files.h"
#include "util/status_macros.h"

namespace psdb::rpc {

int MaxMessageBytes(size_t max_batch_keys, int max_dim) {
  // Per key: 8 key bytes, values + Adam's state (m, v, step) as float32,
  // 24 bytes of row header (varints, at most 10 bytes each, rounded to 8).
  const uint64_t per_key =
      8 + 4 * (3 * static_cast<uint64_t>(std::max(max_dim, 1)) + 1) + 3 * 10;
  const uint64_t bytes =
      static_cast<uint64_t>(max_batch_keys) * per_key + (64u << 10);
  return static_cast<int>(std::min<uint64_t>(bytes, INT32_MAX));
}

namespace {

using grpc::CallbackServerContext;
using grpc::ServerUnaryReactor;

absl::Span<const uint64_t> KeySpan(
    const google::protobuf::RepeatedField<uint64_t>& keys) {
  return absl::MakeConstSpan(keys.data(), static_cast<size_t>(keys.size()));
}

// The method a request belongs to, for metrics (one overload per request
// type, so ServiceImpl::Run needs no extra argument).
RpcMethod MethodOf(const v1::PullRequest&) { return RpcMethod::kPull; }
RpcMethod MethodOf(const v1::PushRequest&) { return RpcMethod::kPush; }
RpcMethod MethodOf(const v1::PullRowsRequest&) { return RpcMethod::kPullRows; }
RpcMethod MethodOf(const v1::PutRowsRequest&) { return RpcMethod::kPutRows; }
RpcMethod MethodOf(const v1::CreateTableRequest&) {
  return RpcMethod::kCreateTable;
}
RpcMethod MethodOf(const v1::DropTableRequest&) {
  return RpcMethod::kDropTable;
}
RpcMethod MethodOf(const v1::ListTablesRequest&) {
  return RpcMethod::kListTables;
}
RpcMethod MethodOf(const v1::CheckpointRequest&) {
  return RpcMethod::kCheckpoint;
}
RpcMethod MethodOf(const v1::StatsRequest&) { return RpcMethod::kStats; }
RpcMethod MethodOf(const v1::ReshardRequest&) { return RpcMethod::kReshard; }
RpcMethod MethodOf(const v1::MigrateRequest&) { return RpcMethod::kMigrate; }
RpcMethod MethodOf(const v1::PullTablesRequest&) {
  return RpcMethod::kPullTables;
}

using internal::ReadLease;

class ServiceImpl final : public v1::ParameterService::CallbackService {
 public:
  // Exactly one of `store` (training) and `follower` (serving) is set.
  // `metrics` may be null (metrics off).
  ServiceImpl(const ServerOptions& options, Store* store,
              CheckpointFollower* follower, ThreadPool* pool,
              ThreadPool* control_pool, ServerMetrics* metrics)
      : options_(options),
        checks_(options, /*serving=*/follower != nullptr),
        store_(store),
        follower_(follower),
        pool_(pool),
        control_pool_(control_pool),
        metrics_(metrics) {
    if (options_.sync.num_workers > 0 && store != nullptr) {
      sync_ = std::make_unique<SyncAggregator>(
          options_.sync,
          [store](absl::string_view table, absl::Span<const uint64_t> keys,
                  absl::Span<const float> grads, int64_t step) {
            PushOptions push;
            push.step = step;
            return store->Push(table, keys, grads, push);
          });
    }
    if (store != nullptr) {
      resharder_ = std::make_unique<internal::Resharder>(
          options_.cluster, options_.shard_id, store, sync_.get(),
          options_.peer_tls, options_.max_batch_keys);
    }
  }

  // Releases requests held by a migration (they fail UNAVAILABLE).
  void ReleaseHeld() {
    if (resharder_ != nullptr) resharder_->Shutdown();
  }

  ServerUnaryReactor* Pull(CallbackServerContext* ctx,
                           const v1::PullRequest* req,
                           v1::PullResponse* resp) override {
    return Run(
        ctx, req, [this, req, resp] { return DoPull(*req, resp); }, Gate(*req));
  }
  ServerUnaryReactor* Push(CallbackServerContext* ctx,
                           const v1::PushRequest* req,
                           v1::PushResponse*) override {
    // Before the resharding gate, which records a sync push's step.
    if (absl::Status refused = checks_.CheckPushMode(req->mode(), req->table());
        !refused.ok()) {
      return Run(ctx, req, [refused] { return refused; });
    }
    internal::GateRequest gate = Gate(*req);
    if (sync_ != nullptr) gate.sync_step = req->step();
    return Run(
        ctx, req, [this, req] { return DoPush(*req); }, gate);
  }
  ServerUnaryReactor* PullRows(CallbackServerContext* ctx,
                               const v1::PullRowsRequest* req,
                               v1::PullRowsResponse* resp) override {
    return Run(
        ctx, req, [this, req, resp] { return DoPullRows(*req, resp); },
        Gate(*req));
  }
  ServerUnaryReactor* PullTables(CallbackServerContext* ctx,
                                 const v1::PullTablesRequest* req,
                                 v1::PullTablesResponse* resp) override {
    internal::GateRequest gate;
    gate.client_epoch = req->cluster_epoch();
    for (int i = 0; i < req->reads_size(); ++i) {
      const v1::TableRead& read = req->reads(i);
      const absl::Span<const uint64_t> keys = KeySpan(read.keys());
      if (i == 0) {
        gate.table = read.table();
        gate.keys = keys;
      } else {
        gate.more.push_back({read.table(), keys});
      }
    }
    return Run(
        ctx, req,
        [this, req, resp]() -> absl::Status {
          PSDB_ASSIGN_OR_RETURN(
              ReadLease lease,
              ReadLease::Acquire(store_, follower_, req->version()));
          PSDB_RETURN_IF_ERROR(internal::PullTables(
              lease, checks_, *Map(), options_.max_batch_keys, *req, resp));
          lease.SetVersions(follower_, resp);
          return absl::OkStatus();
        },
        std::move(gate));
  }
  ServerUnaryReactor* PutRows(CallbackServerContext* ctx,
                              const v1::PutRowsRequest* req,
                              v1::PutRowsResponse*) override {
    return Run(
        ctx, req, [this, req] { return DoPutRows(*req); }, Gate(*req));
  }
  ServerUnaryReactor* Reshard(CallbackServerContext* ctx,
                              const v1::ReshardRequest* req,
                              v1::ReshardResponse* resp) override {
    const absl::Time deadline = absl::FromChrono(ctx->deadline());
    return Run(
        ctx, req,
        [this, req, resp, deadline]() -> absl::Status {
          PSDB_RETURN_IF_ERROR(CheckWritable("Reshard"));
          return resharder_->Reshard(*req, resp, deadline);
        },
        std::nullopt, control_pool_);
  }
  ServerUnaryReactor* Migrate(CallbackServerContext* ctx,
                              const v1::MigrateRequest* req,
                              v1::MigrateResponse*) override {
    return Run(
        ctx, req,
        [this, req]() -> absl::Status {
          PSDB_RETURN_IF_ERROR(CheckWritable("Migrate"));
          return resharder_->Migrate(*req);
        },
        std::nullopt, control_pool_);
  }
  ServerUnaryReactor* CreateTable(CallbackServerContext* ctx,
                                  const v1::CreateTableRequest* req,
                                  v1::CreateTableResponse*) override {
    return Run(ctx, req, [this, req] { return DoCreateTable(*req); });
  }
  ServerUnaryReactor* DropTable(CallbackServerContext* ctx,
                                const v1::DropTableRequest* req,
                                v1::DropTableResponse*) override {
    // Through the gate (no keys): a migration's PREPARE waits for a drop
    // admitted before it, and one admitted after it is refused, since rows
    // in flight would re-create the table at their new owner.
    internal::GateRequest gate;
    gate.table = req->name();
    gate.client_epoch = req->cluster_epoch();
    return Run(
        ctx, req,
        [this, req]() -> absl::Status {
          PSDB_RETURN_IF_ERROR(CheckWritable("DropTable"));
          PSDB_RETURN_IF_ERROR(CheckEpoch(req->cluster_epoch()));
          PSDB_RETURN_IF_ERROR(ValidateTableName(req->name()));
          if (resharder_ != nullptr && resharder_->migrating()) {
            return absl::UnavailableError(absl::StrCat(
                "DropTable '", req->name(), "': server ", options_.shard_id,
                " is moving rows (live resharding); drop the table once "
                "the migration is done"));
          }
          return store_->DropTable(req->name());
        },
        gate);
  }
  ServerUnaryReactor* ListTables(CallbackServerContext* ctx,
                                 const v1::ListTablesRequest* req,
                                 v1::ListTablesResponse* resp) override {
    return Run(ctx, req, [this, req, resp]() -> absl::Status {
      PSDB_RETURN_IF_ERROR(CheckEpoch(req->cluster_epoch()));
      const ReadLease lease = Acquire();
      std::vector<TableSpec> tables = lease.ListTables();
      std::sort(tables.begin(), tables.end(),
                [](const TableSpec& a, const TableSpec& b) {
                  return a.name < b.name;
                });
      for (const TableSpec& spec : tables)
        *resp->add_tables() = TableSpecToProto(spec);
      return absl::OkStatus();
    });
  }
  ServerUnaryReactor* Checkpoint(CallbackServerContext* ctx,
                                 const v1::CheckpointRequest* req,
                                 v1::CheckpointResponse* resp) override {
    return Run(ctx, req,
               [this, req, resp] { return DoCheckpoint(*req, resp); });
  }
  ServerUnaryReactor* Stats(CallbackServerContext* ctx,
                            const v1::StatsRequest* req,
                            v1::StatsResponse* resp) override {
    return Run(ctx, req, [this, req, resp]() -> absl::Status {
      PSDB_RETURN_IF_ERROR(CheckEpoch(req->cluster_epoch()));
      const ReadLease lease = Acquire();
      StoreStats stats = lease.Stats();
      std::sort(stats.tables.begin(), stats.tables.end(),
                [](const TableStats& a, const TableStats& b) {
                  return a.name < b.name;
                });
      ToProto(stats, resp);
      resp->set_shard_id(options_.shard_id);
      resp->set_cluster_epoch(Map()->epoch());
      if (follower_ != nullptr) {
        const ServingStatus status = follower_->status();
        v1::ServingStats* serving = resp->mutable_serving();
        const ServingSnapshot& snap = *lease.snapshot();
        serving->set_checkpoint_id(snap.checkpoint_id);
        serving->set_step(snap.step);
        serving->set_created_unix_micros(absl::ToUnixMicros(snap.created));
        serving->set_swaps(status.swaps);
        serving->set_refused(status.refused);
        serving->mutable_shard_ids()->Assign(snap.shard_ids.begin(),
                                             snap.shard_ids.end());
        if (snap.shard_ids.size() == 1) resp->set_shard_id(snap.shard_ids[0]);
      }
      return absl::OkStatus();
    });
  }

 private:
  // Hands the request to the pool; answers without running it when the
  // client has gone or the deadline has passed meanwhile. Every handler
  // comes through here, so this is where each call is counted and timed
  // (from its arrival, queueing included), under the method its request
  // type names, with its key count when the request has keys.
  // Hands the request to the pool (`pool`, or the handler pool); answers
  // without running it when the client has gone or the deadline has passed
  // meanwhile. A keyed request of a training server first passes the
  // resharding gate (`gate`); one it holds is parked without a thread and
  // scheduled again when the migration ends. Every handler comes through
  // here, so this is where each call is counted and timed (from its
  // arrival, queueing and holding included), under the method its request
  // type names, with its key count when the request has keys.
  template <typename Request, typename Fn>
  ServerUnaryReactor* Run(
      CallbackServerContext* ctx, const Request* req, Fn fn,
      std::optional<internal::GateRequest> gate = std::nullopt,
      ThreadPool* pool = nullptr) {
    std::optional<size_t> keys;
    if constexpr (requires { req->keys_size(); }) {
      keys = static_cast<size_t>(req->keys_size());
    } else if constexpr (requires { req->reads(); }) {
      keys = 0;
      for (const auto& read : req->reads()) *keys += read.keys_size();
    }
    auto call = std::make_shared<PendingCall>();
    call->ctx = ctx;
    call->reactor = ctx->DefaultReactor();
    call->method = MethodOf(*req);
    call->keys = keys;
    call->arrived = absl::Now();
    call->fn = std::move(fn);
    if (resharder_ != nullptr) call->gate = std::move(gate);
    call->pool = pool != nullptr ? pool : pool_;
    ServerUnaryReactor* reactor = call->reactor;
    Schedule(std::move(call));
    return reactor;
  }

  struct PendingCall {
    CallbackServerContext* ctx = nullptr;
    ServerUnaryReactor* reactor = nullptr;
    RpcMethod method = RpcMethod::kPull;
    std::optional<size_t> keys;
    absl::Time arrived;
    std::function<absl::Status()> fn;
    std::optional<internal::GateRequest> gate;
    ThreadPool* pool = nullptr;
  };

  void Schedule(std::shared_ptr<PendingCall> call) {
    ThreadPool* pool = call->pool;
    pool->Schedule(
        [this, call = std::move(call)]() mutable { Execute(std::move(call)); });
  }

  void Execute(std::shared_ptr<PendingCall> call) {
    const auto finish = [&](const grpc::Status& status) {
      if (metrics_ != nullptr) {
        const absl::Time now = absl::Now();
        metrics_->RecordRequest(
            call->method, static_cast<absl::StatusCode>(status.error_code()),
            now - call->arrived, call->keys, now);
      }
      call->reactor->Finish(status);
    };
    if (call->ctx->IsCancelled()) {
      finish(grpc::Status(grpc::StatusCode::CANCELLED,
                          "request cancelled before it ran"));
      return;
    }
    if (call->ctx->deadline() <= std::chrono::system_clock::now()) {
      finish(grpc::Status(grpc::StatusCode::DEADLINE_EXCEEDED,
                          "deadline passed before the request ran"));
      return;
    }
    std::optional<internal::Resharder::Pass> pass;
    if (call->gate.has_value()) {
      absl::StatusOr<std::optional<internal::Resharder::Pass>> entered =
          resharder_->TryEnter(*call->gate, [this, call]() { Schedule(call); });
      if (!entered.ok()) {
        finish(ToGrpcStatus(entered.status()));
        return;
      }
      if (!entered->has_value()) return;  // held: scheduled again later
      pass.emplace(std::move(**entered));
    }
    const absl::Status status = call->fn();
    pass.reset();
    if (absl::IsFailedPrecondition(status)) {
      call->ctx->AddTrailingMetadata(kServerEpochMetadataKey,
                                     absl::StrCat(Map()->epoch()));
    }
    finish(ToGrpcStatus(status));
  }

  // What the gate needs of a keyed request.
  template <typename Request>
  static internal::GateRequest Gate(const Request& req) {
    internal::GateRequest gate;
    gate.table = req.table();
    gate.keys = KeySpan(req.keys());
    gate.client_epoch = req.cluster_epoch();
    return gate;
  }

  // The map this server routes with now (a training server's changes when
  // a migration commits).
  std::shared_ptr<const ClusterMap> Map() const {
    if (resharder_ != nullptr) return resharder_->map();
    return std::shared_ptr<const ClusterMap>(
        std::shared_ptr<const ClusterMap>(), &options_.cluster);
  }

  // The store or newest version this request runs against.
  ReadLease Acquire() const {
    if (follower_ == nullptr) return ReadLease(store_);
    return ReadLease(follower_->Acquire());
  }

  // A serving replica refuses every write.
  absl::Status CheckWritable(absl::string_view method) const {
    if (follower_ == nullptr) return absl::OkStatus();
    return absl::FailedPreconditionError(
        absl::StrCat("read-only serving replica: ", method,
                     " refused (serving ", follower_->Acquire()->dir, ")"));
  }

  // A request without keys: the epoch it was routed with.
  absl::Status CheckEpoch(uint64_t client_epoch) const {
    return checks_.CheckEpoch(*Map(), client_epoch);
  }

  // A keyed request (internal::RequestChecks::CheckKeys) under the map of
  // the moment, or the checkpoint `lease` holds.
  absl::Status CheckKeys(const ReadLease& lease, uint64_t client_epoch,
                         absl::string_view table,
                         absl::Span<const uint64_t> keys) const {
    return checks_.CheckKeys(*Map(), lease.snapshot(), client_epoch, table,
                             keys);
  }

  absl::Status DoPull(const v1::PullRequest& req, v1::PullResponse* resp) {
    const absl::Span<const uint64_t> keys = KeySpan(req.keys());
    PSDB_ASSIGN_OR_RETURN(ReadLease lease,
                          ReadLease::Acquire(store_, follower_, req.version()));
    PSDB_RETURN_IF_ERROR(
        CheckKeys(lease, req.cluster_epoch(), req.table(), keys));
    PSDB_ASSIGN_OR_RETURN(TableSpec spec, lease.GetTable(req.table()));
    std::string* values = resp->mutable_values();
    values->resize(keys.size() * spec.dim * sizeof(float));
    PullOptions options;
    options.serving = req.serving();
    PSDB_RETURN_IF_ERROR(
        lease.Pull(req.table(), keys,
                   absl::MakeSpan(reinterpret_cast<float*>(values->data()),
                                  keys.size() * spec.dim),
                   options));
    resp->set_dim(spec.dim);
    lease.SetVersions(follower_, resp);
    return absl::OkStatus();
  }

  absl::Status DoPush(const v1::PushRequest& req) {
    PSDB_RETURN_IF_ERROR(CheckWritable("Push"));
    const absl::Span<const uint64_t> keys = KeySpan(req.keys());
    PSDB_RETURN_IF_ERROR(
        CheckKeys(Acquire(), req.cluster_epoch(), req.table(), keys));
    PSDB_ASSIGN_OR_RETURN(TableSpec spec, store_->GetTable(req.table()));
    const size_t floats = keys.size() * spec.dim;
    if (req.grads().size() != floats * sizeof(float)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "table '", req.table(), "': grads hold ", req.grads().size(),
          " bytes, expected ", floats * sizeof(float), " (", keys.size(),
          " keys of dim ", spec.dim, ")"));
    }
    if (req.step() < 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "table '", req.table(), "': negative step ", req.step()));
    }
    absl::Span<const float> grads;
    std::vector<float> aligned;
    if (reinterpret_cast<uintptr_t>(req.grads().data()) % alignof(float) == 0) {
      grads = absl::MakeConstSpan(
          reinterpret_cast<const float*>(req.grads().data()), floats);
    } else {
      aligned.resize(floats);
      std::memcpy(aligned.data(), req.grads().data(), req.grads().size());
      grads = aligned;
    }
    if (sync_ != nullptr) {
      return sync_->Push(req.table(), spec.dim, req.worker_id(), req.step(),
                         keys, grads, req.cluster_epoch());
    }
    PushOptions options;
    options.step = req.step();
    options.worker_id = req.worker_id();
    return store_->Push(req.table(), keys, grads, options);
  }

  absl::Status DoPullRows(const v1::PullRowsRequest& req,
                          v1::PullRowsResponse* resp) {
    const absl::Span<const uint64_t> keys = KeySpan(req.keys());
    PSDB_ASSIGN_OR_RETURN(ReadLease lease,
                          ReadLease::Acquire(store_, follower_, req.version()));
    PSDB_RETURN_IF_ERROR(
        CheckKeys(lease, req.cluster_epoch(), req.table(), keys));
    RowBatch rows;
    PSDB_RETURN_IF_ERROR(lease.PullRows(req.table(), keys, &rows));
    ToProto(rows, resp->mutable_rows());
    lease.SetVersions(follower_, resp);
    return absl::OkStatus();
  }

  absl::Status DoPutRows(const v1::PutRowsRequest& req) {
    PSDB_RETURN_IF_ERROR(CheckWritable("PutRows"));
    const absl::Span<const uint64_t> keys = KeySpan(req.keys());
    PSDB_RETURN_IF_ERROR(
        CheckKeys(Acquire(), req.cluster_epoch(), req.table(), keys));
    PSDB_ASSIGN_OR_RETURN(TableSpec spec, store_->GetTable(req.table()));
    const int state_size = optim::StateSize(spec.optimizer, spec.dim);
    if (req.rows().dim() != spec.dim || req.rows().state_size() != state_size) {
      return absl::InvalidArgumentError(absl::StrCat(
          "table '", req.table(), "': rows have dim ", req.rows().dim(),
          " and state_size ", req.rows().state_size(), ", the table has ",
          spec.dim, " and ", state_size));
    }
    RowBatch rows;
    PSDB_RETURN_IF_ERROR(Annotate(FromProto(req.rows(), keys.size(), &rows),
                                  absl::StrCat("table '", req.table(), "'")));
    return store_->PutRows(req.table(), keys, rows);
  }

  absl::Status DoCreateTable(const v1::CreateTableRequest& req) {
    PSDB_RETURN_IF_ERROR(CheckWritable("CreateTable"));
    PSDB_RETURN_IF_ERROR(CheckEpoch(req.cluster_epoch()));
    PSDB_ASSIGN_OR_RETURN(TableSpec spec, TableSpecFromProto(req.spec()));
    PSDB_RETURN_IF_ERROR(ValidateTableSpec(spec));
    if (spec.dim > options_.max_dim) {
      return absl::InvalidArgumentError(
          absl::StrCat("table '", spec.name, "': dim ", spec.dim,
                       " exceeds the server's --max_dim ", options_.max_dim));
    }
    return store_->CreateTable(spec);
  }

  absl::Status DoCheckpoint(const v1::CheckpointRequest& req,
                            v1::CheckpointResponse* resp) {
    PSDB_RETURN_IF_ERROR(CheckWritable("Checkpoint"));
    PSDB_RETURN_IF_ERROR(CheckEpoch(req.cluster_epoch()));
    if (!req.shard_dir().empty()) {
      // One shard of a cluster checkpoint (rpc/control/cluster_checkpoint.h).
      PSDB_RETURN_IF_ERROR(internal::ValidateRootDir(req.shard_dir()));
      const absl::Time start = absl::Now();
      PSDB_ASSIGN_OR_RETURN(Store::ShardCheckpoint shard,
                            store_->CheckpointShard(req.shard_dir()));
      resp->set_path(req.shard_dir());
      resp->set_step(shard.step);
      resp->set_rows_flushed(shard.rows_flushed);
      resp->set_rows_expired(shard.rows_expired);
      resp->set_duration_micros(absl::ToInt64Microseconds(absl::Now() - start));
      for (const auto& [spec, rows] : shard.tables) {
        *resp->add_shard_tables() = TableSpecToProto(spec);
        resp->add_shard_table_rows(rows);
      }
      AppendShardFiles(shard.files, resp->mutable_shard_files());
      return absl::OkStatus();
    }
    PSDB_RETURN_IF_ERROR(internal::ValidateRootDir(req.root_dir()));
    std::string root = req.root_dir();
    if (!internal::Alone(*Map())) {
      root = absl::StrCat(root, "/server-", options_.shard_id);
    }
    CheckpointOptions options;
    if (req.has_keep_last()) {
      if (req.keep_last() < 0) {
        return absl::InvalidArgumentError("checkpoint keep_last < 0");
      }
      options.keep_last = req.keep_last();
    }
    PSDB_ASSIGN_OR_RETURN(CheckpointInfo info,
                          store_->Checkpoint(root, options));
    ToProto(info, resp);
    return absl::OkStatus();
  }

  const ServerOptions options_;
  const internal::RequestChecks checks_;
  Store* const store_;                  // training; null when serving
  CheckpointFollower* const follower_;  // serving; null when training
  ThreadPool* const pool_;
  ThreadPool* const control_pool_;        // Reshard and Migrate
  ServerMetrics* const metrics_;          // null: metrics off
  std::unique_ptr<SyncAggregator> sync_;  // null: async
  // Null when serving. Declared last: destroyed first.
  std::unique_ptr<internal::Resharder> resharder_;
};

}  // namespace

class PsServer::Impl {
 public:
  ServerOptions options;
  int port = 0;
  std::unique_ptr<ThreadPool> pool;
  std::unique_ptr<ThreadPool> control_pool;
  std::unique_ptr<ServiceImpl> service;
  std::unique_ptr<grpc::Server> server;
  // Null when options.metrics_port is -1. Members go in reverse order:
  // the endpoint (waiting for a running scrape) before the metrics.
  std::unique_ptr<ServerMetrics> metrics;
  std::unique_ptr<MetricsHttpServer> http;
  absl::Mutex mu;
  bool shut_down ABSL_GUARDED_BY(mu) = false;
};

absl::StatusOr<std::unique_ptr<PsServer>> PsServer::Start(
    const ServerOptions& options, Store* store) {
  if (store == nullptr) return absl::InvalidArgumentError("store is null");
  return StartWith(options, store, nullptr);
}

absl::StatusOr<std::unique_ptr<PsServer>> PsServer::StartServing(
    const ServerOptions& options, CheckpointFollower* follower) {
  if (follower == nullptr) {
    return absl::InvalidArgumentError("checkpoint follower is null");
  }
  if (options.sync.num_workers > 0) {
    return absl::InvalidArgumentError(
        "a read-only serving replica takes no pushes: sync mode makes no "
        "sense");
  }
  return StartWith(options, nullptr, follower);
}

absl::StatusOr<std::unique_ptr<PsServer>> PsServer::StartWith(
    const ServerOptions& options, Store* store, CheckpointFollower* follower) {
  if (options.port < 0 || options.port > 65535) {
    return absl::InvalidArgumentError(
        absl::StrCat("port ", options.port, " out of range"));
  }
  if (options.metrics_port < -1 || options.metrics_port > 65535) {
    return absl::InvalidArgumentError(
        absl::StrCat("metrics_port ", options.metrics_port, " out of range"));
  }
  if (options.max_batch_keys == 0 || options.max_dim < 1) {
    return absl::InvalidArgumentError(
        "max_batch_keys and max_dim must be positive");
  }
  if (!options.cluster.servers().empty() &&
      options.cluster.Find(options.shard_id) == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(
        "shard_id ", options.shard_id, " is not a server of the cluster map (",
        options.cluster.DebugString(), ")"));
  }
  PSDB_ASSIGN_OR_RETURN(std::shared_ptr<grpc::ServerCredentials> creds,
                        MakeServerCredentials(options.tls, options.host));

  auto impl = std::make_unique<Impl>();
  impl->options = options;
  int threads = options.num_threads;
  if (threads <= 0) {
    threads = std::max(1u, std::thread::hardware_concurrency());
  }
  impl->pool = std::make_unique<ThreadPool>(threads);
  if (options.metrics_port >= 0) {
    // Before gRPC serves: a bad metrics address fails Start with nothing
    // serving, and no call goes uncounted.
    impl->metrics = store != nullptr
                        ? std::make_unique<ServerMetrics>(store)
                        : std::make_unique<ServerMetrics>(follower);
    PSDB_ASSIGN_OR_RETURN(
        impl->http,
        MetricsHttpServer::Start(
            options.metrics_host.empty() ? options.host : options.metrics_host,
            options.metrics_port));
    impl->http->Register(impl->metrics->requests());
    impl->http->Register(impl->metrics->store_collector());
  }
  // Reshard's phases run for as long as a copy takes, and Migrate must run
  // while requests are held: a pool of their own.
  impl->control_pool = std::make_unique<ThreadPool>(4);
  impl->service = std::make_unique<ServiceImpl>(
      options, store, follower, impl->pool.get(), impl->control_pool.get(),
      impl->metrics.get());

  grpc::EnableDefaultHealthCheckService(true);
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  grpc::ServerBuilder builder;
  ListenExclusively(options.host, options.port, creds, &builder, &impl->port);
  builder.RegisterService(impl->service.get());
  const int max_bytes =
      MaxMessageBytes(options.max_batch_keys, options.max_dim);
  builder.SetMaxReceiveMessageSize(max_bytes);
  builder.SetMaxSendMessageSize(max_bytes);
  impl->server = builder.BuildAndStart();
  if (impl->server == nullptr || impl->port == 0) {
    return absl::UnavailableError(absl::StrCat(
        "cannot listen on ", JoinHostPort(options.host, options.port),
        " (address in use or not local?)"));
  }
  impl->server->GetHealthCheckService()->SetServingStatus(true);
  return std::unique_ptr<PsServer>(new PsServer(std::move(impl)));
}

PsServer::PsServer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

PsServer::~PsServer() { Shutdown(absl::ZeroDuration()); }

int PsServer::port() const { return impl_->port; }

std::string PsServer::address() const {
  return JoinHostPort(impl_->options.host, impl_->port);
}

int PsServer::metrics_port() const {
  return impl_->http != nullptr ? impl_->http->port() : -1;
}

std::string PsServer::metrics_address() const {
  return impl_->http != nullptr ? impl_->http->address() : "";
}

std::shared_ptr<grpc::Channel> PsServer::InProcessChannel() const {
  grpc::ChannelArguments args;
  const int max_bytes =
      MaxMessageBytes(impl_->options.max_batch_keys, impl_->options.max_dim);
  args.SetMaxReceiveMessageSize(max_bytes);
  args.SetMaxSendMessageSize(max_bytes);
  return impl_->server->InProcessChannel(args);
}

void PsServer::Shutdown(absl::Duration grace) {
  {
    absl::MutexLock lock(&impl_->mu);
    if (impl_->shut_down) return;
    impl_->shut_down = true;
  }
  impl_->server->GetHealthCheckService()->SetServingStatus(false);
  impl_->service->ReleaseHeld();
  // Returns once every running request has finished (or was cancelled at
  // the deadline); their handlers have run on the pool by then.
  impl_->server->Shutdown(std::chrono::system_clock::now() +
                          absl::ToChronoMilliseconds(grace));
  impl_->server->Wait();
  impl_->pool.reset();
  impl_->control_pool.reset();
  // The store may be closed once Shutdown returns: no scrape may read it.
  impl_->http.reset();
}

}  // namespace psdb::rpc
