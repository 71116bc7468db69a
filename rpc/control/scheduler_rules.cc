// The rules both scheduler backends share (scheduler.h's
// scheduler_internal): validation of options, registrations, barrier and
// step-clock arguments, and the map a membership change leads to. No state:
// the in-process state machine is scheduler.cc, the etcd one
// etcd_scheduler*.cc.
#include <cstdio>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "rpc/control/node_config.h"
#include "rpc/control/scheduler.h"
#include "util/status_macros.h"

namespace psdb::rpc {
namespace scheduler_internal {

absl::string_view RoleWord(v1::NodeRole role) {
  return role == v1::NODE_ROLE_SERVER ? "server" : "worker";
}

std::string Plural(int n, absl::string_view word) {
  return absl::StrCat(n, " ", word, n == 1 ? "" : "s");
}

void LogLine(const SchedulerOptions& options, absl::string_view line) {
  if (options.log) {
    options.log(line);
    return;
  }
  std::fprintf(stderr, "ps-scheduler: %.*s\n", static_cast<int>(line.size()),
               line.data());
  std::fflush(stderr);
}

absl::Status ValidateRegistration(const SchedulerOptions& options,
                                  const v1::RegisterRequest& req) {
  PSDB_RETURN_IF_ERROR(ValidateNodeId(req.node_id()));
  if (req.role() != v1::NODE_ROLE_SERVER &&
      req.role() != v1::NODE_ROLE_WORKER) {
    return absl::InvalidArgumentError(absl::StrCat(
        "node id:", req.node_id(), ": role must be server or worker"));
  }
  const absl::string_view role = RoleWord(req.role());
  if (req.join() && req.role() != v1::NODE_ROLE_SERVER) {
    return absl::InvalidArgumentError(absl::StrCat(
        "node id:", req.node_id(), ": only a server joins (join=true)"));
  }
  if (req.role() == v1::NODE_ROLE_SERVER && req.address().empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "server node id:", req.node_id(), " registered without an address"));
  }
  if (req.has_server_num() && req.server_num() != options.server_num) {
    return absl::InvalidArgumentError(absl::StrCat(
        role, " node id:", req.node_id(), " has PS_SERVER_NUM=",
        req.server_num(), " but the scheduler has ", options.server_num));
  }
  if (req.has_worker_num() && req.worker_num() != options.worker_num) {
    return absl::InvalidArgumentError(absl::StrCat(
        role, " node id:", req.node_id(), " has PS_WORKER_NUM=",
        req.worker_num(), " but the scheduler has ", options.worker_num));
  }
  return absl::OkStatus();
}

absl::Status ValidateBarrierName(absl::string_view name) {
  if (name.empty() || name.size() > 256) {
    return absl::InvalidArgumentError("barrier name must be 1..256 bytes");
  }
  return absl::OkStatus();
}

absl::Status ValidateStepClock(int64_t finished_step, int staleness) {
  if (finished_step < 0 || staleness < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("step clock: finished_step (", finished_step,
                     ") and staleness (", staleness, ") must be >= 0"));
  }
  return absl::OkStatus();
}

