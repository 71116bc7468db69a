// Resharder: one ps-server's side of live resharding (the protocol is in
// rpc/control/README.md; the phases in rpc/wire/psdb.proto's ReshardPhase).
// Internal to psdb_server: PsServer's service owns one, routes every keyed
// request through Enter() and the Reshard and Migrate RPCs to it.
//
// It holds the server's cluster map (replaced at COMMIT) and, while a
// migration is prepared, its target ring. Roles in one migration:
//  - source: owns keys under the current map that the target gives to
//    another server. From PREPARE it records every handed-over key a
//    request touches (PREPARE waits for the requests admitted before it
//    and adds the keys of synchronous rounds still waiting); COPY streams its
//    handed-over rows (the keys present when it starts, read as they are when
//    sent) to their new owners (Migrate); HANDOFF holds new requests for
//    handed-over keys, waits for those running, and re-sends every touched row;
//    COMMIT installs the published map, answers, and leaves the rows it handed
//    over to the store's background deletes (Store::DeleteRowsLater; the
//    next PREPARE waits for them). Rows travel encoded
//    (Store::ReadEncodedRows / IngestRows).
//  - every server of the old map, at CLOSE: stops starting new synchronous
//    steps (a sync push of a step no push of which has arrived yet is held)
//    and waits for the steps already started to be applied (no round left
//    in the SyncAggregator), so each synchronous round is wholly under one
//    map.
//  - destination: accepts Migrate rows for the keys the target gives it;
//    ABORT deletes every row it holds but does not own.
// Held requests wait until COMMIT or ABORT (or their deadline) and then run
// against the map of that moment: routed with the old map after a COMMIT,
// they are refused with FAILED_PRECONDITION and the new epoch, and the
// client re-sends them. A request routed with a newer epoch than the
// server's (the client saw the published map before this server's COMMIT)
// is held the same way while a migration is prepared.
//
// Thread-safety: thread-safe.
#ifndef PSDB_RPC_SERVER_RESHARDER_H_
#define PSDB_RPC_SERVER_RESHARDER_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "psdb/store.h"
#include "rpc/server/sync_aggregator.h"
#include "rpc/wire/psdb.grpc.pb.h"
#include "rpc/wire/tls.h"
#include "shard/cluster_map.h"

namespace psdb::rpc::internal {

// One table's keys of a request.
struct GateRead {
  absl::string_view table;
  absl::Span<const uint64_t> keys;
};

// A keyed request as the gate sees it.
struct GateRequest {
  absl::string_view table;
  absl::Span<const uint64_t> keys;
  // A multi-table read's other tables (PullTables), gated as `table` is.
  std::vector<GateRead> more;
  // The epoch the client routed with; 0 = unchecked.
  uint64_t client_epoch = 0;
  // A synchronous push of this step (sync mode only).
  std::optional<int64_t> sync_step;
};

// fn(table, keys) for the request's first read and each of `more`.
template <typename Fn>
void ForEachRead(const GateRequest& req, Fn fn) {
  fn(req.table, req.keys);
  for (const GateRead& read : req.more) fn(read.table, read.keys);
}

class Resharder {
 public:
  // `store` and `sync` (null in async mode) outlive the resharder;
  // `peer_tls` reaches other servers.
  Resharder(ClusterMap map, ServerId self, Store* store,
            const SyncAggregator* sync, ClientTlsOptions peer_tls,
            size_t max_batch_keys);
  ~Resharder();
  Resharder(const Resharder&) = delete;
  Resharder& operator=(const Resharder&) = delete;

  // The map the server routes with now.
  std::shared_ptr<const ClusterMap> map() const;
  // Whether a migration is prepared here (PREPARE to COMMIT or ABORT).
  bool migrating() const { return active(); }

  // Leaves the gate when destroyed (a request that entered it).
  class Pass {
   public:
    Pass() = default;
    // `generation`: the migration it was admitted under (tracked as `sync`
    // / `leaving`), or 0 when none was prepared. A later PREPARE waits for
    // every request admitted before it that is not tracked by it.
    Pass(Resharder* owner, uint64_t generation, bool sync, bool leaving)
        : owner_(owner),
          generation_(generation),
          sync_(sync),
          leaving_(leaving) {}
    Pass(Pass&& other) noexcept
        : owner_(other.owner_),
          generation_(other.generation_),
          sync_(other.sync_),
          leaving_(other.leaving_) {
      other.owner_ = nullptr;
    }
    Pass& operator=(Pass&&) = delete;
    ~Pass();

   private:
    Resharder* owner_ = nullptr;
    uint64_t generation_ = 0;
    bool sync_ = false;
    bool leaving_ = false;
  };

  // Admits a keyed request: a pass to keep until it is answered, or
  // nullopt when it must be held (see above). A held request takes no
  // thread: `resume` is called once, when the migration commits or
  // aborts, and the caller then calls TryEnter again.
  absl::StatusOr<std::optional<Pass>> TryEnter(const GateRequest& req,
                                               std::function<void()> resume);

  // Server shutdown: every held request and every later one passes the
  // gate (and runs into the closing server); resume functions are called.
  void Shutdown();

  // The Reshard RPC. `deadline`: the call's.
  absl::Status Reshard(const v1::ReshardRequest& req, v1::ReshardResponse* resp,
                       absl::Time deadline);
  // The Migrate RPC (rows arriving at a destination).
  absl::Status Migrate(const v1::MigrateRequest& req);

 private:
  enum class Phase { kNone, kPrepared, kCopied, kClosed, kHandedOff };
  struct Peer;

