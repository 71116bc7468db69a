#include "rpc/control/node_config.h"

#include <unistd.h>

#include <cstdlib>
#include <random>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "rpc/wire/address.h"
#include "shard/cluster_map.h"

namespace psdb::rpc {
namespace {

constexpr const char* kVariables[] = {"PS_ROLE",          "PS_SERVER_NUM",
                                      "PS_WORKER_NUM",    "PS_SCHED_HOST",
                                      "PS_SCHED_PORT",    "PS_SCHED_ADDRESSES",
                                      "PS_NODE_ID",       "PS_ENABLE_RECOVERY",
                                      "PS_RECOVERY_PATH", "PS_JOIN"};

// "PS_SERVER_NUM" -> "server_num".
std::string FlagName(absl::string_view variable) {
  absl::string_view rest = variable.substr(3);
  return absl::AsciiStrToLower(rest);
}

// Where a setting came from, for error messages.
struct Setting {
  std::string value;
  std::string origin;  // "PS_SERVER_NUM=3" or "--server_num=3"
};

std::optional<Setting> Lookup(const SettingMap& env, const SettingMap& flags,
                              absl::string_view name) {
  const std::string key(name);
  if (auto it = flags.find(key); it != flags.end() && !it->second.empty()) {
    return Setting{it->second,
                   absl::StrCat("--", FlagName(name), "=", it->second)};
  }
  if (auto it = env.find(key); it != env.end() && !it->second.empty()) {
    return Setting{it->second, absl::StrCat(name, "=", it->second)};
  }
  return std::nullopt;
}

std::string Both(absl::string_view name) {
  return absl::StrCat(name, " (--", FlagName(name), ")");
}

absl::StatusOr<int> ParseInt(const Setting& s, int min, int max) {
  int v = 0;
  if (!absl::SimpleAtoi(s.value, &v) || v < min || v > max) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s: expected an integer in [%d, %d]", s.origin, min, max));
  }
  return v;
}

absl::StatusOr<bool> ParseBool(const Setting& s) {
  const std::string v = absl::AsciiStrToLower(s.value);
  if (v == "1" || v == "true" || v == "yes" || v == "on") return true;
  if (v == "0" || v == "false" || v == "no" || v == "off") return false;
  return absl::InvalidArgumentError(
      absl::StrCat(s.origin, ": expected 1, 0, true or false"));
}

absl::StatusOr<NodeRoleKind> ParseRole(const Setting& s) {
  const std::string v = absl::AsciiStrToLower(s.value);
  if (v == "scheduler") return NodeRoleKind::kScheduler;
  if (v == "server") return NodeRoleKind::kServer;
  if (v == "worker") return NodeRoleKind::kWorker;
  return absl::InvalidArgumentError(
      absl::StrCat(s.origin, ": expected scheduler, server or worker"));
}

std::string GeneratedNodeId(NodeRoleKind role) {
  char host[256] = {0};
  if (gethostname(host, sizeof(host) - 1) != 0 || host[0] == '\0') {
    std::snprintf(host, sizeof(host), "host");
  }
  std::string clean;
  for (char c : absl::string_view(host)) {
    clean.push_back(absl::ascii_isalnum(c) || c == '-' || c == '.' ? c : '_');
  }
  std::random_device rd;
  return absl::StrFormat("%s-%s-%d-%08x", NodeRoleName(role),
                         clean.substr(0, 64), static_cast<int>(getpid()),
                         static_cast<unsigned>(rd()));
}

}  // namespace

absl::string_view NodeRoleName(NodeRoleKind role) {
  switch (role) {
    case NodeRoleKind::kScheduler:
      return "scheduler";
    case NodeRoleKind::kServer:
      return "server";
    case NodeRoleKind::kWorker:
      return "worker";
  }
  return "unknown";
}

std::string NodeConfig::SchedulerAddress() const {
  if (!sched_addresses.empty()) return absl::StrJoin(sched_addresses, ",");
  if (!has_scheduler()) return "";
  return JoinHostPort(sched_host, sched_port);
}

absl::Status ValidateNodeId(absl::string_view id) {
  bool ok = !id.empty() && id.size() <= 128;
  for (char c : id) {
    if (!(absl::ascii_isalnum(c) || c == '_' || c == '.' || c == ':' ||
          c == '-')) {
      ok = false;
    }
  }
  if (!ok) {
    return absl::InvalidArgumentError(
        absl::StrCat("node id '", id, "' must match [A-Za-z0-9_.:-]{1,128}"));
  }
  return absl::OkStatus();
}

SettingMap ReadPsEnvironment() {
  SettingMap out;
  for (const char* name : kVariables) {
    const char* v = std::getenv(name);
    if (v != nullptr && v[0] != '\0') out[name] = v;
  }
  return out;
}

bool IsNodeConfigVariable(absl::string_view name) {
  for (const char* variable : kVariables) {
    if (name == variable) return true;
  }
  return false;
}

