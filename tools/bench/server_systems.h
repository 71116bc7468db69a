// The systems `ps-bench server` compares (server_bench.h says what it
// measures and why): psdb over loopback gRPC, Redis, and a raw-TCP gather
// server with no RPC layer (the limit); and the read-only psdb serving
// replica `ps-bench serve` compares with the same Redis (serve_bench.h). Each
// is opened once — its server started, one connection per client thread made,
// every row loaded — and then measured by the scenario in several alternating
// rounds, so all three stay up together for the whole run. Destroying one stops
// its server.
//
// Thread-safety: after Open, Pull and Push may be called from
// `options.threads` threads at once, each with its own `thread` index in
// [0, threads) (one connection and one set of buffers per index).
#ifndef PSDB_TOOLS_BENCH_SERVER_SYSTEMS_H_
#define PSDB_TOOLS_BENCH_SERVER_SYSTEMS_H_

#include <cstdint>
#include <memory>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "psdb/parameter_client.h"
#include "psdb/table_spec.h"
#include "tools/bench/process_memory.h"

namespace psdb::bench {

// What every system is built from; the same for all three.
struct ServerSystemOptions {
  uint64_t rows = 0;         // keys ScrambleKey(0..rows-1, seed), all loaded
  int dim = 0;               // floats per row
  int threads = 1;           // client threads, one connection each
  uint64_t batch_keys = 0;   // most keys per Pull / Push
  uint64_t redis_chunk = 0;  // keys per pipelined MGET / MSET command
  uint64_t seed = 0;         // key scrambling and row initializer seed
  std::string ps_server;     // ps-server binary
  std::string redis_server;  // redis-server binary
  std::string dir;           // scratch directory (exists)
  // ps-server's --memory_budget_mb; 0: twice the table's rows + 256 MiB
  // (everything resident).
  uint64_t psdb_memory_budget_mb = 0;
};

// The table every system holds: "emb", options.dim floats per row, rows
// initialized from options.seed (InitializeRow). Redis and the limit load
// exactly these rows; a checkpoint a serving replica reads must hold them
// too for the comparison to be of the same bytes.
TableSpec BenchTableSpec(const ServerSystemOptions& options);

class ServerSystem {
 public:
  virtual ~ServerSystem() = default;
  ServerSystem(const ServerSystem&) = delete;
  ServerSystem& operator=(const ServerSystem&) = delete;

  // Short name for JSON ("psdb", "redis", "tcp_limit") and report label.
  const std::string& id() const { return id_; }
  const std::string& label() const { return label_; }
  // Seconds Open spent loading every row.
  double load_s() const { return load_s_; }

  // Reads the rows of `keys` (duplicates allowed).
  // REQUIRES: keys.size() <= batch_keys.
  virtual absl::Status Pull(int thread, absl::Span<const uint64_t> keys) = 0;
  // Whether Push is measured (the limit serves pulls only).
  virtual bool has_push() const { return false; }
  // Writes the rows of `keys`: psdb applies a gradient (Adagrad, on the
  // server), Redis overwrites the values.
  virtual absl::Status Push(int thread, absl::Span<const uint64_t> keys);
  // The memory of the system's server process now (its VmHWM: its peak
  // since it started); Unimplemented for a system without one.
  virtual absl::StatusOr<ProcessMemory> ServerMemory();

 protected:
  ServerSystem(std::string id, std::string label)
      : id_(std::move(id)), label_(std::move(label)) {}
  double load_s_ = 0;

 private:
  std::string id_;
  std::string label_;
};

// One ps-server process and one RemoteClient per thread; the table "emb"
// uses Adagrad, so a push runs the optimizer server-side.
absl::StatusOr<std::unique_ptr<ServerSystem>> OpenPsdbSystem(
    const ServerSystemOptions& options);

// A read-only psdb serving replica: what `ps-server --serve_from` serves
// (rpc/server/checkpoint_follower.h), read through one RemoteClient per
// thread with serving pulls of table "emb".
class ServingReplica : public ServerSystem {
 public:
  // The replica's store stats through a connection of its own: each
  // table's step (that of the checkpoint it serves now) and its memory
  // tier's hits and misses.
  virtual absl::StatusOr<StoreStats> Stats() = 0;

 protected:
  using ServerSystem::ServerSystem;
};

struct ServingReplicaOptions {
  std::string id;     // ServerSystem::id()
  std::string label;  // ServerSystem::label()
  // The checkpoint root it follows (--serve_from).
  std::string root;
  // Its memory tier (--memory_budget_mb).
  uint64_t memory_budget_mb = 0;
  // Seconds between its looks for a newer checkpoint (--follow_interval_s).
  int follow_interval_s = 1;
  // File for its log (stderr); empty: a temporary one.
  std::string log;
};

// Starts `ps-server --serve_from` (options.ps_server) on a free loopback
// port and connects options.threads clients; load_s() is the time until it
// served (it verifies the checkpoint first). Loads nothing: the rows come
// from the checkpoint under replica.root.
absl::StatusOr<std::unique_ptr<ServingReplica>> OpenServingReplica(
    const ServerSystemOptions& options, const ServingReplicaOptions& replica);

// Debian's redis-server on a free loopback port, no persistence; rows stored
// as dim*4-byte values, read and written with pipelined MGET / MSET through
// hiredis.
absl::StatusOr<std::unique_ptr<ServerSystem>> OpenRedisSystem(
    const ServerSystemOptions& options);

// In-process: a flat hash map over one row array, served over raw loopback
// TCP, one request/response per batch; its client de-duplicates each batch
// first as RemoteClient does, so it never ships more rows than psdb.
absl::StatusOr<std::unique_ptr<ServerSystem>> OpenTcpLimitSystem(
    const ServerSystemOptions& options);

}  // namespace psdb::bench

#endif  // PSDB_TOOLS_BENCH_SERVER_SYSTEMS_H_
