#include "tools/server/server_flags.h"

#include <utility>

#include "absl/flags/flag.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "rpc/control/node_config_flags.h"
#include "shard/cluster_map.h"
#include "tools/common/tls_flags.h"

ABSL_FLAG(std::string, data_dir, "", "Directory of this server's store.");
ABSL_FLAG(std::string, host, "127.0.0.1",
          "Address to listen on. Plaintext is allowed on loopback only "
          "unless --insecure.");
ABSL_FLAG(int, port, 0,
          "Port to listen on; 0 picks a free one. A port another process "
          "listens on fails the start (it is never shared).");
ABSL_FLAG(int, threads, 0, "Request handler threads; 0 = one per core.");
ABSL_FLAG(int64_t, max_batch_keys, 65536,
          "Most keys one request may carry; sets the message size limit.");
ABSL_FLAG(int, max_dim, 1024, "Largest table dim CreateTable accepts.");
ABSL_FLAG(int64_t, malloc_keep_mb, 256,
          "Freed memory glibc's malloc keeps for reuse instead of returning "
          "it to the kernel (M_TRIM_THRESHOLD; blocks up to 32 MiB also "
          "come from the heap, M_MMAP_THRESHOLD); 0 = glibc's defaults.");
ABSL_FLAG(int64_t, memory_budget_mb, 1024,
          "Memory budget of the store, MiB: its rows, RocksDB's memtables "
          "and block cache together (docs/operations/memory.md).");
ABSL_FLAG(int64_t, disk_reserve_mb, 0,
          "Disk space, MiB, the store holds back in DATA_DIR/disk-reserve for "
          "a shutdown on a disk something else filled "
          "(StoreOptions::disk_reserve_bytes); 0 = none.");
ABSL_FLAG(std::string, servers, "",
          "All servers of the cluster in rank order, host:port,...; empty = "
          "this server owns every key.");
ABSL_FLAG(int, shard_id, 0, "This server's rank in --servers.");
ABSL_FLAG(uint64_t, cluster_epoch, 1, "Epoch of the static server list.");
ABSL_FLAG(std::string, restore_from, "",
          "Checkpoint to start from when --data_dir holds no store yet.");
ABSL_FLAG(std::string, serve_from, "",
          "Serve read-only: the checkpoint root to serve and follow (the "
          "newest complete checkpoint that verifies; shard --shard_id).");
ABSL_FLAG(bool, serve_all_shards, false,
          "With --serve_from: serve every shard of a cluster checkpoint "
          "(a model small enough for one replica) instead of --shard_id.");
ABSL_FLAG(int, follow_interval_s, 10,
          "With --serve_from: seconds between looks for a newer checkpoint "
          "(besides those inotify triggers as a manifest is renamed in); "
          "0 = serve the first one only.");
ABSL_FLAG(int, serve_versions, 2,
          "With --serve_from: checkpoints kept readable (the newest plus "
          "the ones swapped in before it), so clients can read several "
          "shards and tables at one version; >= 1. Versions over different "
          "base stores cost up to one --memory_budget_mb each.");
ABSL_FLAG(int, metrics_port, -1,
          "Serve Prometheus metrics over HTTP at /metrics on this port; "
          "0 picks a free one, -1 = off.");
ABSL_FLAG(std::string, metrics_host, "",
          "Address the metrics endpoint binds; default --host.");
ABSL_FLAG(std::string, sync_mode, "async",
          "async: each push applied on arrival; sync (BSP): a step's pushes "
          "from all workers are aggregated and applied once. A worker "
          "pushing in the other mode (ps-train --mode) is refused at its "
          "first push.");
ABSL_FLAG(std::string, durability, "checkpoint",
          "What survives a crash between checkpoints: checkpoint (rows reach "
          "disk at eviction, checkpoint and shutdown) or wal (a write-ahead "
          "log under DATA_DIR/wal: every acknowledged push survives SIGKILL; "
          "store/wal.h).");
