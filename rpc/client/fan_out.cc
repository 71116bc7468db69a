#include "rpc/client/fan_out.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "rpc/wire/convert.h"
#include "rpc/wire/tls.h"
#include "util/status_macros.h"

namespace psdb::rpc::internal {

std::vector<Chunk> ChunkParts(const Partitioner& partitioner,
                              const ClusterMap& cluster, size_t max_keys,
                              bool every_server) {
  std::vector<Chunk> chunks;
  for (size_t p = 0; p < partitioner.num_parts(); ++p) {
    const size_t server = cluster.RingServerIndex(p);
    const size_t begin = partitioner.part_offset(p);
    const size_t end = begin + partitioner.part_keys(p).size();
    if (begin == end) {
      if (every_server) chunks.push_back(Chunk{server, begin, end});
      continue;
    }
    for (size_t b = begin; b < end; b += max_keys) {
      chunks.push_back(Chunk{server, b, std::min(end, b + max_keys)});
    }
  }
  return chunks;
}

absl::StatusOr<std::unique_ptr<FanOut>> FanOut::Create(
    const RemoteClientOptions& options) {
  if (options.cluster.ring().empty()) {
    return absl::InvalidArgumentError(
        "RemoteClient: the cluster map has no servers");
  }
  if (options.max_batch_keys == 0 || options.max_attempts < 1) {
    return absl::InvalidArgumentError(
        "RemoteClient: max_batch_keys and max_attempts must be positive");
  }
  std::unique_ptr<FanOut> fan_out(new FanOut(options));
  PSDB_ASSIGN_OR_RETURN(std::shared_ptr<const RoutedMap> map,
                        fan_out->Connect(options.cluster));
  absl::MutexLock lock(&fan_out->mu_);
  fan_out->map_ = std::move(map);
  return fan_out;
}

absl::StatusOr<std::shared_ptr<const RoutedMap>> FanOut::Connect(
    const ClusterMap& cluster) const {
  if (cluster.ring().empty()) {
    return absl::InvalidArgumentError("cluster map has no servers");
  }
  auto map = std::make_shared<RoutedMap>();
  map->cluster = cluster;
  for (const ServerInfo& server : cluster.servers()) {
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
    PSDB_ASSIGN_OR_RETURN(std::shared_ptr<grpc::Channel> channel,
                          MakeChannel(options_.tls, server.address, args));
    map->stubs.push_back(v1::ParameterService::NewStub(channel));
  }
  return std::shared_ptr<const RoutedMap>(std::move(map));
}

std::shared_ptr<const RoutedMap> FanOut::map() const {
  absl::MutexLock lock(&mu_);
  return map_;
}

absl::Status FanOut::WithMap(
    bool reroute, const std::function<absl::Status(const RoutedMap&)>& fn) {
  for (int attempt = 0;; ++attempt) {
    std::shared_ptr<const RoutedMap> current = map();
    absl::Status status = fn(*current);
    if (!absl::IsFailedPrecondition(status) || !options_.map_source) {
      return status;
    }
    absl::StatusOr<ClusterMap> fresh = options_.map_source();
    if (!fresh.ok() || fresh->epoch() == current->cluster.epoch()) {
      return status;
    }
    absl::StatusOr<std::shared_ptr<const RoutedMap>> next = Connect(*fresh);
    if (!next.ok()) return status;
    {
      absl::MutexLock lock(&mu_);
      if (map_->cluster.epoch() == current->cluster.epoch()) {
        map_ = *std::move(next);
      }
    }
    if (!reroute || attempt >= 2) return status;
  }
}

absl::Status FanOut::CallError(const RoutedMap& map, const Call& call) {
  return Annotate(
      FromGrpcStatus(call.status),
      absl::StrCat("server ", map.cluster.servers()[call.server].address));
}

absl::Status FanOut::Run(const RoutedMap& map, std::vector<Call>& calls,
                         bool idempotent, absl::Time deadline) const {
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
    if (!call.status.ok()) return CallError(map, call);
  }
  return absl::OkStatus();
}

Partitioner& ThreadPartitioner() {
  thread_local Partitioner partitioner;
  return partitioner;
}

}  // namespace psdb::rpc::internal
