// Scheduler and SchedulerServer: the control plane of a psdb cluster
// (SchedulerService in rpc/wire/psdb.proto; tools/ps-scheduler is a thin main).
// The state lives in this process (Scheduler, below) or, with
// SchedulerOptions::etcd_endpoints, in etcd (etcd_scheduler.h), where any
// number of schedulers serve one cluster; both keep the rules below.
//
//   psdb::rpc::SchedulerOptions opts;
//   opts.port = 7100; opts.server_num = 2; opts.worker_num = 2;
//   PSDB_ASSIGN_OR_RETURN(auto sched, psdb::rpc::SchedulerServer::Start(opts));
//
// Membership (Scheduler):
//  - Ranks are assigned per role in order of registration, 0-based, and
//    logged: "server node id:<id> addr:<host:port> assigned rank 0".
//  - When server_num servers and worker_num workers have registered, the map
//    becomes ready at epoch 1: "cluster ready: 2 servers, 2 workers, epoch 1".
//    worker_num == 0 is a serving-only cluster (ready with the servers).
//  - A node whose last heartbeat is older than heartbeat_timeout is marked
//    dead (logged; the map's version increases, so every node's next beat
//    sees the change). It keeps its rank: psdb does not replicate, so its
//    keys stay on it (and fail) until it comes back.
//  - Register with the id of a live node: ALREADY_EXISTS with the reason.
//    Register with the id of a dead node (same role): takes its rank back
//    (address may change), logged as a recovery. Register beyond the
//    configured count: RESOURCE_EXHAUSTED. Counts sent by the node that
//    differ from the scheduler's, or a server address already used by
//    another server: INVALID_ARGUMENT.
//  - The epoch is 1 in process (with etcd, the revision at which the ring
//    was written) and moves only when a membership change is published:
//    neither death nor recovery moves keys.
//  - Joining (RegisterRequest.join, ps-server --join): once the cluster is
//    ready a server may register to join; it gets the next unused rank
//    (ranks are never reused) and state JOINING, owning no key: "server
//    node id:<id> addr:<host:port> joining as rank 3". The map's version
//    moves, its epoch does not. Before the cluster is ready a join is
//    refused (FAILED_PRECONDITION); after it, a new server that does not
//    ask to join is refused (RESOURCE_EXHAUSTED). A JOINING server stays
//    JOINING in the map when it misses heartbeats (a dead one is not put
//    on the ring); it takes its rank back by registering again.
//  - Membership changes (live resharding, migration_coordinator.h):
//    PlanMembershipChange validates one and gives the map after it;
//    PublishMembershipChange is the commit point: add puts the JOINING
//    server on the ring (ALIVE), drain takes the server out of the map and
//    retires its rank; the epoch moves (in process: + 1, persisted with
//    the rest under recovery_path), server_num follows. A drained server's
//    heartbeat answers NOT_FOUND ("was drained ... may be stopped"), and
//    its client, seeing itself absent from a ready map, stops beating
//    instead of registering again (scheduler_client.h). With etcd the
//    same rules hold (etcd_scheduler.h), the epoch being the ring key's
//    revision, and only the leader runs a migration.
//  - StepClock gives bounded staleness (SSP): a worker that has finished
//    step s proceeds once every worker has finished s - k.
//  - RendezvousSet/Get: a write-once key-value store for collective
//    libraries' connection info (rpc/control/rendezvous.h).
//  - Barrier(name) is across all worker ranks: the n-th call of a name by
//    each worker forms one barrier. A caller that times out leaves it and
//    gets DEADLINE_EXCEEDED naming every worker that had not arrived.
//
// Thread-safety: Scheduler and SchedulerServer are thread-safe; Barrier and
// WaitReady block the calling thread (gRPC's sync server gives each call its
// own thread).
#ifndef PSDB_RPC_CONTROL_SCHEDULER_H_
#define PSDB_RPC_CONTROL_SCHEDULER_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "rpc/control/rendezvous.h"
#include "rpc/wire/psdb.pb.h"
#include "rpc/wire/tls.h"

