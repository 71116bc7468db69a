// PsServer: one shard of a psdb cluster: a Store behind gRPC's
// ParameterService (rpc/wire/psdb.proto). tools/ps-server is a thin main over
// it; tests run it in-process.
//
//   PSDB_ASSIGN_OR_RETURN(auto server, psdb::rpc::PsServer::Start(opts,
//   store)); std::cout << "listening on " << server->address() << "\n";
//   ...
//   server->Shutdown(absl::Seconds(30));  // in-flight requests finish
//
// Serving: gRPC's callback API; each request is parsed on a gRPC thread and
// executed on a ThreadPool sized to the machine. Requests whose deadline has
// passed (or that the client cancelled) before they run are answered
// DEADLINE_EXCEEDED / CANCELLED without touching the store. Registers the
// standard grpc.health.v1 health service and server reflection. The maximum
// message size is derived from the batch limit (see MaxMessageBytes).
//
// Validation (before the store sees anything): table names, byte lengths of
// row payloads against keys * dim, table dims against max_dim, key counts
// against max_batch_keys (RESOURCE_EXHAUSTED), key ownership under the
// cluster epoch (FAILED_PRECONDITION with the server's epoch), a push's mode
// (PushRequest.mode) against options.sync (FAILED_PRECONDITION naming both
// modes and the flags to change); rpc/server/request_checks.h. The store
// validates the rest (unknown table, non-finite values); a bad request changes
// nothing.
//
// Read-only serving (StartServing): requests run against the follower's
// current checkpoint (rpc/server/checkpoint_follower.h), each wholly against
// one. Pull and PullRows are serving reads (no row is created; a missing id
// gets its table's serving default) whatever the request says; Push,
// PutRows, CreateTable, DropTable and Checkpoint answer FAILED_PRECONDITION
// "read-only serving replica". Key ownership is checked against the ring
// the checkpoint was written under (a cluster checkpoint's), not the
// cluster epoch: replicas do not take part in membership changes. Stats
// reports the serving checkpoint (StatsResponse.serving).
// The follower holds several checkpoints (FollowerOptions::serve_versions):
// Pull, PullRows and PullTables read the one their request names (empty:
// the newest) and answer with it and the versions held.
//
// PullTables (both kinds of server): several tables' reads in one request,
// each checked and read as a Pull of its table (rpc/server/read_lease.h).
//
// Live resharding (rpc/server/resharder.h; the protocol in
// rpc/control/README.md): the Reshard and Migrate RPCs. The cluster map
// starts as options.cluster and is replaced when a migration commits; a
// request a migration holds takes no handler thread while it waits.
// Reshard and Migrate run on a pool of their own, so held requests never
// keep them from running.
//
// Metrics (options.metrics_port >= 0): every call is counted by method and
// status code and timed, and the store's figures (a replica's: the served
// checkpoint's, with its step and age) are exposed, in the Prometheus text
// format over HTTP (rpc/server/server_metrics.h).
//
// Thread-safety: Start/Shutdown/Wait from one controlling thread; the server
// serves any number of concurrent requests. `store` (or `follower`) must
// outlive the server.
#ifndef PSDB_RPC_SERVER_SERVER_H_
#define PSDB_RPC_SERVER_SERVER_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "psdb/store.h"
#include "rpc/server/checkpoint_follower.h"
#include "rpc/server/sync_aggregator.h"
#include "rpc/wire/tls.h"
#include "shard/cluster_map.h"

namespace grpc {
class Channel;
}  // namespace grpc

