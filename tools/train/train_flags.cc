// ps-train's training flags into TrainerOptions: names checked, ranges
// checked, the defaults that depend on the model and the world size.
#include "tools/train/train_flags.h"

#include <cstdlib>
#include <filesystem>
#include <limits>
#include <string>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "train/criteo_reader.h"
#include "util/status_macros.h"

namespace psdb::train::cli {
namespace {

// --model's default: DeepFwFM, the best model on every kind of ps-bench
// train's data: by 0.0001 (additive), 0.017 (pairs) and 0.0007 (longtail)
// (docs/benchmarks/train.md, "Every model's wide part at
// the per-example scale").
constexpr char kDefaultModel[] = "deepfwfm";
// --min_count's default for the models with deep embeddings: ids seen once
// share their field's row instead of each getting a random one (+0.0016
// AUC on the longtail data, 2.5 x faster there: no row per singleton); lr
// keeps 0, its best (-0.0003 at 2).
constexpr int64_t kDeepMinCount = 2;

}  // namespace

absl::Status CacheFitsTwoBatches(int64_t rows, int batch_size) {
  const int64_t need = 2LL * batch_size * kNumCatFeatures;
  if (rows >= need) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrFormat(
      "--cache_rows %d is too small for --batch_size %d: a batch and its "
      "prefetched successor may need %d rows per table",
      rows, batch_size, need));
}
absl::Status CacheModeFor(int world, int batch_size, CacheFlags* flags) {
  if (world >= 2 && !flags->rows_given) flags->rows = 0;
  if (flags->rows == 0) {
    if (flags->staleness == 0) return absl::OkStatus();
    return absl::InvalidArgumentError(
        "--cache_staleness needs a worker cache: give --cache_rows N (with "
        "2+ workers there is none by default)");
  }
  if (flags->mode.empty()) {
    flags->mode = world >= 2 ? "push_through" : "write_back";
  }
  if (flags->staleness > 0 && flags->mode != "push_through") {
    return absl::InvalidArgumentError(
        "--cache_staleness is for --cache_mode push_through (the default "
        "with 2+ workers): a write_back cache trains its rows itself");
  }
  if (flags->mode == "write_back" && world >= 2) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--cache_mode write_back with ", world,
        " workers: each worker's cache would write whole rows back over the "
        "other workers' updates; use push_through (the default with 2+ "
        "workers) or --cache_rows 0"));
  }
  return CacheFitsTwoBatches(flags->rows, batch_size);
}
absl::Status SetWideFtrlFromFlags(const tools::Args& args, int64_t examples,
                                  WideDeepConfig* model) {
  SetWideFtrlProximal(DefaultWideFtrl(model->kind), examples, model);
  struct Flag {
    const char* name;
    float* value;
    double min, max;
  };
  for (const Flag& f :
       {Flag{"wide_lr", &model->wide_lr, 1e-9, 100},
        Flag{"wide_init_acc", &model->wide_initial_accumulator, 1e-12, 1e6},
        Flag{"wide_lr_power", &model->wide_lr_power, -10, 0},
        Flag{"wide_decay", &model->wide_accumulator_decay, 1e-6, 1},
        Flag{"wide_l1", &model->wide_l1, 0, 1e6},
        Flag{"wide_l2", &model->wide_l2, 0, 1e6}}) {
    PSDB_ASSIGN_OR_RETURN(double v,
                          args.GetDouble(f.name, *f.value, f.min, f.max));
    *f.value = static_cast<float>(v);
  }
  return absl::OkStatus();
}