namespace grpc {
class Channel;
}  // namespace grpc

namespace psdb::rpc {

struct SchedulerOptions {
  // Address to bind; plaintext only on loopback unless tls.insecure.
  // Default: "127.0.0.1"
  std::string host = "127.0.0.1";
  // 0 = pick a free port (see SchedulerServer::port()). Default: 0
  int port = 0;
  // Servers the cluster waits for. REQUIRED: >= 1. Default: 1
  int server_num = 1;
  // Workers the cluster waits for; 0 = serving only. Default: 0
  int worker_num = 0;
  // How often nodes beat (told to them at registration). Default: 1 s
  absl::Duration heartbeat_interval = absl::Seconds(1);
  // A node silent this long is dead. REQUIRED: > heartbeat_interval.
  // Default: 5 s
  absl::Duration heartbeat_timeout = absl::Seconds(5);
  // Recovery (PS_ENABLE_RECOVERY + PS_RECOVERY_PATH): a directory where
  // the membership (ids, roles, ranks, addresses, epoch) is written, by
  // atomic rename, after every change, and read back at start. Nodes
  // reloaded from it count as alive with a fresh heartbeat timeout, so
  // running nodes carry on beating to a restarted scheduler without
  // restarting themselves. Barrier and step-clock state is not kept. After
  // a membership change (saved epoch > 1) the saved servers win over
  // server_num, which then only names the cluster as it was formed.
  // Empty = no persistence. Default: ""
  std::string recovery_path;
  // Receives each log line (no trailing newline); null = stderr.
  // Default: null
  std::function<void(absl::string_view)> log;
  ServerTlsOptions tls;
  // How the scheduler reaches ps-servers to migrate rows (AddServer,
  // DrainServer; migration_coordinator.h). Default: plaintext (loopback)
  ClientTlsOptions server_tls;
  // Prometheus metrics over HTTP at GET /metrics (scheduler_metrics.h):
  // -1 = off, 0 = a free port (see SchedulerServer::metrics_port()).
  // Default: -1
  int metrics_port = -1;
  // Address the metrics endpoint binds; empty = `host`. Default: ""
  std::string metrics_host;