namespace psdb::rpc {

struct ServerOptions {
  // Address to bind. Plaintext is allowed on loopback only unless
  // tls.insecure (see rpc/wire/tls.h). Default: "127.0.0.1"
  std::string host = "127.0.0.1";
  // 0 = pick a free port (see PsServer::port()). Default: 0
  int port = 0;
  // Handler threads; 0 = one per hardware thread. Default: 0
  int num_threads = 0;
  // Most keys one request may carry (RESOURCE_EXHAUSTED above). Also the
  // store's max_batch_keys. Default: 65536
  size_t max_batch_keys = 65536;
  // Largest table dim CreateTable accepts. Default: 1024
  int max_dim = 1024;
  // The cluster map this server is one shard of (shard/cluster_map.h): the
  // server answers for the keys the map assigns to shard_id, under the
  // map's epoch. A map with at most one server: this server is alone and
  // owns every key. Default: no servers, epoch 1
  ClusterMap cluster = ClusterMap::Empty(1);
  // This server's id in `cluster` (its rank). Default: 0
  int shard_id = 0;
  ServerTlsOptions tls;
  // How this server reaches its peers: live resharding sends rows to their
  // new owners (Migrate). Default: plaintext
  ClientTlsOptions peer_tls;
  // Synchronous (BSP) training: with num_workers > 0 each push is held
  // until every worker has pushed the same (table, step), then the step's
  // gradients are reduced and applied once (rpc/server/sync_aggregator.h).
  // Pushes that say they are async are refused then, and pushes that say
  // they are sync are refused by an async server (PushRequest.mode).
  // Default: async (num_workers 0)
  SyncOptions sync;
  // Prometheus metrics over HTTP at GET /metrics (server_metrics.h):
  // -1 = off, 0 = a free port (see PsServer::metrics_port()). Default: -1
  int metrics_port = -1;
  // Address the metrics endpoint binds; empty = `host`. Default: ""
  std::string metrics_host;
};

// Largest gRPC message ps-server accepts (and sends): a request of
// max_batch_keys keys with whole rows of max_dim values plus the largest
// optimizer state (Adam: 2*dim+1), headers and 64 KiB of slack; capped at
// INT32_MAX.
int MaxMessageBytes(size_t max_batch_keys, int max_dim);

class PsServer {
 public:
  // Validates options, builds credentials (refusing an expired certificate
  // or plaintext on a non-loopback address), binds and starts serving.
  static absl::StatusOr<std::unique_ptr<PsServer>> Start(
      const ServerOptions& options, Store* store);
  // The same, serving `follower`'s checkpoints read-only. options.sync
  // must be async; options.cluster and shard_id are not used.
  static absl::StatusOr<std::unique_ptr<PsServer>> StartServing(
      const ServerOptions& options, CheckpointFollower* follower);
  ~PsServer();  // Shutdown(absl::ZeroDuration()) if still running.
  PsServer(const PsServer&) = delete;
  PsServer& operator=(const PsServer&) = delete;

  // The bound port (the chosen one when options.port == 0).
  int port() const;
  // host:port (IPv6 hosts in brackets).
  std::string address() const;
  // The bound metrics port; -1 when options.metrics_port was -1 or after
  // Shutdown (which stops the endpoint).
  int metrics_port() const;
  // host:port of the metrics endpoint; empty when there is none.
  std::string metrics_address() const;
  // A channel to this server within the process (gRPC's in-process
  // transport: no socket, no credentials, the same service and limits).
  // For in-process callers such as the fuzz targets (tests/fuzz/).
  // REQUIRES: before Shutdown.
  std::shared_ptr<grpc::Channel> InProcessChannel() const;

  // Stops accepting requests; requests already running finish (until
  // `grace` passes, after which they are cancelled), then the handler pool
  // drains, then the metrics endpoint stops. Idempotent. The store is left
  // open for the caller to close.
  void Shutdown(absl::Duration grace);

 private:
  class Impl;
  explicit PsServer(std::unique_ptr<Impl> impl);
  // Start and StartServing: exactly one of store and follower is set.
  static absl::StatusOr<std::unique_ptr<PsServer>> StartWith(
      const ServerOptions& options, Store* store, CheckpointFollower* follower);
  std::unique_ptr<Impl> impl_;
};

}  // namespace psdb::rpc

#endif  // PSDB_RPC_SERVER_SERVER_H_
