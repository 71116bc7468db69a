#include "tools/train/train_cli.h"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "collective/group.h"
#include "psdb/client_url.h"
#include "rpc/client/cluster_worker.h"
#include "psdb/local_client.h"
#include "tools/common/args.h"
#include "train/embedding_source.h"
#include "train/synthetic.h"
#include "train/trainer.h"
#include "util/status_macros.h"
#ifdef PSDB_TRAIN_HAVE_CACHE
#include "cache/backend.h"
#include "train/cached_embedding_source.h"
#endif

namespace psdb::train {
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

constexpr char kUsage[] =
    "usage:\n"
    "  ps-train gen --out DIR [--kind additive|pairs|longtail] [--seed N]\n"
    "               [--train_rows N] [--test_rows N] [--train_files N]\n"
    "               [--min_vocab N] [--max_vocab N] [--zipf S]\n"
    "               [--missing_rate P]\n"
    "               pairs: [--interaction_pairs N] [--factor_dim N]\n"
    "                      [--interaction_std F]\n"
    "               longtail: [--singleton_rate P] [--weight_drift F]\n"
    "                         [--bias_drift F]\n"
    "  ps-train --data DIR --checkpoint_dir CDIR [--store local:DIR |\n"
    "           servers:h1:p1,... | scheduler:HOST:PORT[,HOST:PORT...]] "
    "[--mode sync|async]\n"
    "           [--epochs N] [--batch_size N] [--max_steps N] [--log_every N]\n"
    "           [--checkpoint_every N] [--keep_checkpoints N] [--eval_every "
    "N]\n"
    "           [--valid_fraction F] [--patience N]\n"
    "  (--valid_fraction: the share of train lines held out for validation,\n"
    "  picked by a hash of the line, default 0.05, 0 = none; evaluated after\n"
    "  each epoch, every --eval_every steps and at the end; --patience N\n"
    "  stops after N evaluations without a lower validation log-loss,\n"
    "  default 2, 0 = never; the best is checkpointed under CDIR/best and the\n"
    "  test files are evaluated once, at the end, on it)\n"
    "           [--rank R] [--world W] [--shard_by file|line]\n"
    "           [--staleness K] [--no_prefetch]\n"
    "           [--dense ps|allreduce] [--dense_backend gloo|nccl]\n"
    "           [--collective_host HOST]\n"
    "  (--dense allreduce: the MLP and linear weights are replicated on every\n"
    "  worker and averaged by AllReduce, gloo over TCP or NCCL on a GPU,\n"
    "  whose group forms through the scheduler; only with\n"
    "  scheduler:HOST:PORT and --mode sync, and the default there with 2+\n"
    "  workers; --dense ps keeps them as psdb dense tables. "
    "--collective_host:\n"
    "  the address gloo binds and gives its peers, default this machine's\n"
    "  hostname)\n"
    "  (--store defaults to $PSDB_URL if set, else local:CDIR/store; with\n"
    "  scheduler:HOST:PORT, rank and world come from the cluster map, rank 0\n"
    "  writes the cluster checkpoints under CDIR, rank r its reports under\n"
    "  CDIR/rank-r)\n"
    "           [--model deepfwfm|wide_deep|deepfm|dcn|lr] [--cross_layers "
    "N]\n"
    "  (--model: wide_deep: wide FTRL part + MLP over the deep embeddings;\n"
    "  deepfwfm (default): + the field-weighted FM term, one learned weight\n"
    "  per field pair, over the deep embeddings; deepfm: + the FM\n"
    "  second-order term; dcn: + DCN-v2 cross layers (--cross_layers,\n"
    "  default 2) beside the MLP; lr: the wide part alone, a logistic\n"
    "  regression on hashed one-hot features trained by FTRL-Proximal,\n"
    "  the baseline (its wide defaults below), --min_count 0 instead of 2)\n"
    "           [--cache_rows N] [--cache_policy lru|lfu|lookahead]\n"
    "           [--cache_mode write_back|push_through] [--cache_backend "
    "cpu|cuda]\n"
    "  (--cache_rows: default 262144 with one worker, 0 (no cache) with\n"
    "  2+; --cache_mode: write_back trains the cached rows on the worker\n"
    "  and writes them back, exact for one worker and its default;\n"
    "  push_through pushes every step's gradients and re-reads cached rows\n"
    "  once a push has passed them, the mode with 2+ workers, where\n"
    "  write_back is refused: the workers would write rows back over each\n"
    "  other's updates)\n"
    "           [--cache_staleness N]\n"
    "  (push_through: a cached row serves up to N of this worker's steps\n"
    "  after its fetch before it is read again, bounded staleness as in\n"
    "  SSP: fewer reads, no longer exact; default 0, always fresh)\n"
    "  (--cache_backend cuda: the cache's rows in GPU memory, in a build\n"
    "  with CUDA on a machine with a device; the same math as cpu, bit for\n"
    "  bit)\n"
    "           [--deep_optimizer lazy_adam|adagrad] [--deep_lr F]\n"
    "           [--deep_init F]\n"
    "  (--deep_init F: new deep embedding rows are uniform in [-F, F],\n"
    "  default 0.002)\n"
    "           [--wide_lr F] [--wide_l1 F] [--wide_l2 F] [--deep_l2 F]\n"
    "           [--wide_init_acc F] [--wide_lr_power F] [--wide_decay F]\n"
    "           [--wide_field_scale[=false]] [--wide_scale_lr F]\n"
    "  (the wide part: FTRL-Proximal with per-example alpha, beta,\n"
    "  lambda1, lambda2; gradients are batch means, so at batch B that is\n"
    "  --wide_lr alpha --wide_init_acc (beta/B)^2 --wide_l1 lambda1/B\n"
    "  --wide_l2 lambda2/(2B) --wide_lr_power -0.5 --wide_decay 1, the\n"
    "  defaults with beta 1 and alpha 0.1, lambdas 0 (alpha 0.2, lambdas\n"
    "  1 for lr); in a sync cluster B is the batch times the workers.\n"
    "  --wide_decay F: each row update first multiplies the\n"
    "  accumulator by F; --wide_lr_power -1 makes FTRL a per-coordinate\n"
    "  Newton step, whose --wide_lr is about 1 / B. --wide_field_scale:\n"
    "  each field's wide embedding times a learned factor (dense table\n"
    "  wide.scale, all 1 at start, Adam at --wide_scale_lr, default 0.03);\n"
    "  on by default, off for lr)\n"
    "           [--dropout F] [--min_count N]\n"
    "  (--min_count N: ids seen fewer than N times in training share their\n"
    "  field's learned fallback row; 0 = off; default 2, 0 for lr)\n"
    "           [--dense_lr F] [--deep_dim N] [--hidden "
    "64,32]\n"
    "           [--pair_lr F] [--pair_init F]\n"
    "  (deepfwfm's pair weights: Adam rate, default 0.01, and the value every\n"
    "  pair starts at, default 0.1)\n"
    "           [--block_dim N] [--seed N] [--memory_budget_mb N]\n"
    "           [--durability checkpoint|wal]\n"
    "  (--durability wal, local: store only: a write-ahead log under the\n"
    "  store's directory keeps every push across a crash; store/wal.h)\n"
    "           [--no_progress] [--no_plot] [--dry_run]\n"
    "  (--dry_run: validate the command line, PSDB_URL and PS_NODE_ID as a\n"
    "  start would, print the settings and exit; reads no data, opens no\n"
    "  store, joins no cluster)\n";

int Usage(std::ostream& err, const absl::Status& status) {
  err << "ps-train: " << status.message() << "\n" << kUsage;
  return tools::kUsageExitCode;
}

int Fail(std::ostream& err, const absl::Status& status) {
  err << "ps-train: " << status << "\n";
  return 1;
}

int RunGen(const tools::Args& args, std::ostream& out, std::ostream& err) {
  absl::Status known = args.CheckKnown(
      {"out", "kind", "seed", "train_rows", "test_rows", "train_files",
       "min_vocab", "max_vocab", "zipf", "missing_rate", "interaction_pairs",
       "factor_dim", "interaction_std", "singleton_rate", "weight_drift",
       "bias_drift"});
  if (!known.ok()) return Usage(err, known);
  const std::string dir = args.GetString("out", "");
  if (dir.empty())
    return Usage(err, absl::InvalidArgumentError("gen needs --out DIR"));
  GeneratorOptions o;
  auto parse = [&]() -> absl::Status {
    PSDB_ASSIGN_OR_RETURN(
        o.kind, ParseGeneratorKind(args.GetString("kind", "additive")));
    const bool pairs = o.kind == GeneratorKind::kPairs;
    const bool longtail = o.kind == GeneratorKind::kLongtail;
    for (const char* flag :
         {"interaction_pairs", "factor_dim", "interaction_std"}) {
      if (args.Has(flag) && !pairs) {
        return absl::InvalidArgumentError(
            absl::StrCat("--", flag, " is for --kind pairs"));
      }
    }
    for (const char* flag : {"singleton_rate", "weight_drift", "bias_drift"}) {
      if (args.Has(flag) && !longtail) {
        return absl::InvalidArgumentError(
            absl::StrCat("--", flag, " is for --kind longtail"));
      }
    }
    PSDB_ASSIGN_OR_RETURN(
        int64_t n, args.GetInt("interaction_pairs", o.interaction_pairs, 1,
                               kNumCatFeatures * (kNumCatFeatures - 1) / 2));
    o.interaction_pairs = static_cast<int>(n);
    PSDB_ASSIGN_OR_RETURN(n, args.GetInt("factor_dim", o.factor_dim, 1, 64));
    o.factor_dim = static_cast<int>(n);
    PSDB_ASSIGN_OR_RETURN(
        o.interaction_std,
        args.GetDouble("interaction_std", o.interaction_std, 0, 20));
    PSDB_ASSIGN_OR_RETURN(
        o.singleton_rate,
        args.GetDouble("singleton_rate", o.singleton_rate, 0, 0.99));
    PSDB_ASSIGN_OR_RETURN(
        o.weight_drift,
        args.GetDouble("weight_drift", o.weight_drift, -100, 100));
    PSDB_ASSIGN_OR_RETURN(
        o.bias_drift, args.GetDouble("bias_drift", o.bias_drift, -100, 100));
    PSDB_ASSIGN_OR_RETURN(int64_t seed, args.GetInt("seed", 1, 0, INT64_MAX));
    o.seed = static_cast<uint64_t>(seed);
    PSDB_ASSIGN_OR_RETURN(
        o.train_rows, args.GetInt("train_rows", o.train_rows, 1, 1LL << 40));
    PSDB_ASSIGN_OR_RETURN(o.test_rows,
                          args.GetInt("test_rows", o.test_rows, 2, 1LL << 40));
    PSDB_ASSIGN_OR_RETURN(int64_t files,
                          args.GetInt("train_files", o.train_files, 1, 100000));
    o.train_files = static_cast<int>(files);
    PSDB_ASSIGN_OR_RETURN(o.min_vocab,
                          args.GetInt("min_vocab", o.min_vocab, 1, 1LL << 31));
    PSDB_ASSIGN_OR_RETURN(o.max_vocab,
                          args.GetInt("max_vocab", o.max_vocab, 1, 1LL << 31));
    PSDB_ASSIGN_OR_RETURN(o.zipf_s, args.GetDouble("zipf", o.zipf_s, 0.01, 10));
    PSDB_ASSIGN_OR_RETURN(
        o.missing_rate,
        args.GetDouble("missing_rate", o.missing_rate, 0, 0.99));
    return absl::OkStatus();
  };
  absl::Status parsed = parse();
  if (!parsed.ok()) return Usage(err, parsed);
  absl::StatusOr<GeneratorResult> r = GenerateSynthetic(o, dir);
  if (!r.ok()) return Fail(err, r.status());
  out << absl::StrFormat(
      "ps-train gen: %s data: wrote %d train rows in %d files and %d test "
      "rows to %s\n"
      "ps-train gen: click rate %.3f (train), %.3f (test); Bayes-optimal test "
      "AUC %.4f (expected %.4f), log-loss %.4f -> %s/meta.json\n",
      GeneratorKindName(o.kind), o.train_rows, o.train_files, o.test_rows, dir,
      r->train_ctr, r->test_ctr, r->bayes_auc, r->bayes_auc_expected,
      r->bayes_logloss, dir);
  if (o.kind == GeneratorKind::kLongtail) {
    out << absl::StrFormat(
        "ps-train gen: %d categorical values are singletons (ids that occur "
        "once)\n",
        r->singleton_values);
  }
  return 0;
}

// The worker cache's flags as given; RunTrainCommand checks the names.
struct CacheFlags {
  int64_t rows = 0;         // 0: no worker cache
  bool rows_given = false;  // --cache_rows given
  std::string policy;
  std::string mode;  // "" until CacheModeFor decides it
  std::string backend;
  int64_t staleness = 0;  // --cache_staleness: push_through only
};

// A batch and its prefetched successor must fit the cache.
absl::Status CacheFitsTwoBatches(int64_t rows, int batch_size) {
  const int64_t need = 2LL * batch_size * kNumCatFeatures;
  if (rows >= need) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrFormat(
      "--cache_rows %d is too small for --batch_size %d: a batch and its "
      "prefetched successor may need %d rows per table",
      rows, batch_size, need));
}

