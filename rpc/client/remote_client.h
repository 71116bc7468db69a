// RemoteClient: ParameterClient served by ps-server processes over gRPC.
//
//   psdb::rpc::RemoteClientOptions options;
//   PSDB_ASSIGN_OR_RETURN(options.cluster, psdb::ClusterMap::FromServerList(
//                                              "10.0.0.1:7000,10.0.0.2:7000"));
//   PSDB_ASSIGN_OR_RETURN(auto client, psdb::rpc::RemoteClient::Open(options));
//
// or, through a URL (psdb/client_url.h):
// "servers:10.0.0.1:7000,10.0.0.2:7000" (read-only replicas:
// "servers:10.0.0.1:7000|10.0.0.3:7000,10.0.0.2:7000|10.0.0.4:7000").
//
// Routing: a key is owned by the server the client's map names (first
// options.cluster, then what map_source returns after a refresh;
// shard/cluster_map.h); every ps-server holds the same map (the same
// --servers list, or the scheduler's map) and checks ownership with it, so
// both sides agree. Per call the client de-duplicates the keys and splits
// them by owner with shard::Partitioner (and into chunks of at most
// max_batch_keys), sends every sub-batch in parallel and scatters the
// answers back to the caller's positions (rpc/client/fan_out.h).
//
// Semantics match LocalClient bit for bit (the central test of rpc/):
//  - Push sums duplicate keys' gradients in order of occurrence, as the store
//    does, and always sends an explicit step: when the caller passes
//    step == 0 the client keeps a per-table counter (started from the
//    tables' current step across servers) so every server's Adam bias
//    correction sees the step the embedded store would.
//  - PutRows: duplicate keys, the last one wins.
//  - Every push says how this client pushes (PushRequest.mode: sync with
//    push_to_every_server, else async). A server started in the other
//    --sync_mode refuses it with FAILED_PRECONDITION, naming both modes
//    and the flags to change, and applies nothing; so does every server
//    of a cluster that disagrees, at the worker's first push.
//  - CreateTable, DropTable and Checkpoint go to every server; ListTables
//    and Stats are merged across servers (Stats: counters summed per table,
//    steps and checkpoint durations as the maximum).
//
// Versions (serving replicas): Pull sends PullOptions::version to every
// shard; PullConsistent reads several tables at one version, asking again
// the shards that answered another (rpc/client/consistent_read.h), and
// never returns a version older than one it returned before.
//
// Failure handling: every call has a deadline (call_timeout from its start,
// covering retries). Idempotent calls (Pull, PullRows, CreateTable,
// ListTables, GetTable, Stats) are retried with exponential backoff on
// UNAVAILABLE; Push, PutRows, DropTable and Checkpoint are not. A
// FAILED_PRECONDITION (routed with a stale map) makes the client ask
// options.map_source for the current map; if its epoch changed the call is
// routed again, otherwise the error is returned. For Pull, PullRows, Push
// and PutRows only the per-server requests that were refused are sent
// again, their keys routed by the new map (a refused request ran nothing),
// so a live resharding (rpc/control/README.md) neither loses nor repeats a
// push and counts each read once. A dead server makes the call
// fail with UNAVAILABLE or DEADLINE_EXCEEDED within the deadline.
//
// Replicas (a map whose servers name replicas, e.g. the URL
// "servers:h1:p1|h2:p2,h3:p3|h4:p4"; shard/cluster_map.h): the client reads
// and never writes. Pull, PullRows, ListTables, GetTable and Stats send each
// request to one replica of its server, round-robin over the replicas (so
// ListTables and Stats count each server once). A replica that answers
// UNAVAILABLE, or not within replica_attempt_timeout, is skipped for
// replica_avoid_time and the request goes at once to another replica, so no
// error reaches the caller while one replica of every server answers
// (rpc/client/fan_out.h). Push, PutRows, CreateTable, DropTable and
// Checkpoint fail with FAILED_PRECONDITION, naming the server and its
// replicas, before anything is sent: replicas serve copies of the same
// rows (a serving ps-server follows a checkpoint), and a write to one would
// make them disagree. FAILED_PRECONDITION, not INVALID_ARGUMENT, because the
// request is valid and would succeed against a writable cluster; this
// refusal never triggers a map refresh.
//
// Thread-safety: thread-safe; calls from many threads run concurrently.
#ifndef PSDB_RPC_CLIENT_REMOTE_CLIENT_H_
#define PSDB_RPC_CLIENT_REMOTE_CLIENT_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "psdb/parameter_client.h"
#include "psdb/remote_options.h"
#include "shard/cluster_map.h"

namespace psdb::rpc {

// RemoteClient's options: psdb/remote_options.h's, plus where the servers
// are and where a fresh map comes from.
struct RemoteClientOptions : RemoteOptions {
  // The servers and the placement of keys on them, e.g.
  // ClusterMap::FromServerList("h1:p1,h2:p2") for a static list (epoch 1,
  // as ps-server --servers). REQUIRED: at least one server on the ring.
  ClusterMap cluster;
  // Where a fresh map comes from after FAILED_PRECONDITION; null = the
  // static map above (which never changes). Default: null
  std::function<absl::StatusOr<ClusterMap>()> map_source;
};

class RemoteClient final : public ParameterClient {
 public:
  // Creates channels to every server (connections are made lazily, so this
  // succeeds while servers are still starting).
  static absl::StatusOr<std::unique_ptr<RemoteClient>> Open(
      const RemoteClientOptions& options);
  ~RemoteClient() override;

  absl::Status CreateTable(const TableSpec& spec) override;
  absl::Status DropTable(absl::string_view name) override;
  absl::StatusOr<std::vector<TableSpec>> ListTables() override;
  absl::StatusOr<TableSpec> GetTable(absl::string_view name) override;
  absl::Status Pull(absl::string_view table, absl::Span<const uint64_t> keys,
                    absl::Span<float> out, const PullOptions& options) override;
  // One version over every shard and table (psdb/parameter_client.h;
  // the algorithm: rpc/client/consistent_read.h).
  absl::StatusOr<ReadVersion> PullConsistent(
      absl::Span<const TableRead> reads,
      const ConsistentReadOptions& options) override;
  absl::Status Push(absl::string_view table, absl::Span<const uint64_t> keys,
                    absl::Span<const float> grads,
                    const PushOptions& options) override;
  absl::Status PullRows(absl::string_view table,
                        absl::Span<const uint64_t> keys,
                        RowBatch* out) override;
  absl::Status PutRows(absl::string_view table, absl::Span<const uint64_t> keys,
                       const RowBatch& rows) override;
  // Every server writes its shard under root_dir on its own filesystem (a
  // server of several under root_dir/server-<rank>/). The returned path is
  // root_dir; step is the largest, rows are summed, duration the longest.
  absl::StatusOr<CheckpointInfo> Checkpoint(
      absl::string_view root_dir, const CheckpointOptions& options) override;
  absl::StatusOr<StoreStats> Stats() override;

  // Epoch of the map the client currently routes with.
  uint64_t epoch() const;

  class Impl;

 private:
  explicit RemoteClient(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace psdb::rpc

#endif  // PSDB_RPC_CLIENT_REMOTE_CLIENT_H_
