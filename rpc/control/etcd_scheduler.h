// EtcdScheduler: ps-scheduler's state in etcd (ps-scheduler --etcd), so
// any number of schedulers serve one cluster and the loss of any one
// process loses nothing: the membership, ranks, map, barriers and step
// clock are etcd keys, liveness is etcd leases, and every scheduler answers
// every call by reading and writing etcd (compare-and-set transactions,
// watches). One scheduler leads (an etcd lease-bound key); the leader marks
// nodes whose lease expired dead and publishes the map; the others stand
// by and take over once the dead leader's lease ends (lease_ttl after its
// last renewal, plus etcd's expiry check, at most 500 ms).
//
// Every write is a compare-and-set transaction that EtcdClient may send
// twice (etcd_client.h); one whose compare fails on its own earlier commit
// (the key holds this very lease, or this node's arrival) counts as won.
//
// Keys, under /psdb/<cluster>/:
//   config                     "server_num=N worker_num=M", written once;
//                              a scheduler with other counts is refused
//   ranks/<role>/<rank>        the node id holding a rank (never deleted:
//                              ranks are created in a transaction that
//                              requires the rank key and the node key to
//                              be absent, so no rank is given twice)
//   members/nodes/<id>         NodeEntry: role, rank, address, alive/dead
//   addresses/<host:port>      the server node id holding that address,
//                              claimed in the registration's transaction
//   members/map                the ring (ClusterMap: servers and workers
//                              by rank, server_num), written once every
//                              rank is taken and again by each published
//                              membership change; the map's epoch is this
//                              key's etcd revision
//   alive/<id>                 the node's incarnation, bound to the node's
//                              own lease (TTL lease_ttl), renewed by its
//                              heartbeats: a killed node's key disappears
//                              after the TTL and the leader marks it dead
//   leader                     the leading scheduler's address, bound to
//                              its lease
//   barriers/<name>/<seq>      "open"/"released" and the workers arrived
//                              in the seq-th barrier of that name; once
//                              released it is bound to a lease of
//                              max(1 min, 6 x lease_ttl), long enough for
//                              a call re-sent after a fail-over to find
//                              it, then it goes
//   clocks/<id>                the worker's finished step (SSP/BSP)
//   rendezvous/<key>           a collective's connection info, written
//                              once (rendezvous.h); never deleted: keys
//                              are scoped by job and attempt
//
// Live resharding (scheduler.h's rules): a joining server takes the
// lowest free rank (beyond every rank key, which are never deleted) in a
// transaction that also requires members/map unchanged; it is in
// members/nodes/ but not in the ring, so the map shows it JOINING. A
// membership change is published by rewriting members/map in a
// transaction comparing its mod revision with the epoch the migration
// started from (the new epoch is the transaction's revision); a drain
// deletes the node's members/nodes/, alive/ and addresses/ keys in the
// same transaction (its ranks/ key stays: the rank is retired). Only the
// leading scheduler runs a migration (SchedulerServer).
//
// The map a node gets is members/ read at one revision: epoch = the ring's
// revision (it changes only when ownership changes), version = the newest
// revision under members/ (any registration, address change or death), so
// a node watching members/ (WatchClusterMap) learns of every change.
//
// Thread-safety: thread-safe. Blocking calls wait on etcd watches in
// slices of at most one second, so Close() releases them promptly.
#ifndef PSDB_RPC_CONTROL_ETCD_SCHEDULER_H_
#define PSDB_RPC_CONTROL_ETCD_SCHEDULER_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "rpc/control/etcd_client.h"
#include "rpc/control/scheduler.h"
#include "rpc/wire/psdb.pb.h"

namespace psdb::rpc {

class EtcdScheduler final : public SchedulerBackend {
 public:
  // Connects to options.etcd_endpoints and records (or checks) the
  // cluster's counts: InvalidArgument when the cluster in etcd was formed
  // with other counts, UNAVAILABLE naming each endpoint when etcd does not
  // answer. REQUIRES: options validated by ValidateSchedulerOptions.
  static absl::StatusOr<std::unique_ptr<EtcdScheduler>> Open(
      const SchedulerOptions& options);
  ~EtcdScheduler() override;  // Close()

  // Starts the thread that campaigns for the lead and, while leading,
  // marks expired nodes dead. `advertise` is this scheduler's address as
  // others should see it. Called once, after the scheduler serves.
  void StartCampaign(std::string advertise);

