#include "tools/bench/train_bench.h"

#include <signal.h>
#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "tools/bench/bench_dir.h"
#include "tools/bench/json_writer.h"
#include "tools/bench/machine.h"
#include "tools/bench/report.h"
#include "tools/bench/scenario.h"
#include "tools/common/args.h"
#include "tools/common/child_process.h"
#include "tools/common/reserved_port.h"
#include "tools/common/sibling_binary.h"
#include "train/synthetic.h"
#include "train/wide_deep.h"
#include "util/status_macros.h"

namespace psdb::bench {
namespace {

constexpr char kUsage[] = R"(usage: ps-bench train [--json] [flags]

Training samples/s of ps-train: the first model embedded, and on a local
cluster (ps-scheduler + servers + worker processes) with prefetch on and off
(dense weights as psdb tables, --dense=ps), and, in sync mode with 2+
workers, with the dense weights replicated and averaged by gloo AllReduce
(--dense=allreduce), on the first generated kind; then every model embedded
on every kind. Every run reports its test AUC against the data's
Bayes-optimal AUC; with lr among the models, each model's AUC over lr's.

flags:
  --train_rows=N     generated training examples (rounded up to a multiple
                     of workers x batch_size)         default 200000
  --test_rows=N      generated test examples          default 20000
  --kinds=LIST       ps-train gen --kind values, comma-separated
                                       default additive,pairs,longtail
  --models=LIST      ps-train --model values, comma-separated; the first
                     one runs on the cluster too
                                       default deepfwfm,wide_deep,deepfm,
                                               dcn,lr
  --batch_size=N     examples per step                default 512
  --deep_dim=N       deep embedding dim               default 16
  --hidden=LIST      MLP widths (ps-train's default)  default 64,32
  --cache_rows=N     worker cache rows per table      default 65536
  --cache_staleness=N
                     steps the cluster workers' push-through cache serves
                     a row before reading it again (ps-train
                     --cache_staleness; needs --workers 2+)  default 0
  --max_vocab=N      largest field vocabulary         default 100000
  --servers=N        ps-servers in the cluster        default 2
  --workers=N        ps-train workers in the cluster  default 2
  --mode=sync|async  ps-train --mode (sync: servers run --sync_mode=sync)
                                                      default sync
  --seed=N           data and model seed              default 1
  --bin=DIR          ps-train, ps-server, ps-scheduler (default: next to
                     ps-bench)
  --dir=DIR          work directory (default: a fresh one under /tmp,
                     removed at the end)
  --json             print one JSON object instead of the report
)";

struct Params {
  int64_t train_rows = 200000;
  int64_t test_rows = 20000;
  std::vector<std::string> kinds = {"additive", "pairs", "longtail"};
  std::vector<std::string> models = {"deepfwfm", "wide_deep", "deepfm", "dcn",
                                     "lr"};
  int64_t batch_size = 512;
  int64_t deep_dim = 16;
  std::string hidden = "64,32";
  int64_t cache_rows = 65536;
  int64_t cache_staleness = 0;
  int64_t max_vocab = 100000;
  int64_t servers = 2;
  int64_t workers = 2;
  std::string mode = "sync";
  int64_t seed = 1;
  std::string bin;  // --bin: where the binaries are ("": beside ps-bench)
  std::string dir;
  bool json = false;
  // The binaries' paths (FindBinaries).
  std::string ps_train;
  std::string ps_server;
  std::string ps_scheduler;
};

ScenarioFlags Flags() {
  return {"train",
          kUsage,
          {"train_rows", "test_rows", "kinds", "models", "batch_size",
           "deep_dim", "hidden", "cache_rows", "cache_staleness", "max_vocab",
           "servers", "workers", "mode", "seed", "bin", "dir"}};
}

absl::StatusOr<Params> ParseParams(const tools::Args& args) {
  Params p;
  PSDB_ASSIGN_OR_RETURN(p.train_rows,
                        args.GetInt("train_rows", p.train_rows, 1, 1LL << 36));
  PSDB_ASSIGN_OR_RETURN(p.test_rows,
                        args.GetInt("test_rows", p.test_rows, 2, 1LL << 36));
  if (args.Has("kinds")) {
    p.kinds = absl::StrSplit(args.GetString("kinds", ""), ',');
    for (const std::string& kind : p.kinds) {
      PSDB_RETURN_IF_ERROR(train::ParseGeneratorKind(kind).status());
    }
  }
  if (args.Has("models")) {
    p.models = absl::StrSplit(args.GetString("models", ""), ',');
    for (const std::string& model : p.models) {
      PSDB_RETURN_IF_ERROR(train::ParseModelKind(model).status());
    }
  }
  PSDB_ASSIGN_OR_RETURN(p.batch_size,
                        args.GetInt("batch_size", p.batch_size, 1, 1 << 20));
  PSDB_ASSIGN_OR_RETURN(p.deep_dim,
                        args.GetInt("deep_dim", p.deep_dim, 1, 4096));
  p.hidden = args.GetString("hidden", p.hidden);
  PSDB_ASSIGN_OR_RETURN(p.max_vocab,
                        args.GetInt("max_vocab", p.max_vocab, 1, 1LL << 31));
  PSDB_ASSIGN_OR_RETURN(p.servers, args.GetInt("servers", p.servers, 1, 64));
  PSDB_ASSIGN_OR_RETURN(p.workers, args.GetInt("workers", p.workers, 1, 64));
  // The cache must hold a batch and its prefetched successor (ps-train).
  const int64_t min_cache = 2 * p.batch_size * 26;
  PSDB_ASSIGN_OR_RETURN(
      p.cache_rows, args.GetInt("cache_rows", std::max(p.cache_rows, min_cache),
                                min_cache, 1LL << 31));
  PSDB_ASSIGN_OR_RETURN(p.cache_staleness,
                        args.GetInt("cache_staleness", 0, 0, 1 << 20));
  if (p.cache_staleness > 0 && p.workers < 2) {
    return absl::InvalidArgumentError(
        "--cache_staleness is for the cluster's push-through cache: give "
        "--workers 2 or more");
  }
  p.mode = args.GetString("mode", p.mode);
  if (p.mode != "sync" && p.mode != "async") {
    return absl::InvalidArgumentError("--mode must be sync or async");
  }
  PSDB_ASSIGN_OR_RETURN(p.seed, args.GetInt("seed", p.seed, 0, INT64_MAX));
  p.bin = args.GetString("bin", "");
  p.dir = args.GetString("dir", "");
  PSDB_ASSIGN_OR_RETURN(p.json, args.GetBool("json"));
  // Equal line shards with equal step counts (sync servers apply a step
  // only when every worker pushed it).
  const int64_t unit = p.workers * p.batch_size;
  p.train_rows = (p.train_rows + unit - 1) / unit * unit;
  return p;
}

// ps-train, ps-server and ps-scheduler in --bin, or beside ps-bench.
absl::Status FindBinaries(Params* p) {
  PSDB_ASSIGN_OR_RETURN(p->ps_train, tools::SiblingBinary("ps-train", p->bin));
  PSDB_ASSIGN_OR_RETURN(p->ps_server,
                        tools::SiblingBinary("ps-server", p->bin));
  PSDB_ASSIGN_OR_RETURN(p->ps_scheduler,
                        tools::SiblingBinary("ps-scheduler", p->bin));
  return absl::OkStatus();
}

// A ps-* process of the scenario: `argv` (its binary first) with `env`,
// stdout and stderr in `log`, SIGTERM if still running when dropped.
absl::StatusOr<std::unique_ptr<tools::ChildProcess>> StartLogged(
    std::vector<std::string> argv, std::map<std::string, std::string> env,
    std::string log) {
  tools::ChildOptions options;
  options.binary = argv.front();
  options.args.assign(argv.begin() + 1, argv.end());
  options.env = std::move(env);
  options.log = std::move(log);
  options.destroy_signal = SIGTERM;
  return tools::ChildProcess::Start(options);
}

struct Run {
  std::string id;
  std::string label;
  std::string kind;   // of the generated data
  std::string model;  // ps-train --model
  uint64_t samples = 0;
  double seconds = 0;  // the slowest process's training loop
  double hit_rate = NAN;
  double auc = NAN;        // test AUC (rank 0's evaluation)
  double bayes_auc = NAN;  // the data's Bayes-optimal AUC
  double Rate() const { return seconds > 0 ? samples / seconds : 0; }
  double Gap() const { return bayes_auc - auc; }
};

// The top-level number `name` of ps-train's summary.json; NaN if absent or
// not a number (null).
double SummaryField(const Json& summary, const char* name) {
  const auto it = summary.find(name);
  return it != summary.end() && it->is_number() ? it->get<double>() : NAN;
}

absl::Status AddSummary(const std::string& ckpt_dir, Run* run,
                        double* hits_weighted) {
  const std::string path = ckpt_dir + "/summary.json";
  std::ifstream in(path);
  const Json summary =
      Json::parse(in, /*cb=*/nullptr, /*allow_exceptions=*/false);
  if (!summary.is_object()) {
    return absl::DataLossError(absl::StrCat(path, " is not a JSON object"));
  }
  const double samples = SummaryField(summary, "samples");
  const double seconds = SummaryField(summary, "seconds");
  if (!std::isfinite(samples) || !std::isfinite(seconds)) {
    return absl::DataLossError(absl::StrCat("no samples/seconds in ", path));
  }
  run->samples += static_cast<uint64_t>(samples);
  run->seconds = std::max(run->seconds, seconds);
  // Every rank evaluates the whole test set with the same tables; the
  // first summary read (rank 0's) gives the run's AUC.
  if (std::isnan(run->auc)) {
    run->auc = SummaryField(summary, "auc");
    run->bayes_auc = SummaryField(summary, "bayes_auc");
  }
  const double hit = SummaryField(summary, "cache_hit_rate");
  if (std::isfinite(hit)) *hits_weighted += hit * samples;
  return absl::OkStatus();
}

std::vector<std::string> TrainArgs(const Params& p, const std::string& model,
                                   const std::string& data,
                                   const std::string& ckpt) {
  return {p.ps_train,
          "--model=" + model,
          "--data=" + data,
          "--checkpoint_dir=" + ckpt,
          "--mode=" + p.mode,
          absl::StrCat("--batch_size=", p.batch_size),
          absl::StrCat("--deep_dim=", p.deep_dim),
          "--hidden=" + p.hidden,
          absl::StrCat("--cache_rows=", p.cache_rows),
          absl::StrCat("--seed=", p.seed),
          "--shard_by=line",
          "--log_every=1000000",
          "--valid_fraction=0",  // all rows train, as the AUC table assumes
          "--no_progress",
          "--no_plot"};
}

absl::StatusOr<Run> RunEmbedded(const Params& p, const std::string& kind,
                                const std::string& model,
                                const std::string& data,
                                const std::string& dir) {
  // The first kind's first-model run keeps the id "embedded", the first
  // model's on another kind "embedded_<kind>"; the other models add
  // "_<model>".
  std::string id = kind == p.kinds.front() ? "embedded" : "embedded_" + kind;
  if (model != p.models.front()) {
    id = absl::StrCat("embedded_", kind, "_", model);
  }
  Run run{id, "embedded (local store, 1 process)", kind, model};
  const std::string ckpt = dir + "/" + id;
  PSDB_ASSIGN_OR_RETURN(auto proc, StartLogged(TrainArgs(p, model, data, ckpt),
                                               {}, dir + "/" + id + ".log"));
  PSDB_RETURN_IF_ERROR(proc->WaitForSuccess(absl::Hours(2)));
  double hits = 0;
  PSDB_RETURN_IF_ERROR(AddSummary(ckpt, &run, &hits));
  run.hit_rate = hits / run.samples;
  return run;
}

// `dense`: ps-train's --dense ("ps" or "allreduce").
absl::StatusOr<Run> RunCluster(const Params& p, const std::string& data,
                               const std::string& dir, bool prefetch,
                               const std::string& dense) {
  const std::string id = dense == "allreduce" ? "cluster_allreduce"
                         : prefetch           ? "cluster_on"
                                              : "cluster_off";
  Run run{id,
          absl::StrFormat("cluster %ds/%dw, prefetch %s, dense %s", p.servers,
                          p.workers, prefetch ? "on" : "off", dense),
          p.kinds.front(), p.models.front()};
  const std::string root = dir + "/" + id;
  std::filesystem::create_directories(root);
  const tools::ReservedPort held;  // for the processes' life
  const int port = held.port();
  const std::map<std::string, std::string> base = {
      {"PS_SERVER_NUM", absl::StrCat(p.servers)},
      {"PS_WORKER_NUM", absl::StrCat(p.workers)},
      {"PS_SCHED_HOST", "127.0.0.1"},
      {"PS_SCHED_PORT", absl::StrCat(port)}};
  auto env = [&](const std::string& role, const std::string& node) {
    std::map<std::string, std::string> e = base;
    e["PS_ROLE"] = role;
    if (!node.empty()) e["PS_NODE_ID"] = node;
    return e;
  };
  PSDB_ASSIGN_OR_RETURN(auto sched,
                        StartLogged({p.ps_scheduler}, env("scheduler", ""),
                                    root + "/scheduler.log"));
  std::vector<std::unique_ptr<tools::ChildProcess>> servers;
  for (int s = 0; s < p.servers; ++s) {
    std::vector<std::string> argv = {
        p.ps_server, absl::StrCat("--data_dir=", root, "/server-", s)};
    if (p.mode == "sync") argv.push_back("--sync_mode=sync");
    PSDB_ASSIGN_OR_RETURN(
        auto server,
        StartLogged(argv, env("server", absl::StrCat("server-", s)),
                    absl::StrCat(root, "/server_", s, ".log")));
    servers.push_back(std::move(server));
  }
  std::vector<std::unique_ptr<tools::ChildProcess>> workers;
  for (int w = 0; w < p.workers; ++w) {
    // One checkpoint directory: rank 0 writes the cluster checkpoint and
    // its reports there, rank r its reports under rank-r/.
    std::vector<std::string> argv =
        TrainArgs(p, p.models.front(), data, root + "/ckpt");
    argv.push_back(absl::StrCat("--store=scheduler:127.0.0.1:", port));
    if (!prefetch) argv.push_back("--no_prefetch");
    if (p.cache_staleness > 0) {
      argv.push_back(absl::StrCat("--cache_staleness=", p.cache_staleness));
    }
    argv.push_back("--dense=" + dense);
    if (dense == "allreduce") argv.push_back("--collective_host=127.0.0.1");
    PSDB_ASSIGN_OR_RETURN(
        auto worker,
        StartLogged(argv, env("worker", absl::StrCat("worker-", w)),
                    absl::StrCat(root, "/worker_", w, ".log")));
    workers.push_back(std::move(worker));
  }
  for (auto& w : workers)
    PSDB_RETURN_IF_ERROR(w->WaitForSuccess(absl::Hours(2)));
  for (auto& s : servers) PSDB_RETURN_IF_ERROR(s->Stop());
  PSDB_RETURN_IF_ERROR(sched->Stop());
  double hits = 0;
  for (int w = 0; w < p.workers; ++w) {
    PSDB_RETURN_IF_ERROR(AddSummary(
        w == 0 ? root + "/ckpt" : absl::StrCat(root, "/ckpt/rank-", w), &run,
        &hits));
  }
  run.hit_rate = hits / run.samples;
  return run;
}

// An embedded run against the lr run on the same kind (with lr among the
// models): AUC difference and samples/s ratio, both from the same bench.
struct ModelRow {
  const Run* run;
  double auc_over_lr;
  double rate_vs_lr;
};
std::vector<ModelRow> ModelRows(const Params& p, const std::vector<Run>& runs) {
  std::vector<ModelRow> rows;
  for (const std::string& kind : p.kinds) {
    const Run* lr = nullptr;
    for (const Run& r : runs) {
      if (r.kind == kind && r.model == "lr" && r.id.starts_with("embedded")) {
        lr = &r;
      }
    }
    if (lr == nullptr) continue;
    for (const Run& r : runs) {
      if (r.kind != kind || !r.id.starts_with("embedded")) continue;
      rows.push_back({&r, r.auc - lr->auc, r.Rate() / lr->Rate()});
    }
  }
  return rows;
}

void PrintReport(const Params& p, const MachineInfo& m,
                 const std::vector<Run>& runs, const std::vector<Ratio>& ratios,
                 std::ostream& out) {
  out << "ps-bench train\n";
  out << absl::StrFormat("machine     %d cores, %s, %.2f GiB RAM\n", m.cores,
                         m.cpu_model, m.memory_bytes / double(1ull << 30));
  out << absl::StrFormat(
      "parameters  train_rows=%d test_rows=%d models=%s batch_size=%d "
      "deep_dim=%d hidden=%s cache_rows=%d cache_staleness=%d max_vocab=%d "
      "servers=%d workers=%d mode=%s seed=%d\n\n",
      p.train_rows, p.test_rows, absl::StrJoin(p.models, ","), p.batch_size,
      p.deep_dim, p.hidden, p.cache_rows, p.cache_staleness, p.max_vocab,
      p.servers, p.workers, p.mode, p.seed);
  out << absl::StrFormat("%-44s %-9s %-9s %9s %8s %11s %9s %7s %7s %7s\n",
                         "run", "data", "model", "samples", "seconds",
                         "samples/s", "cache hit", "AUC", "Bayes", "gap");
  for (const Run& r : runs) {
    out << absl::StrFormat(
        "%-44s %-9s %-9s %9d %8.2f %11.0f %8.1f%% %7.4f %7.4f %7.4f\n", r.label,
        r.kind, r.model, r.samples, r.seconds, r.Rate(), 100 * r.hit_rate,
        r.auc, r.bayes_auc, r.Gap());
  }
  out << "\n";
  const std::vector<ModelRow> rows = ModelRows(p, runs);
  if (!rows.empty()) {
    out << absl::StrFormat("%-9s %-9s %7s %7s %10s %11s\n", "data", "model",
                           "AUC", "gap", "AUC - lr", "speed vs lr");
    for (const ModelRow& row : rows) {
      out << absl::StrFormat("%-9s %-9s %7.4f %7.4f %+10.4f %11.3f\n",
                             row.run->kind, row.run->model, row.run->auc,
                             row.run->Gap(), row.auc_over_lr, row.rate_vs_lr);
    }
    out << "\n";
  }
  PrintRatios(ratios, out);
}

void PrintJson(const Params& p, const MachineInfo& m,
               const std::vector<Run>& runs, const std::vector<Ratio>& ratios,
               std::ostream& out) {
  Json j = StartReportJson("train", m);
  j["params"] = {{"train_rows", p.train_rows},
                 {"test_rows", p.test_rows},
                 {"kinds", p.kinds},
                 {"models", p.models},
                 {"batch_size", p.batch_size},
                 {"deep_dim", p.deep_dim},
                 {"hidden", p.hidden},
                 {"cache_rows", p.cache_rows},
                 {"cache_staleness", p.cache_staleness},
                 {"max_vocab", p.max_vocab},
                 {"servers", p.servers},
                 {"workers", p.workers},
                 {"mode", p.mode},
                 {"seed", p.seed}};
  const std::vector<ModelRow> model_rows = ModelRows(p, runs);
  Json by_id = Json::object();
  for (const Run& r : runs) {
    Json run = {{"label", r.label},
                {"kind", r.kind},
                {"model", r.model},
                {"samples", r.samples},
                {"seconds", r.seconds},
                {"samples_per_s", r.Rate()},
                {"cache_hit_rate", r.hit_rate},
                {"auc", r.auc},
                {"bayes_auc", r.bayes_auc},
                {"auc_gap", r.Gap()}};
    for (const ModelRow& row : model_rows) {
      if (row.run != &r) continue;
      run["auc_over_lr"] = row.auc_over_lr;
      run["samples_per_s_vs_lr"] = row.rate_vs_lr;
    }
    by_id[r.id] = std::move(run);
  }
  j["runs"] = std::move(by_id);
  AddRatiosJson(ratios, &j);
  WriteJson(j, out);
}

// The --dense=allreduce run needs sync mode and 2+ workers.
bool AllReduceRuns(const Params& p) {
  return p.mode == "sync" && p.workers >= 2;
}

// Generates the data, runs the trainings, reports.
absl::Status RunAll(Params& p, std::ostream& out) {
  PSDB_ASSIGN_OR_RETURN(BenchDir dir, BenchDir::Make(p.dir, "train"));
  p.dir = dir.path();
  auto gen = [&](const std::string& kind) -> absl::StatusOr<std::string> {
    const std::string data = p.dir + "/data_" + kind;
    PSDB_ASSIGN_OR_RETURN(
        auto proc,
        StartLogged({p.ps_train, "gen", "--out=" + data, "--kind=" + kind,
                     absl::StrCat("--seed=", p.seed),
                     absl::StrCat("--train_rows=", p.train_rows),
                     absl::StrCat("--test_rows=", p.test_rows),
                     absl::StrCat("--max_vocab=", p.max_vocab)},
                    {}, p.dir + "/gen_" + kind + ".log"));
    PSDB_RETURN_IF_ERROR(proc->WaitForSuccess(absl::Hours(1)));
    return data;
  };
  auto run_all = [&]() -> absl::StatusOr<std::vector<Run>> {
    std::vector<Run> runs;
    PSDB_ASSIGN_OR_RETURN(std::string data, gen(p.kinds.front()));
    PSDB_ASSIGN_OR_RETURN(
        Run embedded,
        RunEmbedded(p, p.kinds.front(), p.models.front(), data, p.dir));
    runs.push_back(embedded);
    PSDB_ASSIGN_OR_RETURN(Run on, RunCluster(p, data, p.dir, true, "ps"));
    runs.push_back(on);
    PSDB_ASSIGN_OR_RETURN(Run off, RunCluster(p, data, p.dir, false, "ps"));
    runs.push_back(off);
    if (AllReduceRuns(p)) {
      PSDB_ASSIGN_OR_RETURN(Run ar,
                            RunCluster(p, data, p.dir, true, "allreduce"));
      runs.push_back(ar);
    }
    for (size_t m = 1; m < p.models.size(); ++m) {
      PSDB_ASSIGN_OR_RETURN(
          Run run, RunEmbedded(p, p.kinds.front(), p.models[m], data, p.dir));
      runs.push_back(run);
    }
    for (size_t k = 1; k < p.kinds.size(); ++k) {
      PSDB_ASSIGN_OR_RETURN(std::string other, gen(p.kinds[k]));
      for (const std::string& model : p.models) {
        PSDB_ASSIGN_OR_RETURN(Run run,
                              RunEmbedded(p, p.kinds[k], model, other, p.dir));
        runs.push_back(run);
      }
    }
    return runs;
  };
  absl::StatusOr<std::vector<Run>> runs = run_all();
  PSDB_RETURN_IF_ERROR(runs.status());
  // One round, no targets: the trainings are too long to repeat by default.
  std::vector<Ratio> ratios = {
      {.name = "prefetch_on_vs_off",
       .rounds = {(*runs)[1].Rate() / (*runs)[2].Rate()}},
      {.name = "cluster_vs_embedded",
       .rounds = {(*runs)[1].Rate() / (*runs)[0].Rate()}},
  };
  if (AllReduceRuns(p)) {
    // Dense AllReduce against dense tables on psdb, both with prefetch.
    ratios.push_back({.name = "allreduce_vs_ps",
                      .rounds = {(*runs)[3].Rate() / (*runs)[1].Rate()}});
  }
  const MachineInfo machine = DescribeMachine();
  if (p.json) {
    PrintJson(p, machine, *runs, ratios, out);
  } else {
    PrintReport(p, machine, *runs, ratios, out);
  }
  return absl::OkStatus();
}

}  // namespace

int RunTrainBench(int argc, const char* const* argv, std::ostream& out,
                  std::ostream& err) {
  return RunScenario<Params>(Flags(), argc, argv, out, err, &ParseParams,
                             [&](Params& p) -> absl::Status {
                               PSDB_RETURN_IF_ERROR(FindBinaries(&p));
                               return RunAll(p, out);
                             });
}

}  // namespace psdb::bench