  // The control plane on etcd (etcd_scheduler.h): etcd's client endpoints
  // ("host:port"); empty = the membership lives in this process.
  // Default: {}
  std::vector<std::string> etcd_endpoints;
  ClientTlsOptions etcd_tls;
  // etcd: the cluster's name; its state lives under /psdb/<cluster>/.
  // [A-Za-z0-9_.-]{1,64}. Default: "default"
  std::string cluster = "default";
  // etcd: TTL of each node's lease and of the leader's (a node silent this
  // long is dead; a standby leads this long after the leader died).
  // REQUIRED: >= 2 s and > 2 * heartbeat_interval. Default: 10 s
  absl::Duration lease_ttl = absl::Seconds(10);
  // etcd: the address this scheduler gives as its own (the leader's
  // address in GetStatus); empty = the address it binds. Default: ""
  std::string advertise_address;
};

// One membership change: a JOINING server put on the ring, or a server
// on the ring drained out of the map.
struct MembershipChange {
  enum class Kind { kAdd, kDrain };
  Kind kind = Kind::kAdd;
  std::string node_id;
};

// "add" or "drain" (MigrationStatus.kind).
absl::string_view MembershipKindName(MembershipChange::Kind kind);

// The maps a migration moves between.
struct MembershipPlan {
  // The map now (ready, epoch >= 1).
  v1::ClusterMap current;
  // The map after the change, as PREPARE carries it: epoch 0, ready, the
  // added server ALIVE or the drained one absent, server_num following.
  v1::ClusterMap target;
};

// What ps-scheduler's service runs on: the in-process state machine
// (Scheduler, below) or etcd (EtcdScheduler, etcd_scheduler.h). Both give
// the semantics in this file's header; the etcd one keeps them across the
// loss of any one scheduler. Times are passed in so the in-process rules
// can be tested on a fake clock.
class SchedulerBackend {
 public:
  virtual ~SchedulerBackend() = default;
  virtual absl::StatusOr<v1::RegisterResponse> Register(
      const v1::RegisterRequest& req, absl::Time now) = 0;
  // Records a beat; returns the map version. NOT_FOUND for an unknown id,
  // FAILED_PRECONDITION for a node marked dead (it must register again).
  virtual absl::StatusOr<uint64_t> Heartbeat(absl::string_view node_id,
                                             absl::Time now) = 0;
  // The map now.
  virtual absl::StatusOr<v1::ClusterMap> CurrentMap() = 0;
  // The map once ready; DEADLINE_EXCEEDED naming the missing counts at
  // `deadline`, UNAVAILABLE when the scheduler closes.
  virtual absl::StatusOr<v1::ClusterMap> WaitReady(absl::Time deadline) = 0;
  // The map once its version is above `after_version`; DEADLINE_EXCEEDED at
  // `deadline`, UNAVAILABLE when the scheduler closes.
  virtual absl::StatusOr<v1::ClusterMap> WaitForMapAfter(
      uint64_t after_version, absl::Time deadline) = 0;
  // `sequence`: which use of `name` by this worker (from 1); 0 = counted
  // by the scheduler (in-process only).
  virtual absl::Status Barrier(absl::string_view name,
                               absl::string_view node_id, int64_t sequence,
                               absl::Time deadline) = 0;
  // SSP clock: records that worker `node_id` finished `finished_step`
  // (never decreasing; the same step again is the same call), then waits
  // until every worker rank has finished finished_step - staleness (an
  // unregistered rank has finished 0). Returns the slowest finished step;
  // DEADLINE_EXCEEDED names the workers behind.
  virtual absl::StatusOr<int64_t> StepClock(absl::string_view node_id,
                                            int64_t finished_step,
                                            int staleness,
                                            absl::Time deadline) = 0;
  virtual v1::SchedulerStatus Status() = 0;
  // Validates `change` against the map now and returns both maps.
  // NotFound: no such server. FailedPrecondition: the cluster is not
  // ready; add: the node is not JOINING or not alive; drain: the node is
  // not ALIVE on the ring or is its last server; either: a DEAD server on
  // the ring (a migration would lose or strand its rows).
  virtual absl::StatusOr<MembershipPlan> PlanMembershipChange(
      const MembershipChange& change) = 0;
  // The commit point of a migration: applies `change` if the map's epoch
  // is still `expected_epoch` and the change is still valid (else
  // FailedPrecondition, nothing changes), moving the epoch; returns the
  // published map.
  virtual absl::StatusOr<v1::ClusterMap> PublishMembershipChange(
      const MembershipChange& change, uint64_t expected_epoch) = 0;
  // Called by the server every heartbeat_interval / 4 (the in-process
  // backend marks silent nodes dead here).
  virtual void Tick(absl::Time now) = 0;
  // Wakes every waiter with UNAVAILABLE; later waits fail at once.
  virtual void Close() = 0;

  // Rendezvous (rpc/control/rendezvous.h): write a key once; wait for keys
  // and read them (DEADLINE_EXCEEDED naming the missing ones).
  virtual absl::Status RendezvousSet(absl::string_view key,
                                     absl::string_view value) = 0;
  virtual absl::StatusOr<std::vector<std::string>> RendezvousGet(
      absl::Span<const std::string> keys, absl::Time deadline) = 0;
};

// The membership state machine in this process, without transport.
class Scheduler final : public SchedulerBackend {
 public:
  // REQUIRES: options validated by ValidateSchedulerOptions.
  explicit Scheduler(const SchedulerOptions& options);
  Scheduler(const Scheduler&) = delete;
  Scheduler& operator=(const Scheduler&) = delete;