absl::StatusOr<v1::ClusterMap> MapAfterChange(const v1::ClusterMap& now,
                                              const MembershipChange& change) {
  const absl::string_view verb = change.kind == MembershipChange::Kind::kAdd
                                     ? "add-server"
                                     : "drain-server";
  if (!now.ready() || now.epoch() == 0) {
    return absl::FailedPreconditionError(absl::StrCat(
        verb, " node id:", change.node_id, ": the cluster is not ready"));
  }
  int found = -1;
  int on_ring = 0;
  for (int i = 0; i < now.servers_size(); ++i) {
    const v1::NodeEntry& e = now.servers(i);
    if (e.node_id() == change.node_id) found = i;
    if (e.state() == v1::NODE_STATE_JOINING) continue;
    ++on_ring;
    if (e.state() == v1::NODE_STATE_DEAD) {
      return absl::FailedPreconditionError(absl::StrCat(
          verb, " node id:", change.node_id, ": server node id:", e.node_id(),
          " addr:", e.address(), " rank ", e.rank(),
          " is dead; its rows cannot move (bring it back first)"));
    }
  }
  if (found < 0) {
    return absl::NotFoundError(absl::StrCat(verb, ": node id:", change.node_id,
                                            " is not a server of the map"));
  }
  const v1::NodeEntry& node = now.servers(found);
  v1::ClusterMap after = now;
  after.set_epoch(0);
  if (change.kind == MembershipChange::Kind::kAdd) {
    if (node.state() != v1::NODE_STATE_JOINING) {
      return absl::FailedPreconditionError(
          absl::StrCat(verb, ": server node id:", node.node_id(), " rank ",
                       node.rank(), " is already on the ring"));
    }
    after.mutable_servers(found)->set_state(v1::NODE_STATE_ALIVE);
    after.set_server_num(on_ring + 1);
  } else {
    if (node.state() != v1::NODE_STATE_ALIVE) {
      return absl::FailedPreconditionError(
          absl::StrCat(verb, ": server node id:", node.node_id(), " rank ",
                       node.rank(), " is joining, not on the ring"));
    }
    if (on_ring == 1) {
      return absl::FailedPreconditionError(absl::StrCat(
          verb, ": server node id:", node.node_id(),
          " is the last server on the ring; its rows have nowhere to go"));
    }
    after.mutable_servers()->DeleteSubrange(found, 1);
    after.set_server_num(on_ring - 1);
  }
  return after;
}

}  // namespace scheduler_internal

absl::string_view MembershipKindName(MembershipChange::Kind kind) {
  return kind == MembershipChange::Kind::kAdd ? "add" : "drain";
}

absl::Status ValidateSchedulerOptions(const SchedulerOptions& options) {
  if (options.server_num < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("server_num must be >= 1, got ", options.server_num));
  }
  if (options.worker_num < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("worker_num must be >= 0, got ", options.worker_num));
  }
  if (options.port < 0 || options.port > 65535) {
    return absl::InvalidArgumentError(
        absl::StrCat("port out of range: ", options.port));
  }
  if (options.metrics_port < -1 || options.metrics_port > 65535) {
    return absl::InvalidArgumentError(
        absl::StrCat("metrics_port out of range: ", options.metrics_port));
  }
  if (!options.etcd_endpoints.empty()) {
    if (options.lease_ttl < absl::Seconds(2) ||
        options.lease_ttl <= 2 * options.heartbeat_interval) {
      return absl::InvalidArgumentError(
          absl::StrCat("lease_ttl must be >= 2s and > 2 * heartbeat_interval (",
                       absl::FormatDuration(options.heartbeat_interval),
                       "), got ", absl::FormatDuration(options.lease_ttl)));
    }
    if (!options.recovery_path.empty()) {
      return absl::InvalidArgumentError(
          "recovery_path (PS_ENABLE_RECOVERY) and etcd are exclusive: with "
          "etcd the membership already survives a scheduler restart");
    }
  }
  if (options.cluster.empty() || options.cluster.size() > 64 ||
      options.cluster.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKL"
                                        "MNOPQRSTUVWXYZ0123456789_.-") !=
          std::string::npos) {
    return absl::InvalidArgumentError(
        absl::StrCat("cluster name must match [A-Za-z0-9_.-]{1,64}, got '",
                     options.cluster, "'"));
  }
  if (options.heartbeat_interval <= absl::ZeroDuration() ||
      options.heartbeat_timeout <= options.heartbeat_interval) {
    return absl::InvalidArgumentError(
        absl::StrCat("need 0 < heartbeat_interval < heartbeat_timeout, got ",
                     absl::FormatDuration(options.heartbeat_interval), " and ",
                     absl::FormatDuration(options.heartbeat_timeout)));
  }
  return absl::OkStatus();
}

}  // namespace psdb::rpc
