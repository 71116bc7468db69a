// FanOut: how RemoteClient reaches its servers. Internal to psdb_client.
//
// It holds the map the client routes with (a ClusterMap and one gRPC stub
// per replica of every server), splits a batch into per-server chunks
// (shard::Partitioner's parts, cut at max_batch_keys), issues one fan-out of
// calls in parallel, retries idempotent calls on UNAVAILABLE with backoff
// within the call's deadline, and refreshes the map from
// RemoteClientOptions::map_source when a server answers FAILED_PRECONDITION
// (routed with a stale map).
//
// Replicas (ServerInfo::replicas): each attempt of a call goes to one
// replica of its shard, taken round-robin across the client's calls,
// skipping replicas that failed within the last replica_avoid_time. An
// attempt that fails with UNAVAILABLE, or outlives replica_attempt_timeout
// (every attempt but the one on the last untried replica gets that limit),
// marks its replica failed and, for idempotent calls, is sent again at once
// to a replica the call has not tried; only when every replica has failed
// does the call back off as above.
//
// Thread-safety: thread-safe. A RoutedMap is shared and immutable but for
// its replicas' failure times and round-robin cursors (atomics); a call
// keeps the map it started with even if the map is replaced meanwhile.
#ifndef PSDB_RPC_CLIENT_FAN_OUT_H_
#define PSDB_RPC_CLIENT_FAN_OUT_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "grpcpp/grpcpp.h"
#include "rpc/client/remote_client.h"
#include "rpc/wire/psdb.grpc.pb.h"
#include "shard/cluster_map.h"
#include "shard/partitioner.h"

namespace psdb::rpc::internal {

using Stub = v1::ParameterService::Stub;
using DoneFn = std::function<void(grpc::Status)>;

// One replica of a server: its channel and stub (shared with the maps
// that follow, for an address they keep) and when it last failed.
struct Replica {
  std::shared_ptr<grpc::Channel> channel;
  std::shared_ptr<Stub> stub;
  // absl::ToUnixNanos of the time until which calls prefer the server's
  // other replicas (it failed); 0 while it answers.
  mutable std::atomic<int64_t> avoid_until_ns{0};
};

// A server's replicas (replicas[r] is its ServerInfo::replica_address(r))
// and the cursor that spreads calls over them.
struct RoutedServer {
  std::vector<Replica> replicas;
  mutable std::atomic<uint64_t> next_replica{0};
};

// A cluster map and a stub per replica of every server, servers[s] for
// cluster.servers()[s].
struct RoutedMap {
  ClusterMap cluster;
  std::vector<RoutedServer> servers;

  size_t num_servers() const { return servers.size(); }
};

// One RPC of a fan-out: `start` issues it on the stub of a replica of server
// `server` (an index into cluster.servers()) with a fresh context.
struct Call {
  size_t server = 0;
  std::function<void(Stub*, grpc::ClientContext*, DoneFn)> start;
  grpc::Status status;
  // The replica of `server` it was last sent to (set by Run).
  size_t replica = 0;
};

// A run of one part's keys in the partitioner's sent order:
// sent_keys()[begin, end) all go to server `server` in one request.
struct Chunk {
  size_t server = 0;
  size_t begin = 0;
  size_t end = 0;
  size_t size() const { return end - begin; }
};

// The requests of a partitioned batch: every non-empty part cut into chunks
// of at most max_keys keys, parts in ring order. With `every_server`, a
// server on the ring whose part is empty gets one empty chunk (synchronous
// pushes, where every server counts every worker's push of a step).
std::vector<Chunk> ChunkParts(const Partitioner& partitioner,
                              const ClusterMap& cluster, size_t max_keys,
                              bool every_server);

// The calls of one keyed operation over a partitioned batch: a request and
// a response per chunk (chunks[c] is sent as reqs[c]). Its vectors are
// sized once; calls point into reqs and resps.
template <typename Req, typename Resp>
struct ChunkedCalls {
  std::vector<Chunk> chunks;
  std::vector<Req> reqs;
  std::vector<Resp> resps;
  std::vector<Call> calls;
};

// FanOut::Broadcast's defaults: answers that carry nothing to merge, and a
// failure returned as Run gave it.
struct AcceptAnswers {
  template <typename Resp>
  absl::Status operator()(absl::Span<const Resp>) const {
    return absl::OkStatus();
  }
};
struct ReturnRunStatus {
  absl::Status operator()(const RoutedMap&, absl::Span<const Call>,
                          absl::Status status) const {
    return status;
  }
};

class FanOut {
 public:
  // Connects (lazily) to options.cluster's servers. InvalidArgument if it
  // has no server on the ring or the limits are not positive.
  static absl::StatusOr<std::unique_ptr<FanOut>> Create(
      const RemoteClientOptions& options);

