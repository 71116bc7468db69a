#include "tools/bench/server_bench.h"

#include <signal.h>
#include <stdlib.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "tools/bench/bench_dir.h"
#include "tools/bench/json_writer.h"
#include "tools/bench/machine.h"
#include "tools/bench/process_memory.h"
#include "tools/bench/report.h"
#include "tools/bench/scenario.h"
#include "tools/bench/server_systems.h"
#include "tools/bench/timing.h"
#include "tools/bench/zipf.h"
#include "tools/common/args.h"
#include "tools/common/sibling_binary.h"
#include "util/status_macros.h"

namespace psdb::bench {
namespace {

constexpr char kUsage[] = R"(usage: ps-bench server [--json] [flags]

Pulls and pushes of Zipf-distributed batches over loopback, in one run, on:
psdb (one ps-server process + RemoteClient, Adagrad applied server-side),
Redis (redis-server started by the benchmark; pipelined MGET/MSET of the same
rows as dim*4-byte values via hiredis) and a raw-TCP gather server with no
RPC layer (the limit; pulls only; its client de-duplicates each batch as
RemoteClient does). Same client threads for all. All three stay up for the
whole run and are measured in alternating rounds (psdb, redis, limit, psdb,
...); each ratio is reported as its median over the rounds, with min and max.

flags:
  --rows=N           keys, all created before measuring (default 1048576)
  --dim=D            floats per row (default 64)
  --batch_keys=N     keys per batch (default 4096)
  --batches=N        batches per client thread in one pass over the stream;
                     a timed phase runs at least one pass (default 64)
  --warmup_batches=N warm-up batches per thread (default 8)
  --threads=T        client threads, one connection each (default 2)
  --alpha=A          Zipf exponent (default 1.05)
  --redis_chunk=N    keys per pipelined MGET/MSET command (default 512)
  --repeats=R        rounds over the three systems (default 5)
  --min_seconds=S    each timed phase (a system's pulls, its pushes) runs
                     at least this long; 0: one pass (default 2)
  --seed=S           stream seed (default 1)
  --psdb_memory_budget_mb=M  ps-server's --memory_budget_mb (default 0:
                     twice the table + 256 MiB, everything resident)
  --rss_base_mb=B    the fixed base of the peak-RSS target: ps-server's
                     peak RSS (VmHWM) <= 1.5 x budget + B (default 100,
                     docs/operations/memory.md)
  --systems=A,B,..   measure only these of psdb, redis, tcp_limit (ratios
                     that need a skipped one are null) (default all)
  --ps_server=PATH   ps-server binary (default: next to ps-bench)
  --redis_server=P   redis-server binary (default: redis-server)
  --dir=PATH         scratch directory (default: fresh under $TMPDIR or /tmp)
  --json             print one JSON object instead of the report
)";

struct Params {
  uint64_t rows = 1 << 20;
  int dim = 64;
  uint64_t batch_keys = 4096;
  uint64_t batches = 64;
  uint64_t warmup_batches = 8;
  int threads = 2;
  double alpha = 1.05;
  uint64_t redis_chunk = 512;
  RoundsOptions rounds;
  uint64_t seed = 1;
  std::string ps_server;
  std::string redis_server = "redis-server";
  std::string dir;
  bool json = false;
  uint64_t psdb_memory_budget_mb = 0;
  uint64_t rss_base_mb = 100;
  std::vector<std::string> systems = {"psdb", "redis", "tcp_limit"};
  bool Runs(absl::string_view id) const {
    return std::find(systems.begin(), systems.end(), id) != systems.end();
  }
};

// ps-server's --memory_budget_mb for these parameters (as OpenPsdbSystem
// derives it when psdb_memory_budget_mb is 0).
uint64_t PsdbBudgetMb(const Params& p) {
  if (p.psdb_memory_budget_mb != 0) return p.psdb_memory_budget_mb;
  const uint64_t row_bytes = p.dim * 2 * sizeof(float) + 64;
  return (p.rows * row_bytes * 2 >> 20) + 256;
}

ScenarioFlags Flags() {
  ScenarioFlags flags{
      "server",
      kUsage,
      {"rows", "dim", "batch_keys", "batches", "warmup_batches", "threads",
       "alpha", "redis_chunk", "seed", "ps_server", "redis_server", "dir",
       "psdb_memory_budget_mb", "rss_base_mb", "systems"}};
  flags.known.insert(flags.known.end(), std::begin(kRoundsFlags),
                     std::end(kRoundsFlags));
  return flags;
}

absl::StatusOr<Params> ParseParams(const tools::Args& args) {
  Params p;
  PSDB_ASSIGN_OR_RETURN(p.rows, args.GetInt("rows", p.rows, 1, 1ll << 30));
  PSDB_ASSIGN_OR_RETURN(int64_t dim, args.GetInt("dim", p.dim, 1, 1024));
  p.dim = static_cast<int>(dim);
  PSDB_ASSIGN_OR_RETURN(p.batch_keys,
                        args.GetInt("batch_keys", p.batch_keys, 1, 65536));
  PSDB_ASSIGN_OR_RETURN(p.batches,
                        args.GetInt("batches", p.batches, 1, 1 << 20));
  PSDB_ASSIGN_OR_RETURN(
      p.warmup_batches,
      args.GetInt("warmup_batches", p.warmup_batches, 0, 1 << 20));
  PSDB_ASSIGN_OR_RETURN(int64_t threads,
                        args.GetInt("threads", p.threads, 1, 256));
  p.threads = static_cast<int>(threads);
  PSDB_ASSIGN_OR_RETURN(p.alpha, args.GetDouble("alpha", p.alpha, 0.01, 10));
  PSDB_ASSIGN_OR_RETURN(p.redis_chunk,
                        args.GetInt("redis_chunk", p.redis_chunk, 1, 1 << 20));
  PSDB_RETURN_IF_ERROR(ParseRounds(args, &p.rounds));
  PSDB_ASSIGN_OR_RETURN(int64_t seed, args.GetInt("seed", 1, 0, INT64_MAX));
  p.seed = static_cast<uint64_t>(seed);
  p.ps_server = args.GetString("ps_server", "");
  p.redis_server = args.GetString("redis_server", p.redis_server);
  p.dir = args.GetString("dir", "");
  PSDB_ASSIGN_OR_RETURN(p.json, args.GetBool("json"));
  PSDB_ASSIGN_OR_RETURN(p.psdb_memory_budget_mb,
                        args.GetInt("psdb_memory_budget_mb", 0, 0, 1ll << 24));
  PSDB_ASSIGN_OR_RETURN(p.rss_base_mb,
                        args.GetInt("rss_base_mb", p.rss_base_mb, 0, 1 << 20));
  PSDB_ASSIGN_OR_RETURN(p.systems, args.GetChoiceList("systems", p.systems));
  return p;
}

// One timed phase of one system in one round.
struct Phase {
  uint64_t keys = 0;  // all threads
  double seconds = 0;
  double Rate() const { return keys / seconds; }
};

// A system's figures: load once, then one pull (and push) phase per round.
struct SystemResult {
  std::string id;
  std::string label;
  double load_s = 0;
  std::vector<Phase> pulls;
  std::vector<Phase> pushes;  // empty: pushes not measured
  // Its server process's memory after the last round (VmHWM: the peak
  // over the whole run, load included); nullopt: no server process.
  std::optional<ProcessMemory> memory;