  absl::StatusOr<v1::RegisterResponse> Register(const v1::RegisterRequest& req,
                                                absl::Time now) override;
  absl::StatusOr<uint64_t> Heartbeat(absl::string_view node_id,
                                     absl::Time now) override;
  absl::StatusOr<v1::ClusterMap> CurrentMap() override;
  absl::StatusOr<v1::ClusterMap> WaitReady(absl::Time deadline) override;
  absl::StatusOr<v1::ClusterMap> WaitForMapAfter(uint64_t after_version,
                                                 absl::Time deadline) override;
  // REQUIRES sequence >= 1 (InvalidArgument otherwise): a call re-sent to
  // another scheduler must name the barrier it joined.
  absl::Status Barrier(absl::string_view name, absl::string_view node_id,
                       int64_t sequence, absl::Time deadline) override;
  absl::StatusOr<int64_t> StepClock(absl::string_view node_id,
                                    int64_t finished_step, int staleness,
                                    absl::Time deadline) override;
  v1::SchedulerStatus Status() override;
  absl::StatusOr<MembershipPlan> PlanMembershipChange(
      const MembershipChange& change) override;
  absl::StatusOr<v1::ClusterMap> PublishMembershipChange(
      const MembershipChange& change, uint64_t expected_epoch) override;
  void Tick(absl::Time) override {}
  // Stops campaigning and revokes this scheduler's lease (a standby leads
  // at once); waiting calls end with UNAVAILABLE.
  void Close() override;

  // Keys under rendezvous/ (rendezvous.h); Set is a compare-and-set
  // transaction, Get one transaction reading every key, then a watch.
  absl::Status RendezvousSet(absl::string_view key,
                             absl::string_view value) override;
  absl::StatusOr<std::vector<std::string>> RendezvousGet(
      absl::Span<const std::string> keys, absl::Time deadline) override;

  bool leader() const;

 private:
  // A registration, barrier or clock write loses its compare-and-set only
  // when another scheduler wrote the same key in between; this many tries
  // is far beyond any real contention.
  static constexpr int kMaxCasAttempts = 64;

  struct MapRead {
    v1::ClusterMap map;
    int64_t revision = 0;  // the read's revision
  };

  EtcdScheduler(const SchedulerOptions& options,
                std::unique_ptr<EtcdClient> etcd);
  std::string Key(absl::string_view suffix) const;
  void Log(absl::string_view line) const;
  bool closed() const;
  // How long a released barrier's key stays (for re-sent calls).
  absl::Duration ReleasedBarrierTtl() const;
  // Waits until `key` (with `prefix`, a key under it) changes after
  // `revision`, `deadline` passes or Close() is called; OK in all three
  // cases (the caller reads again and decides), an error only when etcd
  // fails otherwise.
  absl::Status AwaitChange(absl::string_view key, bool prefix, int64_t revision,
                           absl::Time deadline);

  absl::StatusOr<MapRead> ReadMap();
  // Writes members/map once every rank is taken (idempotent).
  absl::Status PublishMapIfComplete();
  // Leader: marks nodes whose alive/ key is gone dead. Returns the
  // revision of its read of alive/.
  absl::StatusOr<int64_t> MarkExpiredDead();
  // "worker rank 1 (node id:w1<detail>, dead)" for every worker rank for
  // which `behind(node_id)` gives a detail, and "worker rank 2 (not
  // registered)" for every rank nobody holds.
  absl::StatusOr<std::string> DescribeWorkers(
      const std::function<std::optional<std::string>(const std::string&)>&
          behind);
  absl::StatusOr<v1::NodeEntry> RegisteredWorker(absl::string_view node_id,
                                                 absl::string_view what);
  void Campaign();

  const SchedulerOptions options_;
  const std::string prefix_;  // "/psdb/<cluster>/"
  std::unique_ptr<EtcdClient> etcd_;

  mutable absl::Mutex mu_;
  bool closed_ ABSL_GUARDED_BY(mu_) = false;
  bool leader_ ABSL_GUARDED_BY(mu_) = false;
  std::string advertise_ ABSL_GUARDED_BY(mu_);
  int64_t lease_ ABSL_GUARDED_BY(mu_) = 0;  // this scheduler's
  std::thread campaign_;
};

}  // namespace psdb::rpc

#endif  // PSDB_RPC_CONTROL_ETCD_SCHEDULER_H_
