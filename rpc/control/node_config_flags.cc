#include "rpc/control/node_config_flags.h"

#include <string>
#include <utility>

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
namespace {

// Each variable of NodeConfig (node_config.cc's list) and its flag's value
// ("" = not given).
struct FlagOfVariable {
  const char* variable;
  std::string (*value)();
};

constexpr FlagOfVariable kFlags[] = {
    {"PS_ROLE", [] { return absl::GetFlag(FLAGS_role); }},
    {"PS_SERVER_NUM", [] { return absl::GetFlag(FLAGS_server_num); }},
    {"PS_WORKER_NUM", [] { return absl::GetFlag(FLAGS_worker_num); }},
    {"PS_SCHED_HOST", [] { return absl::GetFlag(FLAGS_sched_host); }},
    {"PS_SCHED_PORT", [] { return absl::GetFlag(FLAGS_sched_port); }},
    {"PS_SCHED_ADDRESSES", [] { return absl::GetFlag(FLAGS_sched_addresses); }},
    {"PS_NODE_ID", [] { return absl::GetFlag(FLAGS_node_id); }},
    {"PS_ENABLE_RECOVERY", [] { return absl::GetFlag(FLAGS_enable_recovery); }},
    {"PS_RECOVERY_PATH", [] { return absl::GetFlag(FLAGS_recovery_path); }},
    {"PS_JOIN",
     [] { return std::string(absl::GetFlag(FLAGS_join) ? "1" : ""); }},
};

}  // namespace

SettingMap NodeConfigFlags() {
  SettingMap flags;
  for (const FlagOfVariable& flag : kFlags) {
    std::string value = flag.value();
    if (!value.empty()) flags[flag.variable] = std::move(value);
  }
  return flags;
}

absl::StatusOr<NodeConfig> NodeConfigFromEnvAndFlags(
    std::optional<NodeRoleKind> implied_role) {
  return ResolveNodeConfig(ReadPsEnvironment(), NodeConfigFlags(),
                           implied_role);
}

}  // namespace psdb::rpc