  static std::vector<double> Rates(const std::vector<Phase>& phases) {
    std::vector<double> rates;
    for (const Phase& ph : phases) rates.push_back(ph.Rate());
    return rates;
  }
  static Phase Total(const std::vector<Phase>& phases) {
    Phase total;
    for (const Phase& ph : phases) {
      total.keys += ph.keys;
      total.seconds += ph.seconds;
    }
    return total;
  }
  double PullRate() const { return Median(Rates(pulls)); }
  double PushRate() const { return Median(Rates(pushes)); }
};

double Mib(uint64_t bytes) { return bytes / double(1 << 20); }

void PrintReport(const Params& p, const MachineInfo& m,
                 const std::vector<SystemResult>& results,
                 const std::vector<Ratio>& ratios, std::ostream& out) {
  out << "ps-bench server\n";
  out << absl::StrFormat("machine     %d cores, %s, %.2f GiB RAM\n", m.cores,
                         m.cpu_model, m.memory_bytes / double(1ull << 30));
  out << absl::StrFormat(
      "parameters  rows=%d dim=%d batch_keys=%d batches=%d/thread/pass "
      "warmup=%d threads=%d alpha=%g redis_chunk=%d seed=%d (psdb push: "
      "Adagrad)\n"
      "rounds      %d, systems alternating; each phase >= %g s\n"
      "psdb        ps-server --memory_budget_mb=%d\n\n",
      p.rows, p.dim, p.batch_keys, p.batches, p.warmup_batches, p.threads,
      p.alpha, p.redis_chunk, p.seed, p.rounds.repeats, p.rounds.min_seconds,
      PsdbBudgetMb(p));
  out << absl::StrFormat(
      "%-40s %9s %14s %14s %10s   (median over rounds; peak RSS of the "
      "server process)\n",
      "system", "load s", "pull keys/s", "push keys/s", "peak RSS");
  for (const SystemResult& r : results) {
    if (r.pulls.empty()) continue;  // not run (--systems)
    out << absl::StrFormat(
        "%-40s %9.2f %14.0f %14s %10s\n", r.label, r.load_s, r.PullRate(),
        r.pushes.empty() ? "-" : absl::StrFormat("%.0f", r.PushRate()),
        r.memory.has_value()
            ? absl::StrFormat("%.0f MiB", Mib(r.memory->peak_rss_bytes))
            : "-");
  }
  for (const SystemResult& r : results) {
    if (r.id != "psdb" || !r.memory.has_value()) continue;
    const double bound = 1.5 * PsdbBudgetMb(p) + p.rss_base_mb;
    out << absl::StrFormat(
        "\npsdb memory  budget %d MiB; ps-server peak RSS %.0f MiB (target "
        "<= 1.5 x budget + %d MiB = %.0f MiB); at the end RSS %.0f MiB = "
        "anon %.0f + file %.0f, %d threads\n",
        PsdbBudgetMb(p), Mib(r.memory->peak_rss_bytes), p.rss_base_mb, bound,
        Mib(r.memory->rss_bytes), Mib(r.memory->rss_anon_bytes),
        Mib(r.memory->rss_file_bytes), r.memory->threads);
  }
  out << "\n";
  PrintRatios(ratios, out);
}

void PrintJson(const Params& p, const MachineInfo& m,
               const std::vector<SystemResult>& results,
               const std::vector<Ratio>& ratios, std::ostream& out) {
  Json j = StartReportJson("server", m);
  j["params"] = {{"rows", p.rows},
                 {"dim", p.dim},
                 {"batch_keys", p.batch_keys},
                 {"batches_per_thread", p.batches},
                 {"warmup_batches", p.warmup_batches},
                 {"threads", p.threads},
                 {"alpha", p.alpha},
                 {"redis_chunk", p.redis_chunk},
                 {"repeats", p.rounds.repeats},
                 {"min_seconds", p.rounds.min_seconds},
                 {"seed", p.seed},
                 {"psdb_memory_budget_mb", PsdbBudgetMb(p)},
                 {"rss_base_mb", p.rss_base_mb},
                 {"psdb_optimizer", "adagrad"}};
  Json systems = Json::object();
  for (const SystemResult& r : results) {
    if (r.pulls.empty()) continue;  // not run (--systems)
    const Phase pulls = SystemResult::Total(r.pulls);
    Json s = {{"label", r.label},
              {"load_s", r.load_s},
              {"keys", pulls.keys},
              {"pull_s", pulls.seconds},
              {"pull_keys_per_s", r.PullRate()},
              {"pull_keys_per_s_rounds", SystemResult::Rates(r.pulls)}};
    if (!r.pushes.empty()) {
      const Phase pushes = SystemResult::Total(r.pushes);
      s["push_keys"] = pushes.keys;
      s["push_s"] = pushes.seconds;
      s["push_keys_per_s"] = r.PushRate();
      s["push_keys_per_s_rounds"] = SystemResult::Rates(r.pushes);
    }
    if (r.memory.has_value()) {
      s["server_peak_rss_bytes"] = r.memory->peak_rss_bytes;
      s["server_rss_bytes"] = r.memory->rss_bytes;
      s["server_rss_anon_bytes"] = r.memory->rss_anon_bytes;
      s["server_rss_file_bytes"] = r.memory->rss_file_bytes;
      s["server_threads"] = r.memory->threads;
    }
    systems[r.id] = std::move(s);
  }
  j["systems"] = std::move(systems);
  AddRatiosJson(ratios, &j);
  WriteJson(j, out);
}

// Opens the three systems, warms each up, then measures them in
// alternating rounds. The systems are closed (their servers stopped) on
// return, before the caller removes the scratch directory.
absl::StatusOr<std::vector<SystemResult>> MeasureAll(const Params& p,
                                                     const std::string& dir,
                                                     std::ostream& log) {
  const ServerSystemOptions options{
      .rows = p.rows,
      .dim = p.dim,
      .threads = p.threads,
      .batch_keys = p.batch_keys,
      .redis_chunk = p.redis_chunk,
      .seed = p.seed,
      .ps_server = p.ps_server,
      .redis_server = p.redis_server,
      .dir = dir,
      .psdb_memory_budget_mb = p.psdb_memory_budget_mb,
  };
  const uint64_t per_thread = p.warmup_batches + p.batches;
  const std::vector<uint64_t> stream = ZipfKeyStream(
      p.rows, p.alpha, p.threads * per_thread, p.batch_keys, p.seed);
  // Thread t's b-th batch: the first warmup_batches warm up, the rest are
  // the pass a timed phase cycles through.
  auto batch = [&](int t, uint64_t b) {
    return absl::MakeConstSpan(stream).subspan(
        (t * per_thread + b) * p.batch_keys, p.batch_keys);
  };

  // Skipped systems (--systems) stay null and get empty results.
  std::vector<std::unique_ptr<ServerSystem>> systems;
  for (auto [id, open] : {std::pair{"psdb", &OpenPsdbSystem},
                          {"redis", &OpenRedisSystem},
                          {"tcp_limit", &OpenTcpLimitSystem}}) {
    if (!p.Runs(id)) {
      systems.push_back(nullptr);
      continue;
    }
    PSDB_ASSIGN_OR_RETURN(std::unique_ptr<ServerSystem> system, open(options));
    log << "ps-bench server: " << system->id() << " loaded in "
        << absl::StrFormat("%.2f", system->load_s()) << " s\n";
    ServerSystem& s = *system;
    PSDB_RETURN_IF_ERROR(RunThreads(p.threads, [&](int t) -> absl::Status {
                           for (uint64_t b = 0; b < p.warmup_batches; ++b) {
                             PSDB_RETURN_IF_ERROR(s.Pull(t, batch(t, b)));
                           }
                           return absl::OkStatus();
                         }).status());
    systems.push_back(std::move(system));
  }

  std::vector<SystemResult> results;
  for (const auto& s : systems) {
    if (s == nullptr) {
      results.emplace_back();
      continue;
    }
    results.push_back(
        {.id = s->id(), .label = s->label(), .load_s = s->load_s()});
  }
  auto timed = [&](auto op) -> absl::StatusOr<Phase> {
    PSDB_ASSIGN_OR_RETURN(
        const PhaseTiming timing,
        RunTimedPhase(
            p.threads, p.batches, p.rounds.min_seconds, [&](int t, uint64_t i) {
              return op(t, batch(t, p.warmup_batches + i % p.batches));
            }));
    return Phase{timing.batches * p.batch_keys, timing.seconds};
  };
  for (int round = 0; round < p.rounds.repeats; ++round) {
    for (size_t i = 0; i < systems.size(); ++i) {
      if (systems[i] == nullptr) continue;
      ServerSystem& s = *systems[i];
      SystemResult& r = results[i];
      PSDB_ASSIGN_OR_RETURN(const Phase pull,
                            timed([&](int t, absl::Span<const uint64_t> keys) {
                              return s.Pull(t, keys);
                            }));
      r.pulls.push_back(pull);
      std::string line = absl::StrFormat(
          "ps-bench server: round %d/%d %-9s pull %10.0f keys/s", round + 1,
          p.rounds.repeats, s.id(), pull.Rate());
      if (s.has_push()) {
        PSDB_ASSIGN_OR_RETURN(
            const Phase push,
            timed([&](int t, absl::Span<const uint64_t> keys) {
              return s.Push(t, keys);
            }));
        r.pushes.push_back(push);
        absl::StrAppendFormat(&line, "  push %10.0f keys/s", push.Rate());
      }
      log << line << "\n";
    }
  }
  for (size_t i = 0; i < systems.size(); ++i) {
    if (systems[i] == nullptr) continue;
    absl::StatusOr<ProcessMemory> memory = systems[i]->ServerMemory();
    if (memory.ok()) results[i].memory = *memory;
  }
  return results;
}

absl::Status Run(const Params& p, std::ostream& out, std::ostream& log) {
  signal(SIGPIPE, SIG_IGN);  // a dead peer is an error, not a crash
  absl::StatusOr<std::vector<SystemResult>> results;
  {
    PSDB_ASSIGN_OR_RETURN(BenchDir dir, BenchDir::Make(p.dir, "server"));
    results = MeasureAll(p, dir.path(), log);
  }
  PSDB_RETURN_IF_ERROR(results.status());
  const SystemResult& psdb = (*results)[0];
  const SystemResult& redis = (*results)[1];
  const SystemResult& limit = (*results)[2];
  std::vector<Ratio> ratios = {
      {.name = "psdb_vs_redis_pull", .target = Target::AtLeast(2)},
      {.name = "psdb_vs_redis_push", .target = Target::AtLeast(1.5)},
      {.name = "psdb_vs_tcp_limit_pull", .target = Target::AtLeast(0.5)},
  };
  // Each round's ratio compares the systems' phases of that round, which
  // ran seconds apart; the median over rounds is the figure. NaN where a
  // system was not run.
  auto rate = [](const std::vector<Phase>& phases, int round) {
    return round < static_cast<int>(phases.size()) ? phases[round].Rate() : NAN;
  };
  for (int round = 0; round < p.rounds.repeats; ++round) {
    ratios[0].rounds.push_back(rate(psdb.pulls, round) /
                               rate(redis.pulls, round));
    ratios[1].rounds.push_back(rate(psdb.pushes, round) /
                               rate(redis.pushes, round));
    ratios[2].rounds.push_back(rate(psdb.pulls, round) /
                               rate(limit.pulls, round));
  }
  // ps-server's peak RSS over the bound docs/operations/memory.md states for
  // its budget (one value: the peak of the whole run).
  ratios.push_back({.name = "psdb_peak_rss_vs_budget_bound",
                    .target = Target::AtMost(1),
                    .rounds = {psdb.memory.has_value()
                                   ? Mib(psdb.memory->peak_rss_bytes) /
                                         (1.5 * PsdbBudgetMb(p) + p.rss_base_mb)
                                   : NAN},
                    .note = "(peak RSS / (1.5 x budget + base))"});
  const MachineInfo machine = DescribeMachine();
  if (p.json) {
    PrintJson(p, machine, *results, ratios, out);
  } else {
    PrintReport(p, machine, *results, ratios, out);
  }
  return absl::OkStatus();
}

}  // namespace

int RunServerBench(int argc, const char* const* argv, std::ostream& out,
                   std::ostream& err) {
  return RunScenario<Params>(
      Flags(), argc, argv, out, err, &ParseParams,
      [&](Params& p) -> absl::Status {
        // Beside ps-bench unless --ps_server names it.
        if (p.ps_server.empty() && p.Runs("psdb")) {
          PSDB_ASSIGN_OR_RETURN(p.ps_server, tools::SiblingBinary("ps-server"));
        }
        return Run(p, out, err);
      });
}

}  // namespace psdb::bench