  // The map calls are routed with now.
  std::shared_ptr<const RoutedMap> map() const;
  // The options the client was opened with.
  const RemoteClientOptions& options() const { return options_; }

  // Runs fn(map); on FAILED_PRECONDITION asks map_source for a fresh map
  // and, if its epoch changed, installs it and (with `reroute`) runs fn
  // again, at most twice more. Calls that are not idempotent pass
  // reroute = false: part of them may have been applied.
  absl::Status WithMap(bool reroute,
                       const std::function<absl::Status(const RoutedMap&)>& fn);

  // A map newer than `current` from map_source, installed (unless another
  // call installed one meanwhile, which is then returned): asks again with
  // backoff until the epoch moves or `deadline` (a server that refused
  // with a newer epoch has it published already, but a watch may lag).
  // FailedPrecondition when there is no map_source or the epoch did not
  // move in time.
  absl::StatusOr<std::shared_ptr<const RoutedMap>> Refresh(
      const RoutedMap& current, absl::Time deadline);

  // FailedPrecondition, before anything is sent, when the map has a server
  // with replicas: replicas are read-only, so the client refuses writes
  // (`operation`, e.g. "Push") to the whole cluster. Outside WithMap: it is
  // no stale-map signal.
  absl::Status RefuseWriteToReplicas(absl::string_view operation) const;

  // Issues every call in parallel and waits for all; retries those that
  // failed with UNAVAILABLE when `idempotent`, with backoff, within
  // `deadline`, failing over between a server's replicas (see above).
  // Returns the first failure in call order, naming its server.
  absl::Status Run(const RoutedMap& map, std::vector<Call>& calls,
                   bool idempotent, absl::Time deadline) const;

  // One request per chunk of `partitioner`'s batch (ChunkParts at the
  // client's max_batch_keys), each with the map's epoch, `table` and its
  // chunk's keys set; send(stub->async(), ctx, &req, resp, done) issues it
  // (one method of the async ParameterService stub). The caller sets each
  // request's own fields before Run.
  template <typename Req, typename Resp, typename Send>
  ChunkedCalls<Req, Resp> ToOwners(const RoutedMap& map,
                                   const Partitioner& partitioner,
                                   absl::string_view table, bool every_server,
                                   Send send) const {
    ChunkedCalls<Req, Resp> out;
    out.chunks = ChunkParts(partitioner, map.cluster, options_.max_batch_keys,
                            every_server);
    out.reqs.resize(out.chunks.size());
    out.resps.resize(out.chunks.size());
    for (size_t c = 0; c < out.chunks.size(); ++c) {
      const Chunk& chunk = out.chunks[c];
      Req& req = out.reqs[c];
      req.set_cluster_epoch(map.cluster.epoch());
      req.set_table(std::string(table));
      const absl::Span<const uint64_t> keys =
          partitioner.sent_keys().subspan(chunk.begin, chunk.size());
      req.mutable_keys()->Assign(keys.begin(), keys.end());
      out.calls.push_back(
          Call{chunk.server,
               [&req, resp = &out.resps[c], send](
                   Stub* stub, grpc::ClientContext* ctx, DoneFn done) {
                 send(stub->async(), ctx, &req, resp, std::move(done));
               },
               {}});
    }
    return out;
  }

