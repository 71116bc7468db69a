// SchedulerClient: a node's side of SchedulerService (rpc/control/scheduler.h):
// register, beat, fetch and watch the cluster map, wait at barriers, and
// JoinClusterAsServer, what ps-server does with PS_SCHED_HOST/PORT or
// PS_SCHED_ADDRESSES. (A worker joins through rpc/client/cluster_worker.h,
// which uses this client.)
//
//   PSDB_ASSIGN_OR_RETURN(auto sched, SchedulerClient::Open({.address = a}));
//   PSDB_ASSIGN_OR_RETURN(auto reg, sched->Register(req));
//   sched->StartHeartbeats();
//   PSDB_RETURN_IF_ERROR(sched->Barrier("step-0", absl::Seconds(60)));
//
// Heartbeats run on a background thread every interval the scheduler gave at
// registration. When the scheduler answers that this node was marked dead
// (or does not know it, e.g. it restarted), the thread registers again with
// the same id, address, role and incarnation, taking the rank back. The
// exception is a drained server (ps-scheduler drain-server): when the
// scheduler does not know it (NOT_FOUND) and its map is ready and lists no
// server with this node id, the server was drained: the thread logs
// "psdb: node id:<id> drained: this server owns no keys and may be
// stopped" and stops beating (drained() turns true); it never takes a
// rank again by accident.
//
// Several schedulers: `address` may list several ("h1:p1,h2:p2"), ps-
// schedulers that share their state in etcd, any of which answers every
// call. One channel per address. A call goes first to the scheduler that
// answered last; when it fails UNAVAILABLE (nothing listening, the
// scheduler shut down or was killed while the call was blocked in it,
// "Socket closed") it is re-sent to the next address, and so on round the
// list, sleeping a backoff (50 ms doubling to 1 s) after each full round,
// until the call's own deadline. Re-sending is safe because every call is
// the same call when repeated: Register carries this client's incarnation
// (random, fixed per client), the n-th Barrier of a name carries sequence n
// (the same on every re-send), StepClock names its step, Heartbeat and
// GetClusterMap change nothing. A Barrier or StepClock re-sent after a
// fail-over waits only for what is left of its timeout. With one address
// GetClusterMap, Barrier and StepClock are re-sent to it (behind one
// address may be a Service over several schedulers, whose next connection
// reaches another); a Register waits for the scheduler to come up; a
// Heartbeat fails at once (the next beat tries again). Channels ping every
// 10 s, so a call blocked in a scheduler whose host died fails UNAVAILABLE,
// and is re-sent, within about 15 s.
//
// Map watch: StartMapWatch (StartHeartbeats starts it too) keeps a
// WatchClusterMap stream open on a background thread and holds the newest
// map it, a registration or GetClusterMap delivered (latest_map,
// WaitForMapVersion). When the stream fails it is opened again, on the
// next address after UNAVAILABLE, asking for versions above the newest
// seen. A registration that answers with an older map than the one held
// (a scheduler that restarted without its state) replaces it and reopens
// the stream from there.
//
// Thread-safety: thread-safe.
#ifndef PSDB_RPC_CONTROL_SCHEDULER_CLIENT_H_
#define PSDB_RPC_CONTROL_SCHEDULER_CLIENT_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "rpc/control/node_config.h"
#include "rpc/wire/psdb.pb.h"
#include "rpc/wire/tls.h"
#include "shard/cluster_map.h"

namespace psdb::rpc {

struct SchedulerClientOptions {
  // "host:port" of ps-scheduler, or several separated by commas
  // ("h1:p1,h2:p2": schedulers sharing one etcd; whitespace around an
  // address is ignored). REQUIRED.
  std::string address;
  // Deadline of one call (Register waits this long for the scheduler to come
  // up). Default: 30 s
  absl::Duration call_timeout = absl::Seconds(30);
  ClientTlsOptions tls;
};

class SchedulerClient {
 public:
  // Creates one channel per address (connects lazily). InvalidArgument on
  // an empty address or an empty entry in the list.
  static absl::StatusOr<std::unique_ptr<SchedulerClient>> Open(
      const SchedulerClientOptions& options);
  ~SchedulerClient();  // Stops heartbeats.
  SchedulerClient(const SchedulerClient&) = delete;
  SchedulerClient& operator=(const SchedulerClient&) = delete;