ABSL_FLAG(bool, wal_sync, false,
          "With --durability=wal: fsync each group of log records before "
          "acknowledging it, so acknowledged pushes survive a power cut too.");
ABSL_FLAG(std::string, sync_reduce, "mean",
          "How sync mode combines a step's worker gradients: mean or sum.");
ABSL_FLAG(std::string, advertise_host, "",
          "Host other nodes reach this server at, registered with the "
          "scheduler; default --host.");
ABSL_FLAG(int, cluster_wait_seconds, 300,
          "How long to wait for the scheduler's cluster to form.");
ABSL_FLAG(int, shutdown_grace_seconds, 30,
          "On SIGTERM, how long in-flight requests may take to finish.");
ABSL_FLAG(std::string, root, "",
          "checkpoint: directory the cluster checkpoint is written under; "
          "every server must see it.");
ABSL_FLAG(int64_t, step, 0,
          "checkpoint: the trainer's step at the boundary (names the id).");
ABSL_FLAG(int, checkpoint_timeout_seconds, 600,
          "checkpoint: how long one server's shard may take.");
ABSL_FLAG(bool, dry_run, false,
          "Resolve and validate every flag and PS_* variable as a start "
          "would, print the settings and exit 0 (1 naming the problem); "
          "binds, opens and connects to nothing.");