  // Sends one request to every server of the map in parallel and hands
  // the answers to `merge`: what CreateTable, DropTable, ListTables,
  // Checkpoint and Stats share. Each attempt runs under WithMap with the
  // map of the moment, `request`'s cluster_epoch set to its epoch, so a
  // FAILED_PRECONDITION refreshes the map and, when `idempotent`, sends the
  // request again to every server of the new one; Run retries on
  // UNAVAILABLE and fails over between replicas when `idempotent`, all
  // within `deadline`. send(stub->async(), ctx, &req, &resp, done) issues
  // one call (one method of the async ParameterService stub).
  // When every server answered, merge(resps) gives the attempt's status
  // (resps[s] from server s of the map); otherwise failed(map, calls,
  // status) does, `status` being Run's (the first failure in server order,
  // naming its server) and calls[s] server s's call; by default it returns
  // `status`.
  template <typename Resp, typename Req, typename Send,
            typename Merge = AcceptAnswers, typename Failed = ReturnRunStatus>
  absl::Status Broadcast(Req request, bool idempotent, absl::Time deadline,
                         Send send, Merge merge = {}, Failed failed = {}) {
    return WithMap(idempotent, [&](const RoutedMap& map) -> absl::Status {
      request.set_cluster_epoch(map.cluster.epoch());
      std::vector<Resp> resps(map.num_servers());
      std::vector<Call> calls;
      calls.reserve(map.num_servers());
      for (size_t s = 0; s < map.num_servers(); ++s) {
        calls.push_back(
            Call{s,
                 [&request, resp = &resps[s], send](
                     Stub* stub, grpc::ClientContext* ctx, DoneFn done) {
                   send(stub->async(), ctx, &request, resp, std::move(done));
                 },
                 {}});
      }
      const absl::Status status = Run(map, calls, idempotent, deadline);
      if (!status.ok()) {
        return failed(map, absl::Span<const Call>(calls), status);
      }
      return merge(absl::Span<const Resp>(resps));
    });
  }

  // `call`'s failure as an absl::Status naming the server's address.
  static absl::Status CallError(const RoutedMap& map, const Call& call);

 private:
  explicit FanOut(const RemoteClientOptions& options) : options_(options) {}
  // The routed form of `cluster`; addresses `previous` (may be null)
  // already reaches keep their channels, new ones get a channel each.
  absl::StatusOr<std::shared_ptr<const RoutedMap>> Connect(
      const ClusterMap& cluster, const RoutedMap* previous = nullptr) const;
  // A new channel to `address` and its stub (every replica its own).
  absl::Status NewChannel(const std::string& address, Replica* replica) const;
  // Installs `fresh` (epoch above `current`'s) unless a newer map is
  // there already, giving it time to connect to servers it adds (within
  // `deadline`); returns the map installed.
  absl::StatusOr<std::shared_ptr<const RoutedMap>> Install(
      const ClusterMap& fresh, const RoutedMap& current, absl::Time deadline);
  // The replica of `server` to send an attempt to: the next one round-robin
  // that `tried` does not hold and that is not being avoided, else the
  // untried one whose avoidance ends first. REQUIRES: an untried replica.
  static size_t PickReplica(const RoutedMap& map, size_t server,
                            absl::Span<const uint32_t> tried);

  const RemoteClientOptions options_;
  mutable absl::Mutex mu_;
  std::shared_ptr<const RoutedMap> map_ ABSL_GUARDED_BY(mu_);
};

// A partitioner reused by every call of this thread (Partitioner allocates
// only when a batch is larger than any before it on the thread).
// REQUIRES: the caller finishes with it before its next call on the thread.
Partitioner& ThreadPartitioner();

}  // namespace psdb::rpc::internal

#endif  // PSDB_RPC_CLIENT_FAN_OUT_H_