absl::StatusOr<NodeConfig> ResolveNodeConfig(
    const SettingMap& env, const SettingMap& flags,
    std::optional<NodeRoleKind> implied_role) {
  NodeConfig config;
  const std::optional<Setting> role = Lookup(env, flags, "PS_ROLE");
  if (role.has_value()) {
    auto parsed = ParseRole(*role);
    if (!parsed.ok()) return parsed.status();
    if (implied_role.has_value() && *parsed != *implied_role) {
      return absl::InvalidArgumentError(
          absl::StrCat(role->origin, " contradicts this binary, which is the ",
                       NodeRoleName(*implied_role)));
    }
    config.role = *parsed;
  } else if (implied_role.has_value()) {
    config.role = *implied_role;
  } else {
    return absl::InvalidArgumentError(
        absl::StrCat(Both("PS_ROLE"),
                     " is required: scheduler, server or "
                     "worker"));
  }
  const absl::string_view role_name = NodeRoleName(config.role);

  if (auto s = Lookup(env, flags, "PS_SERVER_NUM")) {
    auto v = ParseInt(*s, 1, 1 << 16);
    if (!v.ok()) return v.status();
    config.server_num = *v;
  }
  if (auto s = Lookup(env, flags, "PS_WORKER_NUM")) {
    auto v = ParseInt(*s, 0, 1 << 16);
    if (!v.ok()) return v.status();
    config.worker_num = *v;
  }
  const std::optional<Setting> host = Lookup(env, flags, "PS_SCHED_HOST");
  const std::optional<Setting> port = Lookup(env, flags, "PS_SCHED_PORT");
  if (port.has_value()) {
    auto v = ParseInt(*port, 1, 65535);
    if (!v.ok()) return v.status();
    config.sched_port = *v;
  }
  if (host.has_value()) config.sched_host = host->value;
  const std::optional<Setting> addresses =
      Lookup(env, flags, "PS_SCHED_ADDRESSES");
  if (addresses.has_value()) {
    // The one host:port list parser (shard/cluster_map.h).
    absl::StatusOr<std::vector<std::string>> list =
        ParseServerList(addresses->value);
    if (!list.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat(addresses->origin, ": ", list.status().message()));
    }
    config.sched_addresses = *std::move(list);
  }
  if (auto s = Lookup(env, flags, "PS_NODE_ID")) {
    if (absl::Status st = ValidateNodeId(s->value); !st.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat(s->origin, ": ", st.message()));
    }
    config.node_id = s->value;
  }
  if (auto s = Lookup(env, flags, "PS_ENABLE_RECOVERY")) {
    auto v = ParseBool(*s);
    if (!v.ok()) return v.status();
    config.enable_recovery = *v;
  }
  if (auto s = Lookup(env, flags, "PS_RECOVERY_PATH")) {
    config.recovery_path = s->value;
  }
  const std::optional<Setting> join = Lookup(env, flags, "PS_JOIN");
  if (join.has_value()) {
    auto v = ParseBool(*join);
    if (!v.ok()) return v.status();
    config.join = *v;
  }

  switch (config.role) {
    case NodeRoleKind::kScheduler:
      if (!config.server_num.has_value()) {
        return absl::InvalidArgumentError(absl::StrCat(
            "the scheduler needs ", Both("PS_SERVER_NUM"), " (>= 1)"));
      }
      if (!config.worker_num.has_value()) {
        return absl::InvalidArgumentError(
            absl::StrCat("the scheduler needs ", Both("PS_WORKER_NUM"),
                         " (>= 0; 0 = a serving-only cluster)"));
      }
      if (!port.has_value()) {
        return absl::InvalidArgumentError(absl::StrCat(
            "the scheduler needs ", Both("PS_SCHED_PORT"), " to listen on"));
      }
      if (!host.has_value()) config.sched_host = "127.0.0.1";
      if (config.enable_recovery && config.recovery_path.empty()) {
        return absl::InvalidArgumentError(
            absl::StrCat("PS_ENABLE_RECOVERY=1 needs ",
                         Both("PS_RECOVERY_PATH"), " to persist membership"));
      }
      break;
    case NodeRoleKind::kServer:
    case NodeRoleKind::kWorker:
      if (addresses.has_value()) {
        if (host.has_value() || port.has_value()) {
          return absl::InvalidArgumentError(absl::StrCat(
              "a ", role_name, " takes ", Both("PS_SCHED_ADDRESSES"), " or ",
              Both("PS_SCHED_HOST"), " and ", Both("PS_SCHED_PORT"),
              ", not both; got ", addresses->origin, " and ",
              host.has_value() ? host->origin : port->origin));
        }
        break;
      }
      if (host.has_value() != port.has_value() ||
          (config.role == NodeRoleKind::kWorker && !host.has_value())) {
        return absl::InvalidArgumentError(absl::StrCat(
            "a ", role_name, " ",
            config.role == NodeRoleKind::kWorker ? "needs both "
                                                 : "needs both or neither of ",
            Both("PS_SCHED_HOST"), " and ", Both("PS_SCHED_PORT"), " (or ",
            Both("PS_SCHED_ADDRESSES"), "); got ",
            host.has_value() ? host->origin : "no host", " and ",
            port.has_value() ? port->origin : "no port"));
      }
      break;
  }
  if (config.join &&
      (config.role != NodeRoleKind::kServer || !config.has_scheduler())) {
    return absl::InvalidArgumentError(absl::StrCat(
        join->origin,
        ": only a server with a scheduler joins a running "
        "cluster (",
        role_name, config.has_scheduler() ? ")" : ", no scheduler given)"));
  }
  if (config.node_id.empty()) {
    config.node_id = GeneratedNodeId(config.role);
    config.node_id_generated = true;
  }
  return config;
}

}  // namespace psdb::rpc
