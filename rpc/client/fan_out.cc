#include "rpc/client/fan_out.h"

#include <algorithm>
#include <utility>

#include "absl/container/inlined_vector.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
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
  if (options.max_batch_keys == 0 || options.max_attempts < 1 ||
      options.replica_attempt_timeout <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError(
        "RemoteClient: max_batch_keys, max_attempts and "
        "replica_attempt_timeout must be positive");
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
  map->servers = std::vector<RoutedServer>(cluster.servers().size());
  for (size_t s = 0; s < cluster.servers().size(); ++s) {
    const ServerInfo& server = cluster.servers()[s];
    std::vector<Replica>& replicas = map->servers[s].replicas;
    replicas = std::vector<Replica>(server.num_replicas());
    for (size_t r = 0; r < server.num_replicas(); ++r) {
      PSDB_ASSIGN_OR_RETURN(replicas[r].stub,
                            NewStub(server.replica_address(r)));
    }
  }
  return std::shared_ptr<const RoutedMap>(std::move(map));
}

absl::StatusOr<std::unique_ptr<Stub>> FanOut::NewStub(
    const std::string& address) const {
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
                        MakeChannel(options_.tls, address, args));
  return v1::ParameterService::NewStub(channel);
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

absl::StatusOr<std::shared_ptr<const RoutedMap>> FanOut::Refresh(
    const RoutedMap& current, absl::Time deadline) {
  if (!options_.map_source) {
    return absl::FailedPreconditionError("no map source to refresh from");
  }
  absl::Duration backoff = options_.initial_backoff;
  for (;;) {
    {
      absl::MutexLock lock(&mu_);
      if (map_->cluster.epoch() > current.cluster.epoch()) return map_;
    }
    absl::StatusOr<ClusterMap> fresh = options_.map_source();
    if (fresh.ok() && fresh->epoch() > current.cluster.epoch()) {
      PSDB_ASSIGN_OR_RETURN(std::shared_ptr<const RoutedMap> next,
                            Connect(*fresh));
      absl::MutexLock lock(&mu_);
      if (map_->cluster.epoch() < next->cluster.epoch()) map_ = next;
      return map_;
    }
    if (absl::Now() + backoff > deadline) {
      return absl::FailedPreconditionError(absl::StrCat(
          "cluster map still at epoch ", current.cluster.epoch(),
          fresh.ok() ? std::string()
                     : absl::StrCat(" (", fresh.status().message(), ")")));
    }
    absl::SleepFor(backoff);  // backoff between asks, as Run's retries
    backoff = std::min(backoff * 2, options_.max_backoff);
  }
}

absl::Status FanOut::RefuseWriteToReplicas(absl::string_view operation) const {
  const std::shared_ptr<const RoutedMap> current = map();
  for (const ServerInfo& server : current->cluster.servers()) {
    if (server.num_replicas() > 1) {
      return absl::FailedPreconditionError(absl::StrCat(
          operation, " refused: server ", server.id, " has ",
          server.num_replicas(), " replicas (", server.address, "|",
          absl::StrJoin(server.replicas, "|"),
          ") and replicas are read-only; nothing was sent. Write through a "
          "client whose map names one address per server"));
    }
  }
  return absl::OkStatus();
}

absl::Status FanOut::CallError(const RoutedMap& map, const Call& call) {
  const ServerInfo& server = map.cluster.servers()[call.server];
  std::string where =
      absl::StrCat("server ", server.replica_address(call.replica));
  if (server.num_replicas() > 1) {
    absl::StrAppend(&where, " (replica ", call.replica + 1, " of ",
                    server.num_replicas(), " of server ", server.id, ")");
  }
  return Annotate(FromGrpcStatus(call.status), where);
}

