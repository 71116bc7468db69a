#include "rpc/control/node_config_flags.h"

#include <string>

#include "absl/flags/flag.h"

ABSL_FLAG(std::string, role, "",
          "scheduler | server | worker (overrides PS_ROLE).");
ABSL_FLAG(std::string, server_num, "",
          "Servers in the cluster (overrides PS_SERVER_NUM).");
ABSL_FLAG(
    std::string, worker_num, "",
    "Workers in the cluster, 0 = serving only (overrides PS_WORKER_NUM).");
ABSL_FLAG(std::string, sched_host, "",
          "Scheduler host; the scheduler's bind address (overrides "
          "PS_SCHED_HOST).");
ABSL_FLAG(std::string, sched_port, "",
          "Scheduler port (overrides PS_SCHED_PORT).");
ABSL_FLAG(std::string, sched_addresses, "",
          "Several schedulers sharing etcd, h1:p1,h2:p2; for servers and "
          "workers instead of --sched_host/--sched_port (overrides "
          "PS_SCHED_ADDRESSES).");
ABSL_FLAG(std::string, node_id, "",
          "This node's id; generated when absent (overrides PS_NODE_ID).");
ABSL_FLAG(std::string, enable_recovery, "",
          "1|0: persist and reload scheduler membership (overrides "
          "PS_ENABLE_RECOVERY).");
// A bool, so `--join` alone works; false counts as not given (PS_JOIN, if
// set, applies).
ABSL_FLAG(bool, join, false,
          "A server joining a running cluster: JOINING, owning no keys until "
          "`ps-scheduler add-server` (overrides PS_JOIN).");
ABSL_FLAG(std::string, recovery_path, "",
          "Where the scheduler persists membership (overrides "
          "PS_RECOVERY_PATH).");

namespace psdb::rpc {

SettingMap NodeConfigFlags() {
  SettingMap flags;
  auto put = [&](const char* name, const std::string& value) {
    if (!value.empty()) flags[name] = value;
  };
  put("PS_ROLE", absl::GetFlag(FLAGS_role));
  put("PS_SERVER_NUM", absl::GetFlag(FLAGS_server_num));
  put("PS_WORKER_NUM", absl::GetFlag(FLAGS_worker_num));
  put("PS_SCHED_HOST", absl::GetFlag(FLAGS_sched_host));
  put("PS_SCHED_PORT", absl::GetFlag(FLAGS_sched_port));
  put("PS_SCHED_ADDRESSES", absl::GetFlag(FLAGS_sched_addresses));
  put("PS_NODE_ID", absl::GetFlag(FLAGS_node_id));
  put("PS_ENABLE_RECOVERY", absl::GetFlag(FLAGS_enable_recovery));
  put("PS_RECOVERY_PATH", absl::GetFlag(FLAGS_recovery_path));
  if (absl::GetFlag(FLAGS_join)) put("PS_JOIN", "1");
  return flags;
}

absl::StatusOr<NodeConfig> NodeConfigFromEnvAndFlags(
    std::optional<NodeRoleKind> implied_role) {
  return ResolveNodeConfig(ReadPsEnvironment(), NodeConfigFlags(),
                           implied_role);
}

}  // namespace psdb::rpc
