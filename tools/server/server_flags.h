// ps-server's flags (defined in server_flags.cc, with NodeConfig's in
// rpc/control/node_config_flags.cc and the TLS ones in
// tools/common/tls_flags.cc) and the PS_* environment, resolved into what
// one run does: ServerLaunchFromFlags. It makes every check a start makes
// before it binds, opens, creates or connects to anything, in the order a
// start makes them, so a bad setting is an error naming the flag or
// variable and nothing else happens. server_cli.h runs the result.
//
// Thread-safety: call after absl::ParseCommandLine, from one thread.
#ifndef PSDB_TOOLS_SERVER_SERVER_FLAGS_H_
#define PSDB_TOOLS_SERVER_SERVER_FLAGS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "psdb/store_options.h"
#include "rpc/control/admin_checkpoint.h"
#include "rpc/control/node_config.h"
#include "rpc/server/checkpoint_follower.h"
#include "rpc/server/server.h"

namespace psdb::tools {

// What one `ps-server [checkpoint] [FLAGS]` does.
struct ServerLaunch {
  enum class Mode {
    // --data_dir: a training server (its Store behind gRPC), joining the
    // scheduler when there is one.
    kTrain,
    // --serve_from: a read-only replica following a checkpoint root.
    kServe,
    // `ps-server checkpoint`: the admin call writing a cluster checkpoint.
    kCheckpoint,
  };
  Mode mode = Mode::kTrain;
  // --dry_run: resolve, check the TLS files, print the settings, exit.
  // Default: false
  bool dry_run = false;
  // --malloc_keep_mb: freed memory glibc's malloc keeps (M_TRIM_THRESHOLD,
  // with M_MMAP_THRESHOLD at 32 MiB); 0 = glibc's defaults. Default: 256
  int64_t malloc_keep_mb = 256;

  // kTrain and kServe: the gRPC server. Its cluster is --servers' static
  // list (epoch --cluster_epoch; empty: this server owns every key) and
  // shard_id --shard_id, until a scheduler places a training server. Its
  // sync options: see sync_mode.
  rpc::ServerOptions server;
  // kTrain and kServe: how long in-flight requests may take after SIGTERM.
  // Default: 30 s
  absl::Duration shutdown_grace = absl::Seconds(30);

  // kTrain: the store's directory and options (its shard_id is the
  // server's, set again once a scheduler places the server).
  std::string data_dir;
  StoreOptions store;
  // kTrain: cluster settings (PS_* and their flags); with a scheduler
  // (node.has_scheduler()) the server registers and takes its place from
  // the scheduler's map.
  rpc::NodeConfig node;
  // kTrain with a scheduler: the host registered (--advertise_host, else
  // --host) and how long the cluster may take to form.
  std::string advertise_host;
  absl::Duration cluster_wait = absl::Seconds(300);
  // kTrain: --sync_mode=sync. server.sync.reduce is --sync_reduce and
  // server.sync.num_workers PS_WORKER_NUM (--worker_num) when given, else
  // 0 until the scheduler says (a server without one needs it >= 1).
  // Default: false (async)
  bool sync_mode = false;

  // kServe: the checkpoint root followed and the replica's store options.
  rpc::FollowerOptions follow;

  // kCheckpoint: the admin call's options.
  rpc::AdminCheckpointOptions checkpoint;
};

// Resolves the flags and `env` (the PS_* variables set, by name: the
// process's tools::PsVariablesInEnvironment(); flags win over variables)
// for `args`, the words after the program name (absl::ParseCommandLine's
// positional arguments but the first). InvalidArgument naming the flag or
// variable on a bad, missing or contradictory setting, or on an unknown
// command.
absl::StatusOr<ServerLaunch> ServerLaunchFromFlags(
    const std::vector<std::string>& args, const rpc::SettingMap& env);

}  // namespace psdb::tools

#endif  // PSDB_TOOLS_SERVER_SERVER_FLAGS_H_