size_t FanOut::PickReplica(const RoutedMap& map, size_t server,
                           absl::Span<const uint32_t> tried) {
  const RoutedServer& routed = map.servers[server];
  const std::vector<Replica>& replicas = routed.replicas;
  const size_t n = replicas.size();
  if (n == 1) return 0;
  // A call's first attempt takes the next replica of the cursor, a
  // failover the one after the replica it last tried (not the cursor, or
  // every failover would shift the next calls' choice by one).
  const size_t first =
      tried.empty()
          ? routed.next_replica.fetch_add(1, std::memory_order_relaxed) % n
          : (tried.back() + 1) % n;
  const int64_t now = absl::ToUnixNanos(absl::Now());
  size_t best = n;
  int64_t best_until = 0;
  for (size_t k = 0; k < n; ++k) {
    const size_t r = (first + k) % n;
    if (std::find(tried.begin(), tried.end(), r) != tried.end()) continue;
    const int64_t until =
        replicas[r].avoid_until_ns.load(std::memory_order_relaxed);
    if (until <= now) return r;
    if (best == n || until < best_until) {
      best = r;
      best_until = until;
    }
  }
  return best;
}

absl::Status FanOut::Run(const RoutedMap& map, std::vector<Call>& calls,
                         bool idempotent, absl::Time deadline) const {
  struct Pending {
    absl::Mutex mu;
    int remaining ABSL_GUARDED_BY(mu) = 0;
  };
  // Per call: the replicas tried since its last backoff, and its attempt's
  // deadline.
  std::vector<absl::InlinedVector<uint32_t, 4>> tried(calls.size());
  std::vector<absl::Time> attempt_deadline(calls.size(), deadline);
  std::vector<size_t> todo(calls.size());
  for (size_t i = 0; i < calls.size(); ++i) todo[i] = i;
  // Calls waiting for the next backoff round.
  std::vector<size_t> later;
  absl::Duration backoff = options_.initial_backoff;
  for (int attempt = 1;;) {
    // Shared with the callbacks, which may still be unlocking after the
    // wait below returns.
    auto pending = std::make_shared<Pending>();
    std::vector<std::unique_ptr<grpc::ClientContext>> contexts;
    {
      absl::MutexLock lock(&pending->mu);
      pending->remaining = static_cast<int>(todo.size());
    }
    const absl::Time now = absl::Now();
    for (size_t i : todo) {
      Call& call = calls[i];
      const size_t n = map.servers[call.server].replicas.size();
      call.replica = PickReplica(map, call.server, tried[i]);
      tried[i].push_back(static_cast<uint32_t>(call.replica));
      // A replica that hangs must not take the whole deadline while
      // another could answer: only the last untried one gets all of it.
      attempt_deadline[i] =
          tried[i].size() < n
              ? std::min(deadline, now + options_.replica_attempt_timeout)
              : deadline;
      auto ctx = std::make_unique<grpc::ClientContext>();
      ctx->set_deadline(absl::ToChronoTime(attempt_deadline[i]));
      // Fail at once on a server that cannot be reached (the default, said
      // here because failover depends on it).
      ctx->set_wait_for_ready(false);
      call.start(map.servers[call.server].replicas[call.replica].stub.get(),
                 ctx.get(), [pending, &call](grpc::Status status) {
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
    const absl::Time done = absl::Now();
    std::vector<size_t> failover;
    for (size_t i : todo) {
      const Call& call = calls[i];
      const Replica& replica = map.servers[call.server].replicas[call.replica];
      const size_t n = map.servers[call.server].replicas.size();
      const grpc::StatusCode code = call.status.error_code();
      if (code == grpc::StatusCode::OK) {
        if (n > 1) replica.avoid_until_ns.store(0, std::memory_order_relaxed);
        continue;
      }
      // Unreachable, or silent past the attempt's own limit.
      const bool unanswered = code == grpc::StatusCode::UNAVAILABLE ||
                              (code == grpc::StatusCode::DEADLINE_EXCEEDED &&
                               attempt_deadline[i] < deadline);
      if (!unanswered) continue;
      if (n > 1) {
        replica.avoid_until_ns.store(
            absl::ToUnixNanos(done + options_.replica_avoid_time),
            std::memory_order_relaxed);
      }
      if (!idempotent) continue;
      (tried[i].size() < n ? failover : later).push_back(i);
    }
    if (done >= deadline) break;
    if (!failover.empty()) {
      todo = std::move(failover);
      continue;
    }
    if (later.empty() || attempt >= options_.max_attempts ||
        done + backoff >= deadline) {
      break;
    }
    absl::SleepFor(backoff);
    backoff = std::min(backoff * 2, options_.max_backoff);
    ++attempt;
    for (size_t i : later) tried[i].clear();
    todo = std::move(later);
    later.clear();
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