  // Registers this node (waiting up to wait + call_timeout for a
  // scheduler to be reachable) and remembers the request for heartbeats and
  // re-registration. The request's incarnation is replaced by this
  // client's (incarnation()).
  absl::StatusOr<v1::RegisterResponse> Register(
      const v1::RegisterRequest& req,
      absl::Duration wait = absl::ZeroDuration());
  // The map now (wait = 0) or once ready, waiting up to `wait`.
  absl::StatusOr<v1::ClusterMap> GetClusterMap(
      absl::Duration wait = absl::ZeroDuration());
  // The n-th call with a name sends sequence n (BarrierRequest.sequence),
  // whatever became of the earlier ones. REQUIRES: Register succeeded (the
  // barrier is joined as this node).
  absl::Status Barrier(absl::string_view name, absl::Duration timeout);
  // SSP: reports that this worker finished `finished_step` and waits until
  // every worker has finished finished_step - staleness; returns the
  // slowest worker's finished step. REQUIRES: Register succeeded.
  absl::StatusOr<int64_t> StepClock(int64_t finished_step, int staleness,
                                    absl::Duration timeout);
  // One beat now; returns the map version.
  absl::StatusOr<uint64_t> Heartbeat();

  // Background beats at the registered interval, and the map watch
  // (StartMapWatch). REQUIRES: Register succeeded. StopHeartbeats waits for
  // the beat thread (the watch goes on until StopMapWatch or destruction);
  // both are idempotent.
  void StartHeartbeats();
  void StopHeartbeats();

  // Opens the WatchClusterMap stream on a background thread (needs no
  // registration). StopMapWatch cancels the stream and waits for the
  // thread; both are idempotent.
  void StartMapWatch();
  void StopMapWatch();
  // The newest map received (from the watch, a registration or
  // GetClusterMap); nullopt before any.
  std::optional<v1::ClusterMap> latest_map() const;
  // Waits up to `timeout` until latest_map() has a version above `above`
  // and returns it; DEADLINE_EXCEEDED otherwise. Without a running watch
  // only registrations and GetClusterMap calls move it.
  absl::StatusOr<v1::ClusterMap> WaitForMapVersion(uint64_t above,
                                                   absl::Duration timeout);
  // The newest map version this client heard of (a beat, a registration, a
  // fetched or watched map); 0 before any. A registration sets it to the
  // registering scheduler's version, even a lower one.
  uint64_t map_version() const;
  // This client's incarnation: random, nonzero, sent with every Register.
  uint64_t incarnation() const;
  // The scheduler addresses, in the order given.
  const std::vector<std::string>& addresses() const;
  // The address calls try first: the one that answered last.
  std::string active_address() const;
  // Registrations after the first (re-joins after being marked dead).
  int reregistrations() const;
  // Whether the heartbeats found this server drained (header comment).
  bool drained() const;

  // Rendezvous (rpc/control/rendezvous.h), no registration needed: writes
  // `key` once (the same value again is OK, so a re-send is safe), and
  // waits up to `timeout` for every key of `keys`, returning their values
  // in order (DEADLINE_EXCEEDED names the missing keys). Both are re-sent
  // on UNAVAILABLE like GetClusterMap.
  absl::Status RendezvousSet(absl::string_view key, absl::string_view value);
  absl::StatusOr<std::vector<std::string>> RendezvousGet(
      const std::vector<std::string>& keys, absl::Duration timeout);

  class Impl;

 private:
  explicit SchedulerClient(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// Where a ps-server sits in the cluster.
struct ServerPlacement {
  int rank = 0;
  // The ready map (rpc/wire/cluster_map_proto.h): every server, its
  // epoch.
  ClusterMap cluster;
  // The cluster's PS_WORKER_NUM (sync mode aggregates over them).
  int worker_num = 0;
  bool recovered = false;
};

// Registers a server at `address` with the scheduler of `config`, starts
// its heartbeats and waits up to `wait_ready` for the cluster to form.
// With config.join the server joins the running cluster (RegisterRequest.
// join): it gets a new rank, JOINING in the map (not on the ring) until
// AddServer; a cluster that is not ready yet refuses it
// (FAILED_PRECONDITION).
// The returned client must live as long as the server (it beats).
absl::StatusOr<std::pair<std::unique_ptr<SchedulerClient>, ServerPlacement>>
JoinClusterAsServer(const NodeConfig& config, absl::string_view address,
                    const ClientTlsOptions& tls, absl::Duration wait_ready);

}  // namespace psdb::rpc

#endif  // PSDB_RPC_CONTROL_SCHEDULER_CLIENT_H_
