// The command-line flags of NodeConfig (rpc/control/node_config.h) shared by
// every psdb binary that takes part in a cluster: --role, --server_num,
// --worker_num, --sched_host, --sched_port, --sched_addresses, --node_id,
// --enable_recovery, --recovery_path (each a string; empty = not given:
// the PS_* variable, if set, applies) and --join (a bool; false counts as
// not given).
//
// Thread-safety: call after absl::ParseCommandLine, from one thread.
#ifndef PSDB_RPC_CONTROL_NODE_CONFIG_FLAGS_H_
#define PSDB_RPC_CONTROL_NODE_CONFIG_FLAGS_H_

#include <optional>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "rpc/control/node_config.h"

namespace psdb::rpc {

// The flags given, keyed by their variable names ("PS_ROLE", ...).
SettingMap NodeConfigFlags();

// ResolveNodeConfig(ReadPsEnvironment(), NodeConfigFlags(), implied_role).
absl::StatusOr<NodeConfig> NodeConfigFromEnvAndFlags(
    std::optional<NodeRoleKind> implied_role);

}  // namespace psdb::rpc

#endif  // PSDB_RPC_CONTROL_NODE_CONFIG_FLAGS_H_