// The cache for `world` workers. One worker: --cache_rows (default 2^18),
// --cache_mode (default write_back). 2+ workers: no cache unless
// --cache_rows is given, and then push_through. A write-back cache is
// exact only as its rows' one writer: with several workers each would
// train its own copy of a row and write the whole row back over the
// others' updates, so an explicit write_back with 2+ workers is refused.
// And a push-through cache serves nothing across workers' steps (any row
// may have been pushed by another worker since its fetch, so with
// max_staleness 0 it re-reads every row): it only costs (0.77x the
// samples/s of no cache in a sync cluster, docs/benchmarks/train.md), unless
// --cache_staleness lets it serve rows a few steps old. A cache kept must
// fit two batches of `batch_size`.
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

// The wide part's FTRL: DefaultWideFtrl(model->kind) at the per-example
// scale of updates averaging `examples` examples (SetWideFtrlProximal,
// train/wide_deep.h), then whichever --wide_* FTRL flags are given.
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

int RunTrain(int argc, const char* const* argv, std::ostream& out,
             std::ostream& err) {
  absl::StatusOr<tools::Args> args =
      tools::Args::Parse(argc, argv, 1,
                         {"no_progress", "no_plot", "no_prefetch", "dry_run",
                          "help", "wide_field_scale"});
  if (!args.ok()) return Usage(err, args.status());
  if (args->Has("help")) {
    out << kUsage;
    return 0;
  }
  const std::vector<std::string>& pos = args->positional();
  if (!pos.empty() && pos[0] == "gen") {
    if (pos.size() > 1) {
      return Usage(err, absl::InvalidArgumentError(absl::StrCat(
                            "unexpected argument '", pos[1], "'")));
    }
    return RunGen(*args, out, err);
  }
  if (!pos.empty()) {
    return Usage(err, absl::InvalidArgumentError(
                          absl::StrCat("unknown command '", pos[0], "'")));
  }
  return RunTrainCommand(*args, out, err);
}

}  // namespace psdb::train
