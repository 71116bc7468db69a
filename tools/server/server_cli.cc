#include "tools/server/server_cli.h"

#include <malloc.h>

#include <algorithm>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/flags/parse.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "checkpoint/restore.h"
#include "psdb/store.h"
#include "rpc/control/admin_checkpoint.h"
#include "rpc/control/node_config_flags.h"
#include "rpc/control/scheduler_client.h"
#include "rpc/server/checkpoint_follower.h"
#include "rpc/server/server.h"
#include "rpc/wire/address.h"
#include "rpc/wire/tls.h"
#include "shard/cluster_map.h"
#include "tools/common/args.h"
#include "tools/common/flags_help.h"
#include "tools/common/reserved_port.h"
#include "tools/common/shutdown_signals.h"
#include "tools/common/tls_flags.h"
#include "tools/server/server_flags.h"

namespace psdb::tools {
namespace {

using Mode = ServerLaunch::Mode;

int Fail(std::ostream& err, const absl::Status& status) {
  err << absl::StrCat("ps-server: ", status.ToString(), "\n");
  return 1;
}

// --dry_run's last lines: the PS_* variables of `env` this start reads
// (NodeConfig's, rpc/control/node_config.h) and those it ignores.
int FinishDryRun(const rpc::SettingMap& env, std::ostream& out) {
  std::string read_line, ignored_line;
  for (const auto& [name, value] : env) {
    absl::StrAppend(
        rpc::IsNodeConfigVariable(name) ? &read_line : &ignored_line, " ", name,
        "=", value);
  }
  out << "  PS_* read:" << (read_line.empty() ? " none" : read_line) << "\n";
  if (!ignored_line.empty()) {
    out << "  PS_* ignored (not read by ps-server):" << ignored_line << "\n";
  }
  out << "ps-server --dry_run: ok" << std::endl;
  return 0;
}

std::string TransportSummary(const rpc::ServerOptions& options) {
  if (!options.tls.cert_file.empty()) {
    const std::string ciphers = TlsCiphersFlag();
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
int RunCheckpoint(const ServerLaunch& launch, const rpc::SettingMap& env,
                  std::ostream& out, std::ostream& err) {
  const rpc::AdminCheckpointOptions& options = launch.checkpoint;
  if (launch.dry_run) {
    out << "ps-server --dry_run: checkpoint under "
        << (options.root.empty() ? "(no --root)" : options.root) << " at step "
        << options.step << " of "
        << (options.scheduler_address.empty()
                ? absl::StrCat(options.servers.size(), " listed servers")
                : absl::StrCat("the cluster of scheduler ",
                               options.scheduler_address))
        << "\n";
    return FinishDryRun(env, out);
  }
  auto info = rpc::AdminCheckpoint(options);
  if (!info.ok()) return Fail(err, info.status());
  err << absl::StrCat("ps-server: checkpoint ", info->id, ": step ", info->step,
                      ", ", info->rows, " rows\n");
  out << "checkpoint " << info->path << std::endl;
  return 0;
}

// The ready lines: "metrics on HOST:PORT" (with --metrics_port), then
// "listening on HOST:PORT", which launchers wait for.
void AnnounceServing(const rpc::PsServer& server, std::ostream& out) {
  if (server.metrics_port() >= 0) {
    out << "metrics on " << server.metrics_address() << std::endl;
  }
  out << "listening on " << server.address() << std::endl;
}

// --serve_from: a read-only replica until SIGTERM/SIGINT.
int Serve(const ServerLaunch& launch, const rpc::SettingMap& env,
          const ShutdownSignals& signals, std::ostream& out,
          std::ostream& err) {
  const rpc::ServerOptions& options = launch.server;
  const rpc::FollowerOptions& follow = launch.follow;
  if (launch.dry_run) {
    auto credentials = rpc::MakeServerCredentials(options.tls, options.host);
    if (!credentials.ok()) return Fail(err, credentials.status());
    out << "ps-server --dry_run: serving replica of "
        << (follow.shard_id == rpc::kAllShards
                ? std::string("every shard")
                : absl::StrCat("shard ", options.shard_id))
        << " of the checkpoints under " << follow.root
        << (follow.interval > absl::ZeroDuration()
                ? absl::StrCat(", looked for as manifests are renamed in "
                               "(inotify) and every ",
                               absl::ToInt64Seconds(follow.interval), " s\n")
                : std::string(", the first one only\n"))
        << "  listen " << options.host << ":" << options.port << ", "
        << TransportSummary(options) << ", memory budget "
        << (follow.store.memory_budget_bytes >> 20) << " MiB, metrics port "
        << options.metrics_port << "\n";
    return FinishDryRun(env, out);
  }
  auto follower = rpc::CheckpointFollower::Start(follow);
  if (!follower.ok()) return Fail(err, follower.status());
  auto server = rpc::PsServer::StartServing(options, follower->get());
  if (!server.ok()) return Fail(err, server.status());
  AnnounceServing(**server, out);

  const int signal_number = signals.Wait();
  err << absl::StrCat("ps-server: signal ", signal_number, ", shutting down\n");
  (*server)->Shutdown(launch.shutdown_grace);
  server->reset();
  follower->reset();
  err << "ps-server: stopped cleanly\n";
  return 0;
}

// --dry_run of a training server.
int DryRunTrain(const ServerLaunch& launch, const rpc::SettingMap& env,
                std::ostream& out, std::ostream& err) {
  const rpc::ServerOptions& options = launch.server;
  auto credentials = rpc::MakeServerCredentials(options.tls, options.host);
  if (!credentials.ok()) return Fail(err, credentials.status());
  const rpc::NodeConfig& node = launch.node;
  std::string place;
  if (node.has_scheduler()) {
    place = absl::StrCat(
        "  scheduler ", node.SchedulerAddress(),
        node.join ? " (joining the running cluster)" : "", ", node id ",
        node.node_id, node.node_id_generated ? " (generated)" : "",
        ", advertised as ", launch.advertise_host, ":",
        options.port == 0 ? "(free port)" : absl::StrCat(options.port), "\n");
  } else if (!options.cluster.servers().empty()) {
    place =
        absl::StrCat("  static cluster of ", options.cluster.servers().size(),
                     " servers, this one shard ", options.shard_id, "\n");
  } else {
    place = "  lone server (no scheduler, no --servers)\n";
  }
  const StoreOptions& store = launch.store;
  out << "ps-server --dry_run: training server, store " << launch.data_dir
      << (store.restore_from.empty() ? ""
                                     : absl::StrCat(" (empty: restored from ",
                                                    store.restore_from, ")"))
      << "\n  listen " << options.host << ":" << options.port << ", "
      << TransportSummary(options) << "\n"
      << place << "  sync_mode " << (launch.sync_mode ? "sync" : "async")
      << (launch.sync_mode
              ? absl::StrCat(" (",
                             options.sync.reduce == rpc::SyncReduce::kSum
                                 ? "sum"
                                 : "mean",
                             ")")
              : "")
      << ", memory budget " << (store.memory_budget_bytes >> 20)
      << " MiB, durability "
      << (store.durability == Durability::kWal ? "wal" : "checkpoint")
      << (store.wal_sync ? " (synced)" : "") << ", metrics port "
      << options.metrics_port << "\n";
  return FinishDryRun(env, out);
}

// --data_dir: a training server until SIGTERM/SIGINT: placed by the
// scheduler (when there is one), its store restored or opened, served.
int Train(ServerLaunch launch, const ShutdownSignals& signals,
          std::ostream& out, std::ostream& err) {
  rpc::ServerOptions& options = launch.server;
  rpc::NodeConfig& node = launch.node;
  std::unique_ptr<rpc::SchedulerClient> scheduler;
  // Keeps a picked port ours until gRPC binds it.
  std::optional<ReservedPort> held_port;
  if (node.has_scheduler()) {
    if (options.port == 0) {
      // The address must be known before registering.
      held_port.emplace(ReservedPort::Scope::kAnyAddress);
      if (held_port->port() == 0) {
        return Fail(err, absl::UnavailableError("cannot pick a free port"));
      }
      options.port = held_port->port();
    }
    err << absl::StrCat("ps-server: node id:", node.node_id,
                        " joining scheduler ", node.SchedulerAddress(), "\n");
    // The scheduler is reached as a peer is: --tls_ca, --tls_cert/--tls_key.
    auto joined = rpc::JoinClusterAsServer(
        node, rpc::JoinHostPort(launch.advertise_host, options.port),
        options.peer_tls, launch.cluster_wait);
    if (!joined.ok()) return Fail(err, joined.status());
    scheduler = std::move(joined->first);
    const rpc::ServerPlacement& placement = joined->second;
    options.cluster = placement.cluster;
    options.shard_id = placement.rank;
    if (!node.worker_num.has_value()) node.worker_num = placement.worker_num;
    const ServerInfo* self =
        placement.cluster.Find(static_cast<ServerId>(placement.rank));
    err << absl::StrCat("ps-server: node id:", node.node_id, " rank ",
                        placement.rank, " of ",
                        placement.cluster.servers().size(), " servers, epoch ",
                        placement.cluster.epoch(),
                        placement.recovered ? " (rank taken back)" : "",
                        self != nullptr && self->state == ServerState::kJoining
                            ? " (joining: no keys until add-server)"
                            : "",
                        "\n");
  }
  if (launch.sync_mode) {
    if (!node.worker_num.has_value() || *node.worker_num < 1) {
      return Fail(err, absl::InvalidArgumentError(
                           "--sync_mode=sync needs the number of workers (>= "
                           "1): PS_WORKER_NUM (--worker_num) or a scheduler"));
    }
    options.sync.num_workers = *node.worker_num;
  }

  StoreOptions& store_options = launch.store;
  store_options.shard_id = options.shard_id;
  const std::string& data_dir = launch.data_dir;
  // A checkpoint cut for another ring: this server's rows are gathered
  // from the source shards that can hold them before the store opens.
  auto prepared = ckpt::PrepareRestoreForRing(
      store_options.restore_from, options.cluster.ring(), options.shard_id,
      data_dir, store_options.file_system);
  if (!prepared.ok()) return Fail(err, prepared.status());
  if (prepared->has_value()) {
    err << absl::StrCat("ps-server: restored ", (*prepared)->rows,
                        " rows owned by server ", options.shard_id, " of ",
                        options.cluster.ring().num_servers(),
                        " from checkpoint shards ",
                        absl::StrJoin((*prepared)->source_shards, ","),
                        " (cut for another ring)\n");
  }
  auto store = Store::Open(store_options, data_dir);
  if (!store.ok()) {
    // A failed start leaves the data directory as before the attempt, so
    // the next --restore_from restores again rather than finding a db.
    if (prepared->has_value()) {
      std::error_code ignored;
      std::filesystem::remove_all(Store::DbPath(data_dir), ignored);
    }
    return Fail(err, store.status());
  }
  if ((*store)->read_only()) {
    // Store::Open's answer to a disk that refuses writes (psdb/store.h).
    err << absl::StrCat(
        "ps-server: the disk of ", data_dir,
        " refuses writes: the store is open read-only (pulls work, writes "
        "are refused) until the disk takes writes again\n");
  }
  if (const StoreStats stats = (*store)->Stats();
      stats.disk_reserve_held_bytes < stats.disk_reserve_bytes) {
    // A restart on a full disk gave the reserve's room to the open, or
    // found no room to write it (psdb/store.h).
    err << absl::StrCat("ps-server: the disk of ", data_dir,
                        " has no room for the ", stats.disk_reserve_bytes,
                        "-byte disk reserve: running without it until it "
                        "has\n");
  }

  auto server = rpc::PsServer::Start(options, store->get());
  if (!server.ok()) return Fail(err, server.status());
  held_port.reset();
  AnnounceServing(**server, out);

  const int signal_number = signals.Wait();
  err << absl::StrCat("ps-server: signal ", signal_number, ", shutting down\n");
  if (scheduler != nullptr) scheduler->StopHeartbeats();
  (*server)->Shutdown(launch.shutdown_grace);
  server->reset();
  const absl::Status closed = (*store)->Close();
  store->reset();
  if (!closed.ok()) {
    err << "ps-server: shutdown could not flush the store\n";
    return Fail(err, closed);
  }
  err << "ps-server: stopped cleanly\n";
  return 0;
}

}  // namespace

int RunServer(int argc, char** argv, std::ostream& out, std::ostream& err) {
  SetFlagsHelp(
      "ps-server --data_dir=DIR [--port=P] [--servers=h1:p1,... "
      "--shard_id=K] [--tls_cert=... --tls_key=... [--tls_ca=... "
      "--require_client_cert --tls_crl=...] [--tls_ciphers=A:B]]\n"
      "ps-server --serve_from=CKPT_ROOT [--shard_id=K] [--port=P] "
      "[--follow_interval_s=S] [--serve_versions=K]\n"
      "ps-server checkpoint --root=DIR [--step=S] "
      "(PS_SCHED_HOST/PS_SCHED_PORT or --sched_host/--sched_port, or "
      "PS_SCHED_ADDRESSES or --sched_addresses | --servers=h1:p1,...)",
      {{"tools/server/server_flags.cc", "ps-server"},
       {"tools/common/tls_flags.cc", "ps-server TLS"},
       {"rpc/control/node_config_flags.cc",
        "ps-server cluster (PS_* variables)"}});
  const std::vector<char*> positional = absl::ParseCommandLine(argc, argv);
  // Before anything makes a TLS connection: gRPC reads the list once.
  if (absl::Status set = ApplyTlsCiphersFlag(); !set.ok()) {
    return Fail(err, set);
  }
  const rpc::SettingMap env = PsVariablesInEnvironment();
  absl::StatusOr<ServerLaunch> launch = ServerLaunchFromFlags(
      std::vector<std::string>(positional.begin() + 1, positional.end()), env);
  if (!launch.ok()) return Fail(err, launch.status());
  // Batches of whole rows (PullRows, PutRows, Migrate: hundreds of KiB
  // each) would otherwise each get fresh mmap'd pages, which the kernel
  // faults in and zeroes, and give them back when freed: on a migration's
  // destination that page clearing was most of its CPU time.
  if (launch->malloc_keep_mb > 0) {
    mallopt(M_MMAP_THRESHOLD, 32 << 20);
    mallopt(M_TRIM_THRESHOLD,
            static_cast<int>(std::min<int64_t>(launch->malloc_keep_mb, 1024)
                             << 20));
  }
  switch (launch->mode) {
    case Mode::kCheckpoint:
      return RunCheckpoint(*launch, env, out, err);
    case Mode::kServe: {
      const ShutdownSignals signals = ShutdownSignals::Block();
      return Serve(*launch, env, signals, out, err);
    }
    case Mode::kTrain:
      break;
  }
  if (launch->dry_run) return DryRunTrain(*launch, env, out, err);
  // Before any thread starts, so every thread inherits the mask and this
  // one alone receives them.
  const ShutdownSignals signals = ShutdownSignals::Block();
  return Train(*std::move(launch), signals, out, err);
}

}  // namespace psdb::tools
