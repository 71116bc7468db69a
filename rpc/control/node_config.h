// NodeConfig: a psdb process's place in a cluster (role, cluster size, where
// the scheduler is, its node id, recovery settings), resolved from the
// seeds' launch-style environment variables and command-line flags, flags
// winning:
//
//   variable            flag               meaning
//   PS_ROLE             --role             scheduler | server | worker
//   PS_SERVER_NUM       --server_num       servers in the cluster (>= 1)
//   PS_WORKER_NUM       --worker_num       workers (>= 0; 0 = serving only)
//   PS_SCHED_HOST       --sched_host       scheduler host (the scheduler's
//                                          own bind address)
//   PS_SCHED_PORT       --sched_port       scheduler port
//   PS_SCHED_ADDRESSES  --sched_addresses  "h1:p1,h2:p2": several
//                                          schedulers sharing etcd (servers
//                                          and workers; instead of
//                                          PS_SCHED_HOST + PS_SCHED_PORT)
//   PS_NODE_ID          --node_id          this node's id
//   PS_ENABLE_RECOVERY  --enable_recovery  1|0|true|false (scheduler)
//   PS_RECOVERY_PATH    --recovery_path    where the scheduler persists
//                                          membership
//   PS_JOIN             --join             1|0|true|false (server): join a
//                                          running cluster (JOINING, no
//                                          keys until add-server)
//
// Validation happens here, at start, so a missing or contradictory setting
// is a clear error naming the variable and the flag, never a hang:
//  - The role must be given unless the binary implies one (ps-scheduler,
//    ps-server); a PS_ROLE that contradicts the binary is an error.
//  - scheduler: PS_SERVER_NUM, PS_WORKER_NUM and PS_SCHED_PORT are required;
//    PS_SCHED_HOST defaults to 127.0.0.1; recovery requires PS_RECOVERY_PATH.
//  - server: PS_SCHED_HOST and PS_SCHED_PORT come together or not at all
//    (none = no scheduler: a static --servers list or a lone server), or
//    PS_SCHED_ADDRESSES instead of both.
//  - worker: PS_SCHED_HOST and PS_SCHED_PORT, or PS_SCHED_ADDRESSES, are
//    required.
//  - PS_JOIN=1 only for a server with a scheduler.
//  - PS_SCHED_ADDRESSES with PS_SCHED_HOST or PS_SCHED_PORT is an error
//    (for a server or worker; the scheduler binds PS_SCHED_HOST:PORT and
//    ignores the list). Each entry must be host:port, port in 1..65535.
//  - Numbers must parse completely and lie in range; node ids match
//    [A-Za-z0-9_.:-]{1,128}. A node without PS_NODE_ID gets a generated one
//    ("<role>-<hostname>-<pid>-<random>"), which cannot be recovered.
//  - PS_SERVER_NUM / PS_WORKER_NUM given to a server or worker are checked
//    against the scheduler's at registration.
//
// Thread-safety: pure functions, except ReadPsEnvironment (reads environ).
#ifndef PSDB_RPC_CONTROL_NODE_CONFIG_H_
#define PSDB_RPC_CONTROL_NODE_CONFIG_H_

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace psdb::rpc {

enum class NodeRoleKind { kScheduler, kServer, kWorker };

// "scheduler", "server", "worker".
absl::string_view NodeRoleName(NodeRoleKind role);

struct NodeConfig {
  NodeRoleKind role = NodeRoleKind::kWorker;
  // Unset when not given (servers and workers may omit them).
  std::optional<int> server_num;
  std::optional<int> worker_num;
  // Empty / 0 when there is no scheduler (a standalone server) or when it
  // is given as a list (sched_addresses).
  std::string sched_host;
  int sched_port = 0;
  // PS_SCHED_ADDRESSES, one host:port per scheduler; empty when not given.
  std::vector<std::string> sched_addresses;
  // Given or generated; see node_id_generated.
  std::string node_id;
  bool node_id_generated = false;
  bool enable_recovery = false;
  std::string recovery_path;
  // A server joining a running cluster (RegisterRequest.join).
  bool join = false;

  // "host:port" of the scheduler, or "h1:p1,h2:p2" from
  // PS_SCHED_ADDRESSES (SchedulerClientOptions::address takes either); ""
  // without one. IPv6 hosts bracketed.
  std::string SchedulerAddress() const;
  bool has_scheduler() const {
    return sched_port != 0 || !sched_addresses.empty();
  }
};

// Keys are the variable names above ("PS_ROLE", ...); values as given.
using SettingMap = std::map<std::string, std::string>;

// The PS_* variables of this process's environment that are set and
// non-empty.
SettingMap ReadPsEnvironment();

// Whether `name` is one of the variables NodeConfig reads ("PS_ROLE", ...,
// "PS_JOIN"; each has its flag in node_config_flags.h). A tool's --dry_run
// lists which PS_* variables it reads.
bool IsNodeConfigVariable(absl::string_view name);

// Resolves and validates. `flags` uses the same keys as `env` (the caller
// maps --role to "PS_ROLE", ...; an empty flag value counts as not given);
// a flag wins over the variable. `implied_role` is the binary's role, if it
// has one.
absl::StatusOr<NodeConfig> ResolveNodeConfig(
    const SettingMap& env, const SettingMap& flags,
    std::optional<NodeRoleKind> implied_role);

// Checks a node id: [A-Za-z0-9_.:-]{1,128}.
absl::Status ValidateNodeId(absl::string_view id);

}  // namespace psdb::rpc

#endif  // PSDB_RPC_CONTROL_NODE_CONFIG_H_