absl::Status ParseTrainOptions(const tools::Args& args, TrainerOptions* o,
                               CacheFlags* cache_flags, std::string* store,
                               int64_t* memory_budget_mb) {
  PSDB_RETURN_IF_ERROR(args.CheckKnown({"data",
                                        "checkpoint_dir",
                                        "store",
                                        "mode",
                                        "epochs",
                                        "batch_size",
                                        "max_steps",
                                        "log_every",
                                        "checkpoint_every",
                                        "checkpoint_every_s",
                                        "keep_checkpoints",
                                        "eval_every",
                                        "valid_fraction",
                                        "patience",
                                        "wide_l1",
                                        "wide_l2",
                                        "deep_l2",
                                        "dropout",
                                        "min_count",
                                        "rank",
                                        "world",
                                        "shard_by",
                                        "cache_rows",
                                        "cache_policy",
                                        "cache_mode",
                                        "cache_backend",
                                        "cache_staleness",
                                        "deep_optimizer",
                                        "deep_lr",
                                        "deep_init",
                                        "wide_lr",
                                        "wide_init_acc",
                                        "wide_lr_power",
                                        "wide_decay",
                                        "wide_field_scale",
                                        "wide_scale_lr",
                                        "dense_lr",
                                        "pair_lr",
                                        "pair_init",
                                        "deep_dim",
                                        "hidden",
                                        "block_dim",
                                        "seed",
                                        "memory_budget_mb",
                                        "durability",
                                        "no_progress",
                                        "no_plot",
                                        "staleness",
                                        "no_prefetch",
                                        "dense",
                                        "dense_backend",
                                        "collective_host",
                                        "dry_run",
                                        "model",
                                        "cross_layers"}));
  o->data_dir = args.GetString("data", "");
  o->checkpoint_dir = args.GetString("checkpoint_dir", "");
  if (o->data_dir.empty() || o->checkpoint_dir.empty()) {
    return absl::InvalidArgumentError(
        "training needs --data DIR and --checkpoint_dir CDIR");
  }
  // tools/cluster.sh gives its workers PSDB_URL=scheduler:HOST:PORT.
  const char* url = std::getenv("PSDB_URL");
  *store = args.GetString(
      "store",
      url != nullptr && *url != '\0'
          ? std::string(url)
          : absl::StrCat(
                "local:",
                (std::filesystem::path(o->checkpoint_dir) / "store").string()));
  const std::string mode = args.GetString("mode", "sync");
  if (mode == "sync") {
    o->mode = SyncMode::kSync;
  } else if (mode == "async") {
    o->mode = SyncMode::kAsync;
  } else {
    return absl::InvalidArgumentError(
        absl::StrCat("--mode must be sync or async, not '", mode, "'"));
  }
  PSDB_ASSIGN_OR_RETURN(int64_t v, args.GetInt("epochs", 1, 1, 1000));
  o->epochs = static_cast<int>(v);
  PSDB_ASSIGN_OR_RETURN(v, args.GetInt("batch_size", 512, 1, 1 << 20));
  o->batch_size = static_cast<int>(v);
  PSDB_ASSIGN_OR_RETURN(o->max_steps,
                        args.GetInt("max_steps", 0, 0, INT64_MAX));
  PSDB_ASSIGN_OR_RETURN(v, args.GetInt("log_every", 200, 1, 1 << 30));
  o->log_every = static_cast<int>(v);
  PSDB_ASSIGN_OR_RETURN(o->checkpoint_every,
                        args.GetInt("checkpoint_every", 0, 0, INT64_MAX));
  // Seconds, fractions allowed; a year is far beyond any run between two
  // checkpoints and keeps the Duration finite.
  PSDB_ASSIGN_OR_RETURN(double every_s,
                        args.GetDouble("checkpoint_every_s", 0,
                                       std::numeric_limits<double>::lowest(),
                                       std::numeric_limits<double>::max()));
  if (every_s < 0 || every_s > 365.0 * 24 * 3600) {
    return absl::InvalidArgumentError(
        absl::StrCat("--checkpoint_every_s must be seconds between time-based "
                     "checkpoints, >= 0 (0 = off) and at most a year; got ",
                     every_s));
  }
  o->checkpoint_interval = absl::Seconds(every_s);
  PSDB_ASSIGN_OR_RETURN(v, args.GetInt("keep_checkpoints", 3, 0, 1 << 20));
  o->keep_checkpoints = static_cast<int>(v);
  PSDB_ASSIGN_OR_RETURN(o->eval_every,
                        args.GetInt("eval_every", 0, 0, INT64_MAX));
  PSDB_ASSIGN_OR_RETURN(
      o->valid_fraction,
      args.GetDouble("valid_fraction", o->valid_fraction, 0, 0.99));
  PSDB_ASSIGN_OR_RETURN(v, args.GetInt("patience", o->patience, 0, 1 << 20));
  o->patience = static_cast<int>(v);
  PSDB_ASSIGN_OR_RETURN(v, args.GetInt("min_count", o->min_count, 0,
                                       std::numeric_limits<uint32_t>::max()));
  o->min_count = static_cast<uint32_t>(v);
  PSDB_ASSIGN_OR_RETURN(v, args.GetInt("world", 1, 1, 1 << 20));
  o->shard.world = static_cast<int>(v);
  PSDB_ASSIGN_OR_RETURN(v, args.GetInt("rank", 0, 0, o->shard.world - 1));
  o->shard.rank = static_cast<int>(v);
  const std::string shard_by = args.GetString("shard_by", "file");
  if (shard_by == "file") {
    o->shard.shard_by = ShardBy::kFile;
  } else if (shard_by == "line") {
    o->shard.shard_by = ShardBy::kLine;
  } else {
    return absl::InvalidArgumentError(
        absl::StrCat("--shard_by must be file or line, not '", shard_by, "'"));
  }
  PSDB_ASSIGN_OR_RETURN(cache_flags->rows,
                        args.GetInt("cache_rows", 1 << 18, 0, 1LL << 31));
  cache_flags->rows_given = args.Has("cache_rows");
  cache_flags->policy = args.GetString("cache_policy", "lru");
  // "": write_back for one worker, push_through for more (CacheModeFor).
  cache_flags->mode = args.GetString("cache_mode", "");
  cache_flags->backend = args.GetString("cache_backend", "cpu");
  PSDB_ASSIGN_OR_RETURN(cache_flags->staleness,
                        args.GetInt("cache_staleness", 0, 0, 1 << 20));
  PSDB_ASSIGN_OR_RETURN(o->model.kind,
                        ParseModelKind(args.GetString("model", kDefaultModel)));
  if (!args.Has("min_count") && o->model.kind != ModelKind::kLr) {
    o->min_count = kDeepMinCount;
  }
  if (args.Has("cross_layers") && o->model.kind != ModelKind::kDcn) {
    return absl::InvalidArgumentError("--cross_layers is for --model dcn");
  }
  PSDB_ASSIGN_OR_RETURN(
      v, args.GetInt("cross_layers", o->model.cross_layers, 1, 16));
  o->model.cross_layers = static_cast<int>(v);
  const std::string deep_opt = args.GetString("deep_optimizer", "lazy_adam");
  if (deep_opt == "lazy_adam") {
    o->model.deep_optimizer = optim::OptimizerKind::kLazyAdam;
  } else if (deep_opt == "adagrad") {
    o->model.deep_optimizer = optim::OptimizerKind::kAdagrad;
  } else {
    return absl::InvalidArgumentError(absl::StrCat(
        "--deep_optimizer must be lazy_adam or adagrad, not '", deep_opt, "'"));
  }
  // Adagrad wants a larger step than LazyAdam.
  const double deep_lr_default =
      deep_opt == "adagrad" ? 0.05 : o->model.deep_lr;
  PSDB_ASSIGN_OR_RETURN(double lr,
                        args.GetDouble("deep_lr", deep_lr_default, 1e-9, 100));
  o->model.deep_lr = static_cast<float>(lr);
  PSDB_ASSIGN_OR_RETURN(
      lr, args.GetDouble("deep_init", o->model.deep_init, 1e-9, 1));
  o->model.deep_init = static_cast<float>(lr);
  PSDB_RETURN_IF_ERROR(SetWideFtrlFromFlags(args, o->batch_size, &o->model));
  // Field scales: on for the models with deep embeddings, off for lr
  // (train/wide_deep.h, DefaultWideFtrl).
  PSDB_ASSIGN_OR_RETURN(
      o->model.wide_field_scale,
      args.GetBool("wide_field_scale", o->model.kind != ModelKind::kLr));
  PSDB_ASSIGN_OR_RETURN(
      lr, args.GetDouble("wide_scale_lr", o->model.wide_scale_lr, 1e-9, 100));
  o->model.wide_scale_lr = static_cast<float>(lr);
  double reg = 0;
  PSDB_ASSIGN_OR_RETURN(reg,
                        args.GetDouble("deep_l2", o->model.deep_l2, 0, 1e6));
  o->model.deep_l2 = static_cast<float>(reg);
  PSDB_ASSIGN_OR_RETURN(reg,
                        args.GetDouble("dropout", o->model.dropout, 0, 0.95));
  o->model.dropout = static_cast<float>(reg);
  PSDB_ASSIGN_OR_RETURN(
      lr, args.GetDouble("dense_lr", o->model.dense_lr, 1e-9, 100));
  o->model.dense_lr = static_cast<float>(lr);
  for (absl::string_view flag : {"pair_lr", "pair_init"}) {
    if (args.Has(flag) && o->model.kind != ModelKind::kDeepFwFm) {
      return absl::InvalidArgumentError(
          absl::StrCat("--", flag, " is for --model deepfwfm"));
    }
  }
  PSDB_ASSIGN_OR_RETURN(lr,
                        args.GetDouble("pair_lr", o->model.pair_lr, 1e-9, 100));
  o->model.pair_lr = static_cast<float>(lr);
  PSDB_ASSIGN_OR_RETURN(
      lr, args.GetDouble("pair_init", o->model.pair_weight_init, -10, 10));
  o->model.pair_weight_init = static_cast<float>(lr);
  PSDB_ASSIGN_OR_RETURN(v, args.GetInt("deep_dim", o->model.deep_dim, 1, 4096));
  o->model.deep_dim = static_cast<int>(v);
  PSDB_ASSIGN_OR_RETURN(v,
                        args.GetInt("block_dim", o->model.block_dim, 1, 65536));
  o->model.block_dim = static_cast<int>(v);
  PSDB_ASSIGN_OR_RETURN(v, args.GetInt("seed", 42, 0, INT64_MAX));
  o->model.seed = static_cast<uint64_t>(v);
  if (args.Has("hidden")) {
    o->model.hidden.clear();
    for (absl::string_view w :
         absl::StrSplit(args.GetString("hidden", ""), ',')) {
      int width;
      if (!absl::SimpleAtoi(w, &width) || width < 1 || width > 65536) {
        return absl::InvalidArgumentError(absl::StrCat(
            "--hidden must be comma-separated widths, e.g. 64,32; got '",
            args.GetString("hidden", ""), "'"));
      }
      o->model.hidden.push_back(width);
    }
  }
  PSDB_ASSIGN_OR_RETURN(*memory_budget_mb,
                        args.GetInt("memory_budget_mb", 1024, 1, 1LL << 24));
  PSDB_ASSIGN_OR_RETURN(bool no_progress, args.GetBool("no_progress"));
  PSDB_ASSIGN_OR_RETURN(bool no_plot, args.GetBool("no_plot"));
  PSDB_ASSIGN_OR_RETURN(bool no_prefetch, args.GetBool("no_prefetch"));
  o->prefetch = !no_prefetch;
  o->progress = !no_progress;
  o->plot = !no_plot;
  return absl::OkStatus();
}

}  // namespace psdb::train::cli