  bool active() const { return active_.load(std::memory_order_acquire); }
  // Whether `key` leaves this server under the target. REQUIRES: prepared.
  bool Leaves(const ClusterMap& current, uint64_t key) const;
  absl::Status Prepare(const v1::ReshardRequest& req, absl::Time deadline)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status Copy(const v1::ReshardRequest& req, absl::Time deadline);
  absl::Status Close(absl::Time deadline);
  absl::Status Handoff(const v1::ReshardRequest& req, absl::Time deadline);
  absl::Status Commit(const v1::ReshardRequest& req);
  absl::Status Abort();
  // Sends the existing rows of `keys` (all leaving) of `table` to their
  // owners under the target, `batch_rows` per call with a few calls in
  // flight, at most `rows_per_second`; adds to rows_moved_ and records the
  // keys sent in handed_over_.
  absl::Status SendRows(const TableSpec& spec, absl::Span<const uint64_t> keys,
                        size_t batch_rows, int64_t rows_per_second,
                        absl::Time deadline);
  // The same for keys already grouped by owner under `target`, the map
  // being migrated to: by_owner[o] goes to target->ring().server_id(o).
  // Aborted when target_ is no longer `target`.
  absl::Status SendGrouped(const TableSpec& spec,
                           const std::shared_ptr<const ClusterMap>& target,
                           absl::Span<const std::vector<uint64_t>> by_owner,
                           size_t batch_rows, int64_t rows_per_second,
                           absl::Time deadline);
  // Deletes every row this server does not own under map() (after a
  // COMMIT: the rows handed over; after an ABORT: the rows received).
  absl::Status DropForeignRows();
  void Fill(v1::ReshardResponse* resp) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::StatusOr<Peer*> PeerFor(ServerId id, const std::string& address);
  void Leave(uint64_t generation, bool sync, bool leaving);
  void LeaveUnprepared();
  // Ends the migration's state (COMMIT, ABORT) and returns the held
  // requests' resume functions, to call once mu_ is released.
  std::vector<std::function<void()>> EndLocked()
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const ServerId self_;
  Store* const store_;
  const SyncAggregator* const sync_;
  const ClientTlsOptions peer_tls_;
  const size_t max_batch_keys_;
  // Set while a migration is prepared: the fast path skips the lock.
  std::atomic<bool> active_{false};
  // Requests admitted while no migration was prepared and not yet
  // answered. PREPARE sets
  // active_, then waits for this to reach 0: requests that entered before
  // it are not tracked (their keys are not in touched_), so their writes
  // must be done before COPY reads rows.
  std::atomic<int> running_unprepared_{0};

  mutable absl::Mutex mu_;
  std::shared_ptr<const ClusterMap> map_ ABSL_GUARDED_BY(mu_);
  uint64_t id_ ABSL_GUARDED_BY(mu_) = 0;
  Phase phase_ ABSL_GUARDED_BY(mu_) = Phase::kNone;
  std::shared_ptr<const ClusterMap> target_ ABSL_GUARDED_BY(mu_);
  // Loses keys under the target.
  bool source_ ABSL_GUARDED_BY(mu_) = false;
  // CLOSE reached: sync steps not in started_steps_ are held.
  bool closed_ ABSL_GUARDED_BY(mu_) = false;
  // HANDOFF reached: requests touching leaving keys are held.
  bool holding_ ABSL_GUARDED_BY(mu_) = false;
  absl::flat_hash_set<int64_t> started_steps_ ABSL_GUARDED_BY(mu_);
  // The migration requests are admitted under now (moves on when one
  // ends). Requests admitted under it and not yet answered: all, sync
  // pushes, and those touching leaving keys; and the ones admitted under
  // an earlier migration, which the next PREPARE waits for.
  uint64_t generation_ ABSL_GUARDED_BY(mu_) = 1;
  int running_tracked_ ABSL_GUARDED_BY(mu_) = 0;
  int running_sync_ ABSL_GUARDED_BY(mu_) = 0;
  int running_leaving_ ABSL_GUARDED_BY(mu_) = 0;
  int running_stale_ ABSL_GUARDED_BY(mu_) = 0;
  // What a waiting PREPARE waits for changed: running_unprepared_ reached 0
  // while a migration is prepared, running_stale_ dropped, or the
  // migration ended.
  absl::CondVar drained_cv_;
  // Migrate calls being applied (ABORT waits for them before deleting).
  int running_receive_ ABSL_GUARDED_BY(mu_) = 0;
  bool shut_down_ ABSL_GUARDED_BY(mu_) = false;
  // Held requests' resume functions.
  std::vector<std::function<void()>> parked_ ABSL_GUARDED_BY(mu_);
  // Leaving keys touched since PREPARE, per table.
  absl::flat_hash_map<std::string, absl::flat_hash_set<uint64_t>> touched_
      ABSL_GUARDED_BY(mu_);
  // Keys whose rows were sent, per table (deleted at COMMIT).
  absl::flat_hash_map<std::string, std::vector<uint64_t>> handed_over_
      ABSL_GUARDED_BY(mu_);
  uint64_t rows_to_move_ ABSL_GUARDED_BY(mu_) = 0;
  std::atomic<uint64_t> rows_moved_{0};
  std::atomic<uint64_t> rows_received_{0};
  // Stubs to the servers rows are sent to, by id.
  absl::Mutex peers_mu_;
  absl::flat_hash_map<ServerId, std::unique_ptr<Peer>> peers_
      ABSL_GUARDED_BY(peers_mu_);
};

}  // namespace psdb::rpc::internal

#endif  // PSDB_RPC_SERVER_RESHARDER_H_
