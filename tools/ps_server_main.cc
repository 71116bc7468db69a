// ps-server: hosts one Store shard behind gRPC (rpc/server/server.h).
//
//   ps-server --data_dir=/data/psdb --port=7000
//   ps-server --data_dir=D --host=0.0.0.0 --port=7000
//             --servers=h1:7000,h2:7000,h3:7000 --shard_id=1
//             --tls_cert=server.pem --tls_key=server.key  (one command)
//
// With a scheduler (PS_SCHED_HOST + PS_SCHED_PORT, or --sched_host and
// --sched_port; or several sharing etcd, PS_SCHED_ADDRESSES=h1:p1,h2:p2 or
// --sched_addresses; rpc/control/node_config.h) the server registers as
// PS_NODE_ID, waits for the cluster to form and takes its rank, server list
// and epoch from the scheduler's map instead of --servers/--shard_id:
//   PS_SCHED_HOST=10.0.0.9 PS_SCHED_PORT=7100 PS_NODE_ID=server-0
//     ps-server --data_dir=D --port=7000 [--sync_mode=sync]  (one command)
//
// Growing a running cluster: --join (PS_JOIN=1) registers the server as
// JOINING under a new rank; it serves but owns no key until `ps-scheduler
// add-server --node_id=ID` moves its rows to it and publishes the map.
// After `ps-scheduler drain-server` the drained server logs "drained: this
// server owns no keys and may be stopped" and stops beating; stop it then.
//
// Prints "listening on HOST:PORT" once it serves (--port=0 picks a free
// port). SIGTERM or SIGINT: stop accepting, let in-flight requests finish
// (up to --shutdown_grace_seconds), then close the store cleanly (dirty rows
// and memtables flushed). Exit status 0 after a clean shutdown, 1 on a
// startup error or a shutdown that could not flush (the message says how
// many rows are not in files; psdb/store.h, "Disk full and I/O errors").
// While the disk refuses writes, pushes that need room fail with
// RESOURCE_EXHAUSTED naming the table and the cause; reads keep working.
// With --metrics_port (training or serving) it first prints "metrics on
// HOST:PORT": Prometheus text at /metrics (rpc/server/server_metrics.h).
//
// Read-only serving replica (rpc/server/checkpoint_follower.h): serves shard
// K of the newest complete checkpoint under ROOT that verifies, with a
// memory tier of --memory_budget_mb over the checkpoint's files, and swaps
// in each newer one (looked for every --follow_interval_s seconds):
//   ps-server --serve_from=/shared/ckpt [--shard_id=K | --serve_all_shards]
//             --port=7400  (one command)
// No --data_dir and no scheduler: replicas are outside the training cluster.
//
// Admin call: a cluster checkpoint (rpc/control/admin_checkpoint.h). Every
// server writes its shard of every table under one checkpoint id, then the
// cluster manifest is written; prints "checkpoint PATH" and exits 0, or exits 1
// with the error naming the failed server (no manifest is left):
//   PS_SCHED_HOST=10.0.0.9 PS_SCHED_PORT=7100
//     ps-server checkpoint --root=/shared/ckpt [--step=S]  (one command)
//   ps-server checkpoint --servers=h1:7000,h2:7000 --root=/shared/ckpt
//
// --dry_run (any of the above): resolve and validate every flag and PS_*
// variable as that start would, print the settings (and which PS_*
// variables of the environment it reads and which it ignores) and exit 0,
// or exit 1 naming the problem. Binds no port, opens no store, creates no
// file and connects to nothing (it reads the TLS files, as a start would):
// tests/deploy/check_deploy.py runs each manifest's ps-server this way.
#include <malloc.h>
#include <signal.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "rpc/control/admin_checkpoint.h"
#include "rpc/control/node_config_flags.h"
#include "rpc/control/scheduler_client.h"
#include "rpc/server/server.h"
#include "rpc/wire/address.h"
#include "rpc/wire/tls.h"
#include "shard/ring.h"
#include "checkpoint/restore.h"
#include "psdb/store.h"
#include "tools/common/args.h"
#include "tools/common/flags_help.h"
#include "tools/common/reserved_port.h"
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
          "With --serve_from: seconds between looks for a newer checkpoint; "
          "0 = serve the first one only.");
ABSL_FLAG(int, metrics_port, -1,
          "Serve Prometheus metrics over HTTP at /metrics on this port; "
          "0 picks a free one, -1 = off.");
ABSL_FLAG(std::string, metrics_host, "",
          "Address the metrics endpoint binds; default --host.");
