// ps-train's entry point (tools/train/train_cli.h): the command line parsed
// and dispatched, and the training run: the checks that depend on the
// store URL, --dry_run, opening the client (or joining the cluster), the
// worker cache, the trainer. Split by concern: the usage text
// (train_usage.cc), the training flags into TrainerOptions
// (train_flags.cc), `ps-train gen` (train_gen.cc).
#include "tools/train/train_cli.h"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "collective/group.h"
#include "psdb/client_url.h"
#include "psdb/local_client.h"
#include "rpc/client/cluster_worker.h"
#include "tools/common/args.h"
#include "tools/train/train_flags.h"
#include "tools/train/train_gen.h"
#include "tools/train/train_usage.h"
#include "train/embedding_source.h"
#include "train/trainer.h"
#include "util/status_macros.h"
#ifdef PSDB_TRAIN_HAVE_CACHE
#include "cache/backend.h"
#include "train/cached_embedding_source.h"
#endif

namespace psdb::train {
namespace cli {
namespace {

int RunTrainCommand(const tools::Args& args, std::ostream& out,
                    std::ostream& err) {
  TrainerOptions o;
  CacheFlags cache_flags;
  int64_t memory_budget_mb = 0;
  std::string store;
  absl::Status parsed =
      ParseTrainOptions(args, &o, &cache_flags, &store, &memory_budget_mb);
  if (!parsed.ok()) return Usage(err, parsed);
  const absl::StatusOr<Durability> durability =
      ParseDurability(args.GetString("durability", "checkpoint"));
  if (!durability.ok()) return Usage(err, durability.status());
  const bool cluster = absl::StartsWith(store, "scheduler:");
  if (!cluster && !absl::StartsWith(store, "local:") &&
      !absl::StartsWith(store, "servers:")) {
    return Usage(err, absl::InvalidArgumentError(absl::StrCat(
                          "--store must be local:DIR, servers:h1:p1,... or "
                          "scheduler:HOST:PORT; got '",
                          store, "'")));
  }
  absl::StatusOr<int64_t> staleness = args.GetInt("staleness", -1, -1, 1 << 20);
  if (!staleness.ok()) return Usage(err, staleness.status());
  if (*staleness >= 0 && (!cluster || o.mode != SyncMode::kAsync)) {
    return Usage(err, absl::InvalidArgumentError(
                          "--staleness is SSP for --mode async with "
                          "--store scheduler:HOST:PORT"));
  }
  // --dense: "" = the default, decided once the world size is known.
  const std::string dense = args.GetString("dense", "");
  if (!dense.empty() && dense != "ps" && dense != "allreduce") {
    return Usage(err,
                 absl::InvalidArgumentError(absl::StrCat(
                     "--dense must be ps or allreduce, not '", dense, "'")));
  }
  if (dense == "allreduce" && (!cluster || o.mode != SyncMode::kSync)) {
    return Usage(err, absl::InvalidArgumentError(
                          "--dense allreduce needs --store "
                          "scheduler:HOST:PORT (its group forms through the "
                          "scheduler) and --mode sync"));
  }
  const std::string backend_name = args.GetString("dense_backend", "gloo");
  absl::StatusOr<collective::Backend> dense_backend =
      collective::ParseBackend(backend_name);
  if (!dense_backend.ok()) {
    return Usage(err, absl::InvalidArgumentError(absl::StrCat(
                          "--dense_backend must be gloo or nccl, not '",
                          backend_name, "'")));
  }
  if (*dense_backend == collective::Backend::kNccl &&
      !collective::NcclCompiledIn()) {
    return Usage(err, absl::InvalidArgumentError(
                          "--dense_backend nccl: this build has no NCCL (CUDA "
                          "and NCCL were not found when it was configured)"));
  }
  const std::string collective_host = args.GetString("collective_host", "");
  if (cache_flags.rows > 0) {
    if (cache_flags.policy != "lru" && cache_flags.policy != "lfu" &&
        cache_flags.policy != "lookahead") {
      return Usage(err, absl::InvalidArgumentError(absl::StrCat(
                            "--cache_policy must be lru, lfu or lookahead, "
                            "not '",
                            cache_flags.policy, "'")));
    }
    if (!cache_flags.mode.empty() && cache_flags.mode != "write_back" &&
        cache_flags.mode != "push_through") {
      return Usage(err, absl::InvalidArgumentError(absl::StrCat(
                            "--cache_mode must be write_back or push_through, "
                            "not '",
                            cache_flags.mode, "'")));
    }
    if (cache_flags.backend != "cpu" && cache_flags.backend != "cuda") {
      return Usage(err, absl::InvalidArgumentError(absl::StrCat(
                            "--cache_backend must be cpu or cuda, not '",
                            cache_flags.backend, "'")));
    }
#ifdef PSDB_TRAIN_HAVE_CACHE
    if (cache_flags.backend == "cuda") {
      // Unimplemented without CUDA in the build, FailedPrecondition without
      // a device: said before anything is opened or created.
      absl::StatusOr<std::unique_ptr<cache::CacheBackend>> probe =
          cache::MakeBackend(cache::BackendKind::kCuda);
      if (!probe.ok()) {
        return Usage(err,
                     absl::FailedPreconditionError(absl::StrCat(
                         "--cache_backend cuda: ", probe.status().message())));
      }
    }
#endif
  }
  // The world is known now unless the cluster map gives it (then once
  // joined, below). A --cache_rows given is checked now either way.
  absl::Status cache_ok = absl::OkStatus();
  if (!cluster || args.Has("world")) {
    cache_ok = CacheModeFor(o.shard.world, o.batch_size, &cache_flags);
  } else if (cache_flags.rows_given && cache_flags.rows > 0) {
    cache_ok = CacheFitsTwoBatches(cache_flags.rows, o.batch_size);
  }
  if (!cache_ok.ok()) return Usage(err, cache_ok);
  const char* node_id_env = std::getenv("PS_NODE_ID");
  const std::string node_id = node_id_env != nullptr && *node_id_env != '\0'
                                  ? std::string(node_id_env)
                                  : absl::StrCat("ps-train-", getpid());
  absl::StatusOr<bool> dry_run = args.GetBool("dry_run");
  if (!dry_run.ok()) return Usage(err, dry_run.status());
  if (*dry_run) {
    out << "ps-train --dry_run: "
        << (o.mode == SyncMode::kSync ? "sync" : "async") << " training of "
        << o.data_dir << ", checkpoints under " << o.checkpoint_dir
        << "\n  store " << store;
    if (cluster) {
      out << " as node id " << node_id
          << (args.Has("rank") || args.Has("world")
                  ? absl::StrFormat(", rank %d of %d (flags)", o.shard.rank,
                                    o.shard.world)
                  : std::string(", rank and world from the cluster map"));
    } else {
      out << absl::StrFormat(", rank %d of %d", o.shard.rank, o.shard.world);
    }
    out << "\n  dense weights: "
        << (!dense.empty() ? dense
            : cluster && o.mode == SyncMode::kSync
                ? "allreduce with 2+ workers, else ps (default)"
                : "ps (default)");
    if (dense != "ps" && cluster && o.mode == SyncMode::kSync) {
      out << ", backend "
          << (*dense_backend == collective::Backend::kGloo ? "gloo" : "nccl");
    }
    out << "\n  model " << ModelKindName(o.model.kind);
    if (o.model.kind == ModelKind::kDcn) {
      out << " (" << o.model.cross_layers << " cross layers)";
    }
    out << absl::StrFormat("\n  %d epoch(s), batch %d, cache %d rows", o.epochs,
                           o.batch_size, cache_flags.rows);
    if (cache_flags.rows > 0) {
      out << " (" << cache_flags.policy << ", "
          << (!cache_flags.mode.empty() ? cache_flags.mode
              : cache_flags.rows_given
                  ? "write_back with 1 worker, push_through with 2+"
                  : "write_back with 1 worker; no cache with 2+")
          << ", " << cache_flags.backend;
      if (cache_flags.staleness > 0) {
        out << ", rows up to " << cache_flags.staleness << " steps stale";
      }
      out << ")";
    }
    out << "\n";
    // ps-train reads PS_NODE_ID (as a cluster worker) and no other PS_*.
    std::string read_line, ignored_line;
    for (const auto& [name, value] : tools::PsVariablesInEnvironment()) {
      absl::StrAppend(
          cluster && name == "PS_NODE_ID" ? &read_line : &ignored_line, " ",
          name, "=", value);
    }
    out << "  PS_* read:" << (read_line.empty() ? " none" : read_line) << "\n";
    if (!ignored_line.empty()) {
      out << "  PS_* ignored (not read by ps-train):" << ignored_line << "\n";
    }
    out << "ps-train --dry_run: ok\n";
    return 0;
  }
  o.store_description = store;
  if (absl::StartsWith(store, "local:")) {
    // The test set is evaluated on the best checkpoint, opened read-only.
    o.open_checkpoint = [](const std::string& checkpoint)
        -> absl::StatusOr<std::unique_ptr<ParameterClient>> {
      PSDB_ASSIGN_OR_RETURN(std::unique_ptr<LocalClient> c,
                            LocalClient::OpenCheckpoint(checkpoint));
      return std::unique_ptr<ParameterClient>(std::move(c));
    };
  }
  std::unique_ptr<rpc::ClusterWorker> worker;
  std::unique_ptr<collective::AllReducer> reducer;
  std::unique_ptr<ParameterClient> owned;
  ParameterClient* client_ptr = nullptr;
  if (cluster) {
    rpc::ClusterWorkerOptions wo;
    wo.scheduler = store.substr(std::string("scheduler:").size());
    wo.node_id = node_id;
    wo.sync = o.mode == SyncMode::kSync;
    wo.staleness = static_cast<int>(*staleness);
    absl::StatusOr<std::unique_ptr<rpc::ClusterWorker>> joined =
        rpc::ClusterWorker::Join(wo);
    if (!joined.ok()) return Fail(err, joined.status());
    worker = *std::move(joined);
    if (!args.Has("rank") && !args.Has("world")) {
      o.shard.rank = worker->rank();
      o.shard.world = worker->world();
    }
    // A sync cluster's servers average the workers' gradients: one update
    // is the mean over the batch times the workers.
    if (o.mode == SyncMode::kSync && worker->world() >= 2) {
      absl::Status scaled = SetWideFtrlFromFlags(
          args, int64_t{o.batch_size} * worker->world(), &o.model);
      if (!scaled.ok()) return Fail(err, scaled);
    }
    absl::Status decided =
        CacheModeFor(o.shard.world, o.batch_size, &cache_flags);
    if (!decided.ok()) return Fail(err, decided);
    rpc::ClusterWorker* w = worker.get();
    // Rank 0 writes the cluster's checkpoints and its reports under CDIR;
    // another rank's reports go to CDIR/rank-<r>.
    const std::string root = o.checkpoint_dir;
    if (worker->rank() != 0) {
      o.checkpoint_dir =
          (std::filesystem::path(root) / absl::StrCat("rank-", worker->rank()))
              .string();
    }
    o.after_step = [w](int64_t step) { return w->AfterStep(step); };
    // The dense AllReduce group: the default in sync mode with 2+ workers.
    const bool allreduce =
        dense == "allreduce" ||
        (dense.empty() && o.mode == SyncMode::kSync && worker->world() >= 2);
    if (allreduce) {
      collective::AllReducerOptions ao;
      ao.backend = *dense_backend;
      ao.scheduler = worker->scheduler();
      ao.rank = worker->rank();
      ao.world = worker->world();
      ao.host = collective_host;
      absl::StatusOr<std::unique_ptr<collective::AllReducer>> opened =
          collective::OpenAllReducer(ao);
      if (!opened.ok()) return Fail(err, opened.status());
      reducer = *std::move(opened);
      o.model.dense_reducer = reducer.get();
    }
    o.checkpoint_fn = [w, root](int64_t step) {
      return w->Checkpoint(root, step);
    };
    client_ptr = worker->client();
  } else {
    StoreOptions local;
    local.memory_budget_bytes = static_cast<uint64_t>(memory_budget_mb) << 20;
    local.durability = *durability;
    absl::StatusOr<std::unique_ptr<ParameterClient>> opened =
        rpc::OpenParameterClient(store, {}, local);
    if (!opened.ok()) return Fail(err, opened.status());
    owned = *std::move(opened);
    client_ptr = owned.get();
  }
  ParameterClient* const client_raw = client_ptr;

  // The model's tables must exist before a cache is put in front of them.
  std::unique_ptr<EmbeddingSource> embeddings;
  if (cache_flags.rows > 0) {
#ifdef PSDB_TRAIN_HAVE_CACHE
    cache::VocabCacheOptions copts;
    copts.capacity_rows = cache_flags.rows;
    // Policy, mode and backend were validated above, before joining or opening.
    copts.policy = cache_flags.policy == "lru" ? cache::PolicyKind::kLru
                   : cache_flags.policy == "lfu"
                       ? cache::PolicyKind::kLfu
                       : cache::PolicyKind::kLookahead;
    copts.mode = cache_flags.mode == "write_back"
                     ? cache::CacheMode::kWriteBack
                     : cache::CacheMode::kPushThrough;
    copts.backend = cache_flags.backend == "cuda" ? cache::BackendKind::kCuda
                                                  : cache::BackendKind::kCpu;
    copts.max_staleness = cache_flags.staleness;
    absl::Status created = CreateModelTables(o.model, client_raw);
    if (!created.ok()) return Fail(err, created);
    absl::StatusOr<std::unique_ptr<CachedEmbeddingSource>> cached =
        CachedEmbeddingSource::Create(client_raw, EmbeddingTables(o.model),
                                      copts);
    if (!cached.ok()) return Fail(err, cached.status());
    embeddings = std::move(*cached);
#else
    err << "ps-train: this build has no worker cache (cache/ module); "
           "training straight on the parameter client\n";
#endif
  }
  if (embeddings == nullptr) {
    embeddings = std::make_unique<ClientEmbeddingSource>(client_raw);
  }
  absl::StatusOr<TrainResult> r =
      psdb::train::RunTraining(o, client_raw, embeddings.get(), stdout);
  std::fflush(stdout);
  if (!r.ok()) return Fail(err, r.status());
  return 0;
}

}  // namespace
}  // namespace cli

int RunTrain(int argc, const char* const* argv, std::ostream& out,
             std::ostream& err) {
  absl::StatusOr<tools::Args> args =
      tools::Args::Parse(argc, argv, 1,
                         {"no_progress", "no_plot", "no_prefetch", "dry_run",
                          "help", "wide_field_scale"});
  if (!args.ok()) return cli::Usage(err, args.status());
  if (args->Has("help")) {
    out << cli::kUsage;
    return 0;
  }
  const std::vector<std::string>& pos = args->positional();
  if (!pos.empty() && pos[0] == "gen") {
    if (pos.size() > 1) {
      return cli::Usage(err, absl::InvalidArgumentError(absl::StrCat(
                                 "unexpected argument '", pos[1], "'")));
    }
    return cli::RunGen(*args, out, err);
  }
  if (!pos.empty()) {
    return cli::Usage(err, absl::InvalidArgumentError(
                               absl::StrCat("unknown command '", pos[0], "'")));
  }
  return cli::RunTrainCommand(*args, out, err);
}

}  // namespace psdb::train
