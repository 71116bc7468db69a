// AdminMembershipChange: the logic of `ps-scheduler add-server` and
// `ps-scheduler drain-server`, the operator's way to grow or shrink a
// running cluster (live resharding, migration_coordinator.h). It sends
// AddServer / DrainServer to the scheduler and, while the call runs, reads
// GetStatus about once per progress_interval and reports each progress
// line; it returns the final status or the error (the migration aborted:
// the map is unchanged).
//
//   AdminMembershipOptions o;
//   o.scheduler_address = "10.0.0.9:7100";
//   o.kind = MembershipChange::Kind::kAdd;
//   o.node_id = "server-3";
//   PSDB_ASSIGN_OR_RETURN(v1::MigrationStatus done,
//       AdminMembershipChange(o, [](absl::string_view line) { ... }));
//
// Progress lines read "add-server server-3: copy 12000/40000 rows moved
// (30%)"; FormatMigrationDone gives the final "add-server server-3: done,
// epoch 1 -> 2, 40000 rows moved in 1.2 s".
//
// Thread-safety: thread-safe (no shared state); `progress` is called from
// the calling thread.
#ifndef PSDB_RPC_CONTROL_ADMIN_MEMBERSHIP_H_
#define PSDB_RPC_CONTROL_ADMIN_MEMBERSHIP_H_

#include <cstdint>
#include <functional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "rpc/control/scheduler.h"
#include "rpc/wire/psdb.pb.h"
#include "rpc/wire/tls.h"

namespace psdb::rpc {

struct AdminMembershipOptions {
  // "host:port" of ps-scheduler. REQUIRED.
  std::string scheduler_address;
  MembershipChange::Kind kind = MembershipChange::Kind::kAdd;
  // The server to add (JOINING) or drain. REQUIRED.
  std::string node_id;
  // Rows per Migrate call; 0 = the servers' default (1024). Default: 0
  int32_t batch_rows = 0;
  // Rows per second per source; 0 = no limit. Default: 0
  int64_t max_rows_per_second = 0;
  ClientTlsOptions tls;
  // How often progress is read and reported. Default: 1 s
  absl::Duration progress_interval = absl::Seconds(1);
  // Deadline of the whole change. Default: 24 h
  absl::Duration timeout = absl::Hours(24);
};

// "add-server server-3: copy 12000/40000 rows moved (30%)".
std::string FormatMigrationProgress(const v1::MigrationStatus& status);
// "add-server server-3: done, epoch 1 -> 2, 40000 rows moved in 1.2 s".
std::string FormatMigrationDone(const v1::MigrationStatus& status,
                                absl::Duration took);

// InvalidArgument on missing options; otherwise the scheduler's answer:
// the final status, or the error (FAILED_PRECONDITION when the change is
// not valid now or another runs; the migration's own error when it
// aborted). `progress` (may be null) gets one line per read while the
// change runs (phases prepare, copy, handoff, commit).
absl::StatusOr<v1::MigrationStatus> AdminMembershipChange(
    const AdminMembershipOptions& options,
    const std::function<void(absl::string_view)>& progress);

}  // namespace psdb::rpc

#endif  // PSDB_RPC_CONTROL_ADMIN_MEMBERSHIP_H_