  absl::StatusOr<v1::RegisterResponse> Register(const v1::RegisterRequest& req,
                                                absl::Time now) override;
  absl::StatusOr<uint64_t> Heartbeat(absl::string_view node_id,
                                     absl::Time now) override;
  v1::ClusterMap Map() const;
  absl::StatusOr<v1::ClusterMap> CurrentMap() override { return Map(); }
  absl::StatusOr<v1::ClusterMap> WaitReady(absl::Time deadline) override;
  absl::StatusOr<v1::ClusterMap> WaitForMapAfter(uint64_t after_version,
                                                 absl::Time deadline) override;
  // `sequence` is ignored: the n-th call of a name by each worker forms
  // one barrier.
  absl::Status Barrier(absl::string_view name, absl::string_view node_id,
                       int64_t sequence, absl::Time deadline) override;
  absl::Status Barrier(absl::string_view name, absl::string_view node_id,
                       absl::Time deadline) {
    return Barrier(name, node_id, 0, deadline);
  }
  absl::StatusOr<int64_t> StepClock(absl::string_view node_id,
                                    int64_t finished_step, int staleness,
                                    absl::Time deadline) override;
  v1::SchedulerStatus Status() override;
  absl::StatusOr<MembershipPlan> PlanMembershipChange(
      const MembershipChange& change) override;
  absl::StatusOr<v1::ClusterMap> PublishMembershipChange(
      const MembershipChange& change, uint64_t expected_epoch) override;
  void Tick(absl::Time now) override { CheckHeartbeats(now); }
  // Marks alive nodes whose last beat is before now - heartbeat_timeout
  // dead; returns their ids.
  std::vector<std::string> CheckHeartbeats(absl::Time now);
  // Loads the membership saved under options.recovery_path, if any
  // (InvalidArgument when it contradicts the options: other counts).
  absl::Status Recover(absl::Time now);
  void Close() override;

  absl::Status RendezvousSet(absl::string_view key,
                             absl::string_view value) override {
    return rendezvous_.Set(key, value);
  }
  absl::StatusOr<std::vector<std::string>> RendezvousGet(
      absl::Span<const std::string> keys, absl::Time deadline) override {
    return rendezvous_.Get(keys, deadline);
  }

 private:
  struct Node {
    std::string id;
    v1::NodeRole role = v1::NODE_ROLE_UNSPECIFIED;
    int rank = 0;
    std::string address;
    bool alive = true;
    // A server registered to join, not yet on the ring.
    bool joining = false;
    absl::Time last_beat;
    uint64_t incarnation = 0;
  };
  struct BarrierState {
    uint64_t generation = 0;
    std::vector<std::string> arrived;  // node ids, this generation
  };