namespace psdb::tools {
namespace {

using Mode = ServerLaunch::Mode;

absl::StatusOr<rpc::NodeConfig> ServerNodeConfig(const rpc::SettingMap& env) {
  return rpc::ResolveNodeConfig(env, rpc::NodeConfigFlags(),
                                rpc::NodeRoleKind::kServer);
}

// `ps-server checkpoint` (rpc/control/admin_checkpoint.h).
absl::StatusOr<rpc::AdminCheckpointOptions> CheckpointFromFlags(
    const rpc::SettingMap& env) {
  rpc::AdminCheckpointOptions options;
  options.root = absl::GetFlag(FLAGS_root);
  options.step = absl::GetFlag(FLAGS_step);
  options.cluster_epoch = absl::GetFlag(FLAGS_cluster_epoch);
  options.timeout =
      absl::Seconds(absl::GetFlag(FLAGS_checkpoint_timeout_seconds));
  options.tls = PeerTlsFromFlags();
  if (!absl::GetFlag(FLAGS_servers).empty()) {
    absl::StatusOr<std::vector<std::string>> servers =
        ParseServerList(absl::GetFlag(FLAGS_servers));
    if (!servers.ok()) return servers.status();
    options.servers = *std::move(servers);
  }
  absl::StatusOr<rpc::NodeConfig> config = ServerNodeConfig(env);
  if (!config.ok()) return config.status();
  options.scheduler_address = config->SchedulerAddress();
  return options;
}

// The gRPC server of a training server or replica: everything but its
// sync options.
absl::StatusOr<rpc::ServerOptions> ServerFromFlags() {
  rpc::ServerOptions options;
  options.host = absl::GetFlag(FLAGS_host);
  options.port = absl::GetFlag(FLAGS_port);
  options.num_threads = absl::GetFlag(FLAGS_threads);
  if (absl::GetFlag(FLAGS_max_batch_keys) < 1) {
    return absl::InvalidArgumentError("--max_batch_keys must be >= 1");
  }
  if (absl::GetFlag(FLAGS_disk_reserve_mb) < 0) {
    return absl::InvalidArgumentError("--disk_reserve_mb must be >= 0");
  }
  options.max_batch_keys =
      static_cast<size_t>(absl::GetFlag(FLAGS_max_batch_keys));
  options.max_dim = absl::GetFlag(FLAGS_max_dim);
  options.shard_id = absl::GetFlag(FLAGS_shard_id);
  options.cluster = ClusterMap::Empty(absl::GetFlag(FLAGS_cluster_epoch));
  if (!absl::GetFlag(FLAGS_servers).empty()) {
    absl::StatusOr<std::vector<std::string>> servers =
        ParseServerList(absl::GetFlag(FLAGS_servers));
    if (!servers.ok()) return servers.status();
    absl::StatusOr<ClusterMap> cluster =
        ClusterMap::FromAddresses(*servers, absl::GetFlag(FLAGS_cluster_epoch));
    if (!cluster.ok()) return cluster.status();
    options.cluster = *std::move(cluster);
  }
  options.tls = ServerTlsFromFlags();
  // Live resharding sends rows to peers (Migrate).
  options.peer_tls = PeerTlsFromFlags();
  options.metrics_port = absl::GetFlag(FLAGS_metrics_port);
  options.metrics_host = absl::GetFlag(FLAGS_metrics_host);
  return options;
}

// --serve_from: a read-only replica's checks and follower.
absl::Status ResolveServe(const rpc::SettingMap& env, ServerLaunch* launch) {
  if (!absl::GetFlag(FLAGS_servers).empty() ||
      !absl::GetFlag(FLAGS_restore_from).empty()) {
    return absl::InvalidArgumentError(
        "--servers and --restore_from do not apply to --serve_from: a "
        "replica serves the checkpoint's own shard under its own ring");
  }
  if (absl::GetFlag(FLAGS_sync_mode) != "async") {
    return absl::InvalidArgumentError(
        "--sync_mode does not apply to --serve_from (no pushes)");
  }
  absl::StatusOr<rpc::NodeConfig> config = ServerNodeConfig(env);
  if (!config.ok()) return config.status();
  if (config->has_scheduler()) {
    return absl::InvalidArgumentError(
        "--serve_from: a serving replica does not join a scheduler (unset "
        "PS_SCHED_HOST/PS_SCHED_PORT and PS_SCHED_ADDRESSES)");
  }
  if (absl::GetFlag(FLAGS_follow_interval_s) < 0) {
    return absl::InvalidArgumentError("--follow_interval_s must be >= 0");
  }
  if (absl::GetFlag(FLAGS_serve_versions) < 1) {
    return absl::InvalidArgumentError("--serve_versions must be >= 1");
  }
  rpc::FollowerOptions& follow = launch->follow;
  follow.root = absl::GetFlag(FLAGS_serve_from);
  follow.shard_id = absl::GetFlag(FLAGS_serve_all_shards)
                        ? rpc::kAllShards
                        : launch->server.shard_id;
  follow.interval = absl::Seconds(absl::GetFlag(FLAGS_follow_interval_s));
  follow.serve_versions = absl::GetFlag(FLAGS_serve_versions);
  follow.store.memory_budget_bytes =
      static_cast<uint64_t>(absl::GetFlag(FLAGS_memory_budget_mb)) << 20;
  follow.store.max_batch_keys = launch->server.max_batch_keys;
  return absl::OkStatus();
}

// --data_dir: a training server's cluster, mode and store.
absl::Status ResolveTrain(const rpc::SettingMap& env, ServerLaunch* launch) {
  absl::StatusOr<rpc::NodeConfig> config = ServerNodeConfig(env);
  if (!config.ok()) return config.status();
  if (config->has_scheduler() && !absl::GetFlag(FLAGS_servers).empty()) {
    return absl::InvalidArgumentError(
        "--servers contradicts the scheduler (PS_SCHED_HOST/PS_SCHED_PORT "
        "or PS_SCHED_ADDRESSES): it assigns the server list");
  }
  if (config->join && !absl::GetFlag(FLAGS_restore_from).empty()) {
    return absl::InvalidArgumentError(
        "--join with --restore_from: a joining server owns no keys until "
        "add-server, which moves its rows to it");
  }
  // Checked before joining: a bad mode must not take a rank first.
  const std::string sync_mode = absl::GetFlag(FLAGS_sync_mode);
  const std::string sync_reduce = absl::GetFlag(FLAGS_sync_reduce);
  const absl::StatusOr<Durability> durability =
      ParseDurability(absl::GetFlag(FLAGS_durability));
  if (!durability.ok()) return durability.status();
  if (sync_reduce != "mean" && sync_reduce != "sum") {
    return absl::InvalidArgumentError(
        absl::StrCat("--sync_reduce=", sync_reduce, ": expected mean or sum"));
  }
  if (sync_mode != "sync" && sync_mode != "async") {
    return absl::InvalidArgumentError(
        absl::StrCat("--sync_mode=", sync_mode, ": expected async or sync"));
  }
  launch->sync_mode = sync_mode == "sync";
  if (launch->sync_mode) {
    // Without a scheduler nothing else will say how many workers push.
    if (!config->has_scheduler() &&
        (!config->worker_num.has_value() || *config->worker_num < 1)) {
      return absl::InvalidArgumentError(
          "--sync_mode=sync needs the number of workers (>= 1): "
          "PS_WORKER_NUM (--worker_num) or a scheduler");
    }
    launch->server.sync.num_workers = config->worker_num.value_or(0);
    launch->server.sync.reduce =
        sync_reduce == "sum" ? rpc::SyncReduce::kSum : rpc::SyncReduce::kMean;
  }
  launch->advertise_host = absl::GetFlag(FLAGS_advertise_host);
  if (launch->advertise_host.empty()) {
    launch->advertise_host = launch->server.host;
  }
  launch->cluster_wait =
      absl::Seconds(absl::GetFlag(FLAGS_cluster_wait_seconds));
  launch->node = *std::move(config);

  StoreOptions& store = launch->store;
  store.memory_budget_bytes =
      static_cast<uint64_t>(absl::GetFlag(FLAGS_memory_budget_mb)) << 20;
  store.disk_reserve_bytes =
      static_cast<uint64_t>(absl::GetFlag(FLAGS_disk_reserve_mb)) << 20;
  store.max_batch_keys = launch->server.max_batch_keys;
  store.shard_id = launch->server.shard_id;
  store.restore_from = absl::GetFlag(FLAGS_restore_from);
  store.durability = *durability;
  store.wal_sync = absl::GetFlag(FLAGS_wal_sync);
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<ServerLaunch> ServerLaunchFromFlags(
    const std::vector<std::string>& args, const rpc::SettingMap& env) {
  ServerLaunch launch;
  launch.dry_run = absl::GetFlag(FLAGS_dry_run);
  launch.malloc_keep_mb = absl::GetFlag(FLAGS_malloc_keep_mb);
  if (!args.empty()) {
    if (args.size() == 1 && args[0] == "checkpoint") {
      launch.mode = Mode::kCheckpoint;
      absl::StatusOr<rpc::AdminCheckpointOptions> checkpoint =
          CheckpointFromFlags(env);
      if (!checkpoint.ok()) return checkpoint.status();
      launch.checkpoint = *std::move(checkpoint);
      return launch;
    }
    return absl::InvalidArgumentError(
        absl::StrCat("unknown command '", args[0], "': expected checkpoint"));
  }
  launch.data_dir = absl::GetFlag(FLAGS_data_dir);
  if (launch.data_dir.empty() == absl::GetFlag(FLAGS_serve_from).empty()) {
    return absl::InvalidArgumentError(
        "give exactly one of --data_dir (training) and --serve_from "
        "(read-only serving)");
  }
  absl::StatusOr<rpc::ServerOptions> server = ServerFromFlags();
  if (!server.ok()) return server.status();
  launch.server = *std::move(server);
  launch.shutdown_grace =
      absl::Seconds(absl::GetFlag(FLAGS_shutdown_grace_seconds));
  if (launch.data_dir.empty()) {
    launch.mode = Mode::kServe;
    if (absl::Status serve = ResolveServe(env, &launch); !serve.ok()) {
      return serve;
    }
    return launch;
  }
  launch.mode = Mode::kTrain;
  if (absl::Status train = ResolveTrain(env, &launch); !train.ok()) {
    return train;
  }
  return launch;
}

}  // namespace psdb::tools