ABSL_FLAG(std::string, sync_mode, "async",
          "async: each push applied on arrival; sync (BSP): a step's pushes "
          "from all workers are aggregated and applied once.");
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

namespace {

int Fail(const absl::Status& status) {
  std::fprintf(stderr, "ps-server: %s\n", status.ToString().c_str());
  return 1;
}

// --dry_run's last lines: the PS_* variables of the environment this start
// reads (NodeConfig's, rpc/control/node_config.h) and those it ignores.
int FinishDryRun() {
  const psdb::rpc::SettingMap read = psdb::rpc::ReadPsEnvironment();
  std::string read_line, ignored_line;
  for (const auto& [name, value] : psdb::tools::PsVariablesInEnvironment()) {
    absl::StrAppend(read.contains(name) ? &read_line : &ignored_line, " ", name,
                    "=", value);
  }
  std::cout << "  PS_* read:" << (read_line.empty() ? " none" : read_line)
            << "\n";
  if (!ignored_line.empty()) {
    std::cout << "  PS_* ignored (not read by ps-server):" << ignored_line
              << "\n";
  }
  std::cout << "ps-server --dry_run: ok" << std::endl;
  return 0;
}

std::string TransportSummary(const psdb::rpc::ServerOptions& options) {
  if (!options.tls.cert_file.empty()) {
    const std::string ciphers = psdb::tools::TlsCiphersFlag();
    return absl::StrCat(
        "TLS ", options.tls.cert_file,
        options.tls.require_client_cert ? ", client certificates required" : "",
        options.tls.crl_file.empty()
            ? ""
            : absl::StrCat(", revocations from ", options.tls.crl_file),
        ciphers.empty() ? "" : absl::StrCat(", TLS 1.2 ciphers ", ciphers));
  }
  return options.tls.insecure ? "plaintext (--insecure)" : "plaintext";
}

// `ps-server checkpoint`: the admin call (rpc/control/admin_checkpoint.h).
int RunCheckpoint() {
  psdb::rpc::AdminCheckpointOptions options;
  options.root = absl::GetFlag(FLAGS_root);
  options.step = absl::GetFlag(FLAGS_step);
  options.cluster_epoch = absl::GetFlag(FLAGS_cluster_epoch);
  options.timeout =
      absl::Seconds(absl::GetFlag(FLAGS_checkpoint_timeout_seconds));
  options.tls = psdb::tools::PeerTlsFromFlags();
  if (!absl::GetFlag(FLAGS_servers).empty()) {
    auto servers = psdb::ParseServerList(absl::GetFlag(FLAGS_servers));
    if (!servers.ok()) return Fail(servers.status());
    options.servers = *std::move(servers);
  }
  auto config =
      psdb::rpc::NodeConfigFromEnvAndFlags(psdb::rpc::NodeRoleKind::kServer);
  if (!config.ok()) return Fail(config.status());
  options.scheduler_address = config->SchedulerAddress();
  if (absl::GetFlag(FLAGS_dry_run)) {
    std::cout << "ps-server --dry_run: checkpoint under "
              << (options.root.empty() ? "(no --root)" : options.root)
              << " at step " << options.step << " of "
              << (options.scheduler_address.empty()
                      ? absl::StrCat(options.servers.size(), " listed servers")
                      : absl::StrCat("the cluster of scheduler ",
                                     options.scheduler_address))
              << "\n";
    return FinishDryRun();
  }
  auto info = psdb::rpc::AdminCheckpoint(options);
  if (!info.ok()) return Fail(info.status());
  std::fprintf(stderr, "ps-server: checkpoint %s: step %lld, %llu rows\n",
               info->id.c_str(), static_cast<long long>(info->step),
               static_cast<unsigned long long>(info->rows));
  std::cout << "checkpoint " << info->path << std::endl;
  return 0;
}

// The ready lines: "metrics on HOST:PORT" (with --metrics_port), then
// "listening on HOST:PORT", which launchers wait for.
void AnnounceServing(const psdb::rpc::PsServer& server) {
  if (server.metrics_port() >= 0) {
    std::cout << "metrics on " << server.metrics_address() << std::endl;
  }
  std::cout << "listening on " << server.address() << std::endl;
}

// --serve_from: a read-only replica until SIGTERM/SIGINT.
int Serve(const std::string& root, const psdb::rpc::ServerOptions& options,
          const sigset_t& signals) {
  if (!absl::GetFlag(FLAGS_servers).empty() ||
      !absl::GetFlag(FLAGS_restore_from).empty()) {
    return Fail(absl::InvalidArgumentError(
        "--servers and --restore_from do not apply to --serve_from: a "
        "replica serves the checkpoint's own shard under its own ring"));
  }
  if (absl::GetFlag(FLAGS_sync_mode) != "async") {
    return Fail(absl::InvalidArgumentError(
        "--sync_mode does not apply to --serve_from (no pushes)"));
  }
  auto config =
      psdb::rpc::NodeConfigFromEnvAndFlags(psdb::rpc::NodeRoleKind::kServer);
  if (!config.ok()) return Fail(config.status());
  if (config->has_scheduler()) {
    return Fail(absl::InvalidArgumentError(
        "--serve_from: a serving replica does not join a scheduler (unset "
        "PS_SCHED_HOST/PS_SCHED_PORT and PS_SCHED_ADDRESSES)"));
  }
  if (absl::GetFlag(FLAGS_follow_interval_s) < 0) {
    return Fail(absl::InvalidArgumentError("--follow_interval_s must be >= 0"));
  }
  if (absl::GetFlag(FLAGS_dry_run)) {
    auto credentials =
        psdb::rpc::MakeServerCredentials(options.tls, options.host);
    if (!credentials.ok()) return Fail(credentials.status());
    std::cout << "ps-server --dry_run: serving replica of "
              << (absl::GetFlag(FLAGS_serve_all_shards)
                      ? std::string("every shard")
                      : absl::StrCat("shard ", options.shard_id))
              << " of the checkpoints under " << root << ", looked for every "
              << absl::GetFlag(FLAGS_follow_interval_s) << " s\n"
              << "  listen " << options.host << ":" << options.port << ", "
              << TransportSummary(options) << ", memory budget "
              << absl::GetFlag(FLAGS_memory_budget_mb) << " MiB, metrics port "
              << options.metrics_port << "\n";
    return FinishDryRun();
  }
  psdb::rpc::FollowerOptions follow;
  follow.root = root;
  follow.shard_id = absl::GetFlag(FLAGS_serve_all_shards)
                        ? psdb::rpc::kAllShards
                        : options.shard_id;
  follow.interval = absl::Seconds(absl::GetFlag(FLAGS_follow_interval_s));
  follow.store.memory_budget_bytes =
      static_cast<uint64_t>(absl::GetFlag(FLAGS_memory_budget_mb)) << 20;
  follow.store.max_batch_keys = options.max_batch_keys;
  auto follower = psdb::rpc::CheckpointFollower::Start(follow);
  if (!follower.ok()) return Fail(follower.status());
  auto server = psdb::rpc::PsServer::StartServing(options, follower->get());
  if (!server.ok()) return Fail(server.status());
  AnnounceServing(**server);

  int signal_number = 0;
  sigwait(&signals, &signal_number);
  std::fprintf(stderr, "ps-server: signal %d, shutting down\n", signal_number);
  (*server)->Shutdown(
      absl::Seconds(absl::GetFlag(FLAGS_shutdown_grace_seconds)));
  server->reset();
  follower->reset();
  std::fprintf(stderr, "ps-server: stopped cleanly\n");
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  psdb::tools::SetFlagsHelp(
      "ps-server --data_dir=DIR [--port=P] [--servers=h1:p1,... "
      "--shard_id=K] [--tls_cert=... --tls_key=... [--tls_ca=... "
      "--require_client_cert --tls_crl=...] [--tls_ciphers=A:B]]\n"
      "ps-server --serve_from=CKPT_ROOT [--shard_id=K] [--port=P] "
      "[--follow_interval_s=S]\n"
      "ps-server checkpoint --root=DIR [--step=S] "
      "(PS_SCHED_HOST/PS_SCHED_PORT or --sched_host/--sched_port, or "
      "PS_SCHED_ADDRESSES or --sched_addresses | --servers=h1:p1,...)",
      {{"tools/ps_server_main.cc", "ps-server"},
       {"tools/common/tls_flags.cc", "ps-server TLS"},
       {"rpc/control/node_config_flags.cc",
        "ps-server cluster (PS_* variables)"}});
  std::vector<char*> positional = absl::ParseCommandLine(argc, argv);
  // Before anything makes a TLS connection: gRPC reads the list once.
  if (absl::Status set = psdb::tools::ApplyTlsCiphersFlag(); !set.ok()) {
    return Fail(set);
  }
  // Batches of whole rows (PullRows, PutRows, Migrate: hundreds of KiB
  // each) would otherwise each get fresh mmap'd pages, which the kernel
  // faults in and zeroes, and give them back when freed: on a migration's
  // destination that page clearing was most of its CPU time.
  if (const int64_t keep_mb = absl::GetFlag(FLAGS_malloc_keep_mb);
      keep_mb > 0) {
    mallopt(M_MMAP_THRESHOLD, 32 << 20);
    mallopt(M_TRIM_THRESHOLD,
            static_cast<int>(std::min<int64_t>(keep_mb, 1024) << 20));
  }
  if (positional.size() > 1) {
    if (positional.size() == 2 && std::string(positional[1]) == "checkpoint") {
      return RunCheckpoint();
    }
    return Fail(absl::InvalidArgumentError(absl::StrCat(
        "unknown command '", positional[1], "': expected checkpoint")));
  }

  // Block the shutdown signals before any thread starts so every thread
  // inherits the mask and main alone receives them, with sigwait.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  const std::string data_dir = absl::GetFlag(FLAGS_data_dir);
  const std::string serve_from = absl::GetFlag(FLAGS_serve_from);
  if (data_dir.empty() == serve_from.empty()) {
    return Fail(absl::InvalidArgumentError(
        "give exactly one of --data_dir (training) and --serve_from "
        "(read-only serving)"));
  }
  psdb::rpc::ServerOptions options;
  options.host = absl::GetFlag(FLAGS_host);
  options.port = absl::GetFlag(FLAGS_port);
  options.num_threads = absl::GetFlag(FLAGS_threads);
  if (absl::GetFlag(FLAGS_max_batch_keys) < 1) {
    return Fail(absl::InvalidArgumentError("--max_batch_keys must be >= 1"));
  }
  if (absl::GetFlag(FLAGS_disk_reserve_mb) < 0) {
    return Fail(absl::InvalidArgumentError("--disk_reserve_mb must be >= 0"));
  }
  options.max_batch_keys =
      static_cast<size_t>(absl::GetFlag(FLAGS_max_batch_keys));
  options.max_dim = absl::GetFlag(FLAGS_max_dim);
  options.shard_id = absl::GetFlag(FLAGS_shard_id);
  options.cluster = psdb::ClusterMap::Empty(absl::GetFlag(FLAGS_cluster_epoch));
  if (!absl::GetFlag(FLAGS_servers).empty()) {
    auto servers = psdb::ParseServerList(absl::GetFlag(FLAGS_servers));
    if (!servers.ok()) return Fail(servers.status());
    auto cluster = psdb::ClusterMap::FromAddresses(
        *servers, absl::GetFlag(FLAGS_cluster_epoch));
    if (!cluster.ok()) return Fail(cluster.status());
    options.cluster = *std::move(cluster);
  }
  options.tls = psdb::tools::ServerTlsFromFlags();
  // Live resharding sends rows to peers (Migrate).
  options.peer_tls = psdb::tools::PeerTlsFromFlags();
  options.metrics_port = absl::GetFlag(FLAGS_metrics_port);
  options.metrics_host = absl::GetFlag(FLAGS_metrics_host);

  if (!serve_from.empty()) return Serve(serve_from, options, signals);

  auto config =
      psdb::rpc::NodeConfigFromEnvAndFlags(psdb::rpc::NodeRoleKind::kServer);
  if (!config.ok()) return Fail(config.status());
  if (config->has_scheduler() && !absl::GetFlag(FLAGS_servers).empty()) {
    return Fail(absl::InvalidArgumentError(
        "--servers contradicts the scheduler (PS_SCHED_HOST/PS_SCHED_PORT "
        "or PS_SCHED_ADDRESSES): it assigns the server list"));
  }
  if (config->join && !absl::GetFlag(FLAGS_restore_from).empty()) {
    return Fail(absl::InvalidArgumentError(
        "--join with --restore_from: a joining server owns no keys until "
        "add-server, which moves its rows to it"));
  }
  // Checked before joining: a bad mode must not take a rank first.
  const std::string sync_mode = absl::GetFlag(FLAGS_sync_mode);
  const std::string sync_reduce = absl::GetFlag(FLAGS_sync_reduce);
  const absl::StatusOr<psdb::Durability> durability =
      psdb::ParseDurability(absl::GetFlag(FLAGS_durability));
  if (!durability.ok()) return Fail(durability.status());
  if (sync_reduce != "mean" && sync_reduce != "sum") {
    return Fail(absl::InvalidArgumentError(
        absl::StrCat("--sync_reduce=", sync_reduce, ": expected mean or sum")));
  }
  if (sync_mode != "sync" && sync_mode != "async") {
    return Fail(absl::InvalidArgumentError(
        absl::StrCat("--sync_mode=", sync_mode, ": expected async or sync")));
  }
  if (absl::GetFlag(FLAGS_dry_run)) {
    if (sync_mode == "sync" && !config->has_scheduler() &&
        (!config->worker_num.has_value() || *config->worker_num < 1)) {
      return Fail(absl::InvalidArgumentError(
          "--sync_mode=sync needs the number of workers (>= 1): "
          "PS_WORKER_NUM (--worker_num) or a scheduler"));
    }
    auto credentials =
        psdb::rpc::MakeServerCredentials(options.tls, options.host);
    if (!credentials.ok()) return Fail(credentials.status());
    std::string place;
    if (config->has_scheduler()) {
      std::string host = absl::GetFlag(FLAGS_advertise_host);
      place = absl::StrCat(
          "  scheduler ", config->SchedulerAddress(),
          config->join ? " (joining the running cluster)" : "", ", node id ",
          config->node_id, config->node_id_generated ? " (generated)" : "",
          ", advertised as ", host.empty() ? options.host : host, ":",
          options.port == 0 ? "(free port)" : absl::StrCat(options.port), "\n");
    } else if (!absl::GetFlag(FLAGS_servers).empty()) {
      place =
          absl::StrCat("  static cluster of ", options.cluster.servers().size(),
                       " servers, this one shard ", options.shard_id, "\n");
    } else {
      place = "  lone server (no scheduler, no --servers)\n";
    }
    std::cout << "ps-server --dry_run: training server, store " << data_dir
              << (absl::GetFlag(FLAGS_restore_from).empty()
                      ? ""
                      : absl::StrCat(" (empty: restored from ",
                                     absl::GetFlag(FLAGS_restore_from), ")"))
              << "\n  listen " << options.host << ":" << options.port << ", "
              << TransportSummary(options) << "\n"
              << place << "  sync_mode " << sync_mode
              << (sync_mode == "sync" ? absl::StrCat(" (", sync_reduce, ")")
                                      : "")
              << ", memory budget " << absl::GetFlag(FLAGS_memory_budget_mb)
              << " MiB, durability " << absl::GetFlag(FLAGS_durability)
              << (absl::GetFlag(FLAGS_wal_sync) ? " (synced)" : "")
              << ", metrics port " << options.metrics_port << "\n";
    return FinishDryRun();
  }
  std::unique_ptr<psdb::rpc::SchedulerClient> scheduler;
  // Keeps a picked port ours until gRPC binds it.
  std::optional<psdb::tools::ReservedPort> held_port;
  if (config->has_scheduler()) {
    if (options.port == 0) {
      // The address must be known before registering.
      held_port.emplace(psdb::tools::ReservedPort::Scope::kAnyAddress);
      if (held_port->port() == 0) {
        return Fail(absl::UnavailableError("cannot pick a free port"));
      }
      options.port = held_port->port();
    }
    std::string host = absl::GetFlag(FLAGS_advertise_host);
    if (host.empty()) host = options.host;
    psdb::rpc::ClientTlsOptions sched_tls;
    sched_tls.ca_file = options.tls.ca_file;
    sched_tls.cert_file = options.tls.cert_file;
    sched_tls.key_file = options.tls.key_file;
    sched_tls.insecure = options.tls.insecure;
    std::fprintf(stderr, "ps-server: node id:%s joining scheduler %s\n",
                 config->node_id.c_str(), config->SchedulerAddress().c_str());
    auto joined = psdb::rpc::JoinClusterAsServer(
        *config, psdb::rpc::JoinHostPort(host, options.port), sched_tls,
        absl::Seconds(absl::GetFlag(FLAGS_cluster_wait_seconds)));
    if (!joined.ok()) return Fail(joined.status());
    scheduler = std::move(joined->first);
    const psdb::rpc::ServerPlacement& placement = joined->second;
    options.cluster = placement.cluster;
    options.shard_id = placement.rank;
    if (!config->worker_num.has_value()) {
      config->worker_num = placement.worker_num;
    }
    const psdb::ServerInfo* self =
        placement.cluster.Find(static_cast<psdb::ServerId>(placement.rank));
    std::fprintf(
        stderr,
        "ps-server: node id:%s rank %d of %zu servers, epoch %llu%s%s\n",
        config->node_id.c_str(), placement.rank,
        placement.cluster.servers().size(),
        static_cast<unsigned long long>(placement.cluster.epoch()),
        placement.recovered ? " (rank taken back)" : "",
        self != nullptr && self->state == psdb::ServerState::kJoining
            ? " (joining: no keys until add-server)"
            : "");
  }
  if (sync_mode == "sync") {
    if (!config->worker_num.has_value() || *config->worker_num < 1) {
      return Fail(absl::InvalidArgumentError(
          "--sync_mode=sync needs the number of workers (>= 1): "
          "PS_WORKER_NUM (--worker_num) or a scheduler"));
    }
    options.sync.num_workers = *config->worker_num;
    options.sync.reduce = sync_reduce == "sum" ? psdb::rpc::SyncReduce::kSum
                                               : psdb::rpc::SyncReduce::kMean;
  }

  psdb::StoreOptions store_options;
  store_options.memory_budget_bytes =
      static_cast<uint64_t>(absl::GetFlag(FLAGS_memory_budget_mb)) << 20;
  store_options.disk_reserve_bytes =
      static_cast<uint64_t>(absl::GetFlag(FLAGS_disk_reserve_mb)) << 20;
  store_options.max_batch_keys = options.max_batch_keys;
  store_options.shard_id = options.shard_id;
  store_options.restore_from = absl::GetFlag(FLAGS_restore_from);
  store_options.durability = *durability;
  store_options.wal_sync = absl::GetFlag(FLAGS_wal_sync);
  // A checkpoint cut for another ring: this server's rows are gathered
  // from the source shards that can hold them before the store opens.
  auto prepared = psdb::ckpt::PrepareRestoreForRing(
      store_options.restore_from, options.cluster.ring(), options.shard_id,
      data_dir, store_options.file_system);
  if (!prepared.ok()) return Fail(prepared.status());
  if (prepared->has_value()) {
    std::fprintf(stderr,
                 "ps-server: restored %llu rows owned by server %d of %d "
                 "from checkpoint shards %s (cut for another ring)\n",
                 static_cast<unsigned long long>((*prepared)->rows),
                 options.shard_id,
                 static_cast<int>(options.cluster.ring().num_servers()),
                 absl::StrJoin((*prepared)->source_shards, ",").c_str());
  }
  auto store = psdb::Store::Open(store_options, data_dir);
  if (!store.ok()) {
    // A failed start leaves the data directory as before the attempt, so
    // the next --restore_from restores again rather than finding a db.
    if (prepared->has_value()) {
      std::error_code ignored;
      std::filesystem::remove_all(psdb::Store::DbPath(data_dir), ignored);
    }
    return Fail(store.status());
  }
  if ((*store)->read_only()) {
    // Store::Open's answer to a disk that refuses writes (psdb/store.h).
    std::fprintf(stderr,
                 "ps-server: the disk of %s refuses writes: the store is "
                 "open read-only (pulls work, writes are refused) until the "
                 "disk takes writes again\n",
                 data_dir.c_str());
  }
  if (const psdb::StoreStats stats = (*store)->Stats();
      stats.disk_reserve_held_bytes < stats.disk_reserve_bytes) {
    // A restart on a full disk gave the reserve's room to the open, or
    // found no room to write it (psdb/store.h).
    std::fprintf(stderr,
                 "ps-server: the disk of %s has no room for the %llu-byte "
                 "disk reserve: running without it until it has\n",
                 data_dir.c_str(),
                 static_cast<unsigned long long>(stats.disk_reserve_bytes));
  }

  auto server = psdb::rpc::PsServer::Start(options, store->get());
  if (!server.ok()) return Fail(server.status());
  held_port.reset();
  AnnounceServing(**server);

  int signal_number = 0;
  sigwait(&signals, &signal_number);
  std::fprintf(stderr, "ps-server: signal %d, shutting down\n", signal_number);
  if (scheduler != nullptr) scheduler->StopHeartbeats();
  (*server)->Shutdown(
      absl::Seconds(absl::GetFlag(FLAGS_shutdown_grace_seconds)));
  server->reset();
  const absl::Status closed = (*store)->Close();
  store->reset();
  if (!closed.ok()) {
    std::fprintf(stderr, "ps-server: shutdown could not flush the store\n");
    return Fail(closed);
  }
  std::fprintf(stderr, "ps-server: stopped cleanly\n");
  return 0;
}
