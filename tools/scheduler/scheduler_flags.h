// ps-scheduler's flags (defined in scheduler_flags.cc, with NodeConfig's
// in rpc/control/node_config_flags.cc and the TLS ones in
// tools/common/tls_flags.cc) and the PS_* environment, resolved into what
// one run does: SchedulerLaunchFromFlags. It checks every setting a start
// checks before anything is bound, opened or connected to, so a bad
// setting is an error naming the flag or variable and nothing else
// happens. scheduler_cli.h runs the result.
//
// Thread-safety: call after absl::ParseCommandLine, from one thread.
#ifndef PSDB_TOOLS_SCHEDULER_SCHEDULER_FLAGS_H_
#define PSDB_TOOLS_SCHEDULER_SCHEDULER_FLAGS_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "rpc/control/admin_membership.h"
#include "rpc/control/node_config.h"
#include "rpc/control/scheduler.h"
#include "rpc/wire/tls.h"

namespace psdb::tools {

// What one `ps-scheduler [COMMAND] [FLAGS]` does.
struct SchedulerLaunch {
  enum class Command {
    // Serve the cluster's control plane until SIGTERM / SIGINT.
    kServe,
    // --health: ask a running scheduler for its status.
    kHealth,
    // `add-server` / `drain-server` against a running scheduler.
    kAddServer,
    kDrainServer,
  };
  Command command = Command::kServe;

  // kServe: the scheduler to start (validated by
  // rpc::ValidateSchedulerOptions).
  rpc::SchedulerOptions scheduler;
  // kServe: --dry_run: check the TLS files, print the settings, serve
  // nothing. Default: false
  bool dry_run = false;

  // kHealth: host:port of the scheduler asked (--sched_host, default
  // 127.0.0.1, and --sched_port, or PS_SCHED_HOST / PS_SCHED_PORT).
  std::string health_address;
  // kHealth: how it is reached (AdminTlsFromFlags).
  rpc::ClientTlsOptions health_tls;

  // kAddServer / kDrainServer: the change to ask for; scheduler_address
  // may be empty (rpc::AdminMembershipChange refuses it).
  rpc::AdminMembershipOptions membership;
};

// Resolves the flags and `env` (the PS_* variables set, by name: the
// process's tools::PsVariablesInEnvironment(); flags win over variables)
// for `args`, the words after the program name (absl::ParseCommandLine's
// positional arguments but the first). InvalidArgument naming the flag or
// variable on a bad, missing or contradictory setting, or on an unknown
// command.
absl::StatusOr<SchedulerLaunch> SchedulerLaunchFromFlags(
    const std::vector<std::string>& args, const rpc::SettingMap& env);

// The TLS of a client of this scheduler (--health, add-server,
// drain-server): --tls_ca (and --insecure) as the peers' TLS, with
// --tls_cert / --tls_key presented only when --require_client_cert says
// the scheduler requires one.
rpc::ClientTlsOptions AdminTlsFromFlags();

}  // namespace psdb::tools

#endif  // PSDB_TOOLS_SCHEDULER_SCHEDULER_FLAGS_H_
