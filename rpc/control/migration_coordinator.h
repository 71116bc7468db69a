// MigrationCoordinator: the scheduler's side of one live membership change
// (AddServer / DrainServer in rpc/wire/psdb.proto): it drives the servers
// through the phases of ParameterService.Reshard and publishes the map at
// the commit point. The protocol, from here:
//
//   1. PREPARE (a fresh random non-zero migration id, the target map at
//      epoch 0) on every participant: the servers on the ring of the map
//      now or of the target (add: every server of the old ring and the
//      joining one; drain: every server of the old ring).
//   2. COPY on every source (a server that loses keys: add = every server
//      of the old ring, drain = the drained one), in parallel; meanwhile
//      STATUS every poll_interval on each source keeps the progress (the
//      sum of rows_moved / rows_to_move over the sources).
//   3. CLOSE on every server of the old ring, in parallel (synchronous
//      training: no step is split between the two maps).
//   4. HANDOFF on every source, in parallel.
//   5. publish(): the scheduler's compare-and-publish of the target map
//      (a new epoch). This is the commit point: before it any failure
//      aborts (ABORT on every participant that answers; the map is
//      unchanged; the status says "aborted" with the error), after it
//      there is no going back.
//   6. COMMIT (the published map, its epoch set) on every participant,
//      each retried until it answers OK or commit_timeout passes; one that
//      never does is named in the error (the map stays published).
//
// Thread-safety: Run once, from one thread; status() and Cancel() from any
// thread while it runs.
#ifndef PSDB_RPC_CONTROL_MIGRATION_COORDINATOR_H_
#define PSDB_RPC_CONTROL_MIGRATION_COORDINATOR_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "rpc/control/scheduler.h"
#include "rpc/wire/psdb.grpc.pb.h"
#include "rpc/wire/psdb.pb.h"
#include "rpc/wire/tls.h"

namespace psdb::rpc {

struct MigrationOptions {
  // Rows per Migrate call (ReshardRequest.batch_rows); 0 = the server's
  // default (1024). Default: 0
  int32_t batch_rows = 0;
  // Rows per second per source; 0 = no limit. Default: 0
  int64_t max_rows_per_second = 0;
  // To reach the servers.
  ClientTlsOptions tls;
  // Deadline of PREPARE, STATUS, ABORT and each COMMIT attempt.
  // Default: 30 s
  absl::Duration call_timeout = absl::Seconds(30);
  // Deadline of COPY and of HANDOFF (they move rows). Default: 1 h
  absl::Duration phase_timeout = absl::Hours(1);
  // How often STATUS is asked during COPY. Default: 200 ms
  absl::Duration poll_interval = absl::Milliseconds(200);
  // How long COMMIT is retried on a server that does not answer.
  // Default: 5 min
  absl::Duration commit_timeout = absl::Minutes(5);
  // Receives each log line; null = stderr ("ps-scheduler: <line>").
  // Default: null
  std::function<void(absl::string_view)> log;
};

class MigrationCoordinator {
 public:
  // Publishes the target map (the commit point) and returns it with its
  // epoch; an error means nothing was published.
  using Publish = std::function<absl::StatusOr<v1::ClusterMap>()>;

  // `change` names the migration in its status; `plan` holds the maps.
  MigrationCoordinator(const MigrationOptions& options,
                       const MembershipChange& change, MembershipPlan plan);
  MigrationCoordinator(const MigrationCoordinator&) = delete;
  MigrationCoordinator& operator=(const MigrationCoordinator&) = delete;

  // Runs the protocol above. Returns the final status (phase "done"), or
  // the error that aborted it (status() then says "aborted" and why) or,
  // after the publish, the servers that did not acknowledge COMMIT.
  absl::StatusOr<v1::MigrationStatus> Run(const Publish& publish);

  // The progress now (the migration id, phase, rows summed over the
  // sources, epochs).
  v1::MigrationStatus status() const;

  // Ends the calls in flight (CANCELLED) and fails the next ones: before
  // the publish the migration aborts; after it, COMMIT stops being retried.
  void Cancel();

 private:
  struct Server {
    std::string node_id;
    std::string address;
    int rank = 0;
    bool source = false;
    // On the ring of the map now (CLOSE goes to these).
    bool old_ring = false;
    // Opened by Run before the first call; one channel per server.
    std::unique_ptr<v1::ParameterService::Stub> stub;
  };

  void Log(absl::string_view line) const;
  // Ends the phase status_ names (its seconds into status_) and starts
  // `phase`.
  void SetPhase(absl::string_view phase);
  // One Reshard call to `server`; `resp` may be null.
  absl::Status Call(const Server& server, const v1::ReshardRequest& req,
                    absl::Duration timeout, v1::ReshardResponse* resp);
  // `phase` on every server of `servers` in parallel; the first error,
  // naming its server. Responses by index when `resps` is set.
  absl::Status CallAll(const std::vector<const Server*>& servers,
                       const v1::ReshardRequest& req, absl::Duration timeout,
                       std::vector<v1::ReshardResponse>* resps);
  // Sums the sources' counters into the status.
  void RecordProgress(const std::vector<v1::ReshardResponse>& sources);
  absl::Status Abort(const absl::Status& why);
  std::vector<const Server*> Sources() const;
  std::vector<const Server*> OldRing() const;
  std::vector<const Server*> Participants() const;

  const MigrationOptions options_;
  const MembershipChange change_;
  const MembershipPlan plan_;
  std::vector<Server> servers_;
  uint64_t id_ = 0;

  mutable absl::Mutex mu_;
  v1::MigrationStatus status_ ABSL_GUARDED_BY(mu_);
  // When the phase status_ names began (Run's start for "prepare").
  absl::Time phase_start_ ABSL_GUARDED_BY(mu_) = absl::InfiniteFuture();
  bool cancelled_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<grpc::ClientContext*> in_flight_ ABSL_GUARDED_BY(mu_);
};

}  // namespace psdb::rpc

#endif  // PSDB_RPC_CONTROL_MIGRATION_COORDINATOR_H_