  void Log(absl::string_view line) const;
  bool ReadyLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Writes the membership under recovery_path (no-op without one).
  absl::Status PersistLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  std::string RecoveryFile() const;
  v1::ClusterMap MapLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  std::string MissingLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const SchedulerOptions options_;
  mutable absl::Mutex mu_;
  // Registered nodes by id; ranks index into servers_/workers_.
  absl::flat_hash_map<std::string, Node> nodes_ ABSL_GUARDED_BY(mu_);
  std::vector<std::string> servers_ ABSL_GUARDED_BY(mu_);  // by rank
  std::vector<std::string> workers_ ABSL_GUARDED_BY(mu_);  // by rank
  // Servers on the ring (the map's server_num) and the next server rank.
  int server_num_ ABSL_GUARDED_BY(mu_);
  int next_server_rank_ ABSL_GUARDED_BY(mu_) = 0;
  // Drained node ids -> why their heartbeats are refused (not persisted: a
  // restarted scheduler answers them "not registered").
  absl::flat_hash_map<std::string, std::string> drained_ ABSL_GUARDED_BY(mu_);
  uint64_t epoch_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t version_ ABSL_GUARDED_BY(mu_) = 0;
  bool closed_ ABSL_GUARDED_BY(mu_) = false;
  absl::flat_hash_map<std::string, BarrierState> barriers_ ABSL_GUARDED_BY(mu_);
  // Finished step per worker node id (SSP).
  absl::flat_hash_map<std::string, int64_t> clocks_ ABSL_GUARDED_BY(mu_);
  int64_t SlowestLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  MemoryRendezvous rendezvous_;
};

// InvalidArgument naming the bad field.
absl::Status ValidateSchedulerOptions(const SchedulerOptions& options);

// What both backends share; not for other modules.
namespace scheduler_internal {
// "server" or "worker".
absl::string_view RoleWord(v1::NodeRole role);
// "1 server", "2 workers".
std::string Plural(int n, absl::string_view word);
// One log line through options.log, or "ps-scheduler: <line>" on stderr.
void LogLine(const SchedulerOptions& options, absl::string_view line);
// The checks of a registration that need no state: node id, role, a
// server's address, counts that contradict the scheduler's.
absl::Status ValidateRegistration(const SchedulerOptions& options,
                                  const v1::RegisterRequest& req);
// A barrier's name: 1..256 bytes.
absl::Status ValidateBarrierName(absl::string_view name);
// A step clock call's numbers: both >= 0.
absl::Status ValidateStepClock(int64_t finished_step, int staleness);
// The rules of PlanMembershipChange that need only the map: `now` after
// `change` (epoch 0), or the error. Liveness of a JOINING server is the
// backend's to check (the map shows it JOINING either way).
absl::StatusOr<v1::ClusterMap> MapAfterChange(const v1::ClusterMap& now,
                                              const MembershipChange& change);
}  // namespace scheduler_internal

// A SchedulerBackend behind gRPC (an EtcdScheduler when
// options.etcd_endpoints is set, else a Scheduler), with a thread that
// ticks it every heartbeat_interval / 4, and (when options.metrics_port >=
// 0) its membership as Prometheus metrics over HTTP.
//
// It serves the standard grpc.health.v1 health service (Kubernetes' gRPC
// probes, grpc_health_probe): Check(service="") answers SERVING from the
// moment Start returns, before any node has registered, and NOT_SERVING
// once Shutdown begins. A standby of an etcd cluster is SERVING too (it
// answers every call); GetStatus says whether it leads.
//
// AddServer / DrainServer run one migration at a time in this process
// (migration_coordinator.h) on the calling thread: validated by
// PlanMembershipChange, published by PublishMembershipChange. A second
// call while one runs is refused with FAILED_PRECONDITION naming the
// running one; GetStatus.migration is the running or last one. Shutdown
// cancels a running migration (it aborts unless its map is published).
// With etcd only the leader runs one (a standby refuses with
// FAILED_PRECONDITION naming the leader).
class SchedulerServer {
 public:
  static absl::StatusOr<std::unique_ptr<SchedulerServer>> Start(
      const SchedulerOptions& options);
  ~SchedulerServer();  // Shutdown() if still running.
  SchedulerServer(const SchedulerServer&) = delete;
  SchedulerServer& operator=(const SchedulerServer&) = delete;

  int port() const;
  // host:port (IPv6 hosts in brackets).
  std::string address() const;
  // The bound metrics port, -1 when options.metrics_port was -1.
  int metrics_port() const;
  // host:port of the metrics endpoint; empty when off.
  std::string metrics_address() const;
  SchedulerBackend* backend();
  // A channel to this scheduler within the process (gRPC's in-process
  // transport: no socket, no credentials). For in-process callers such as
  // the fuzz targets (tests/fuzz/). REQUIRES: before Shutdown.
  std::shared_ptr<grpc::Channel> InProcessChannel() const;

  // Releases blocked calls with UNAVAILABLE, stops serving. Idempotent.
  void Shutdown();

 private:
  class Impl;
  explicit SchedulerServer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace psdb::rpc

#endif  // PSDB_RPC_CONTROL_SCHEDULER_H_
