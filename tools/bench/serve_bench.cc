#include "tools/bench/serve_bench.h"

#include <signal.h>
#include <stdlib.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "optim/optimizer.h"
#include "psdb/row.h"
#include "psdb/store.h"
#include "tools/bench/freshness_bench.h"
#include "tools/bench/json_writer.h"
#include "tools/bench/latency.h"
#include "tools/bench/machine.h"
#include "tools/bench/report.h"
#include "tools/bench/scenario.h"
#include "tools/bench/serve_checkpoints.h"
#include "tools/bench/server_systems.h"
#include "tools/bench/timing.h"
#include "tools/bench/zipf.h"
#include "tools/common/args.h"
#include "tools/common/sibling_binary.h"
#include "util/status_macros.h"

namespace psdb::bench {
namespace {

using Clock = std::chrono::steady_clock;

constexpr char kUsage[] = R"(usage: ps-bench serve [--json] [flags]

Read-only serving replicas (ps-server --serve_from) against Redis, in one
run: a checkpoint of --rows rows written by an in-process Store; replica
"serve" with a budget that holds the whole table, replica "serve_tiered"
with --tiered_fraction of it in memory, and redis-server holding the same
rows (pipelined MGET via hiredis). Client threads send Zipf lookups: first
closed-loop (peak rows/s), then open-loop at one fixed offered load for all
(--load_fraction of the slowest peak; p50/p99/p999 from each request's
intended send time), in alternating rounds. Last, at the same load, "serve"
swaps to a newer checkpoint: p99 and failed requests in the swap window
against a steady window just before it.

flags:
  --rows=N            rows in the checkpoint and in Redis (default 4194304)
  --dim=D             floats per row (default 64)
  --threads=T         client threads, one connection each (default 8)
  --batch_keys=N      keys per lookup (default 512)
  --batches=N         lookups per thread in one pass over the stream; each
                      system is warmed with one pass (default 256)
  --alpha=A           Zipf exponent (default 1.05)
  --redis_chunk=N     keys per pipelined MGET command (default 128)
  --tiered_fraction=F serve_tiered's budget, as a fraction of the table's
                      memory-tier bytes (default 0.1)
  --load_fraction=F   fixed offered load, as a fraction of the slowest
                      system's median peak (default 0.5)
  --swap_fraction=F   rows changed by the checkpoint swapped in (default
                      0.01)
  --swap_tail_s=S     the swap window ends this long after the replica
                      reports the new checkpoint (default 2)
  --repeats=R         rounds (peak, fixed load, swaps) (default 3)
  --min_seconds=S     each peak and fixed-load phase, and each steady window
                      before a swap, lasts this long (default 4)
  --seed=S            stream and row seed (default 1)
  --ps_server=PATH    ps-server binary (default: next to ps-bench)
  --redis_server=P    redis-server binary (default: redis-server)
  --dir=PATH          scratch directory (default: fresh under $TMPDIR or
                      /tmp)
  --json              print one JSON object instead of the report

ps-bench serve --freshness --help: how soon a change is served, by table
size (freshness_bench.h).
)";

struct Params {
  uint64_t rows = uint64_t{1} << 22;
  int dim = 64;
  int threads = 8;
  uint64_t batch_keys = 512;
  uint64_t batches = 256;
  double alpha = 1.05;
  uint64_t redis_chunk = 128;
  double tiered_fraction = 0.1;
  double load_fraction = 0.5;
  double swap_fraction = 0.01;
  double swap_tail_s = 2;
  RoundsOptions rounds{.repeats = 3, .min_seconds = 4};
  uint64_t seed = 1;
  std::string ps_server;
  std::string redis_server = "redis-server";
  std::string dir;
  bool json = false;
};

ScenarioFlags Flags() {
  ScenarioFlags flags{
      "serve",
      kUsage,
      {"rows", "dim", "threads", "batch_keys", "batches", "alpha",
       "redis_chunk", "tiered_fraction", "load_fraction", "swap_fraction",
       "swap_tail_s", "seed", "ps_server", "redis_server", "dir"}};
  flags.known.insert(flags.known.end(), std::begin(kRoundsFlags),
                     std::end(kRoundsFlags));
  return flags;
}

absl::StatusOr<Params> ParseParams(const tools::Args& args) {
  Params p;
  PSDB_ASSIGN_OR_RETURN(p.rows, args.GetInt("rows", p.rows, 1, 1ll << 30));
  PSDB_ASSIGN_OR_RETURN(int64_t dim, args.GetInt("dim", p.dim, 1, 1024));
  p.dim = static_cast<int>(dim);
  PSDB_ASSIGN_OR_RETURN(int64_t threads,
                        args.GetInt("threads", p.threads, 1, 256));
  p.threads = static_cast<int>(threads);
  PSDB_ASSIGN_OR_RETURN(p.batch_keys,
                        args.GetInt("batch_keys", p.batch_keys, 1, 65536));
  PSDB_ASSIGN_OR_RETURN(p.batches,
                        args.GetInt("batches", p.batches, 1, 1 << 20));
  PSDB_ASSIGN_OR_RETURN(p.alpha, args.GetDouble("alpha", p.alpha, 0.01, 10));
  PSDB_ASSIGN_OR_RETURN(p.redis_chunk,
                        args.GetInt("redis_chunk", p.redis_chunk, 1, 1 << 20));
  PSDB_ASSIGN_OR_RETURN(
      p.tiered_fraction,
      args.GetDouble("tiered_fraction", p.tiered_fraction, 0.001, 1));
  PSDB_ASSIGN_OR_RETURN(
      p.load_fraction,
      args.GetDouble("load_fraction", p.load_fraction, 0.01, 1));
  PSDB_ASSIGN_OR_RETURN(
      p.swap_fraction,
      args.GetDouble("swap_fraction", p.swap_fraction, 0.0001, 1));
  PSDB_ASSIGN_OR_RETURN(p.swap_tail_s,
                        args.GetDouble("swap_tail_s", p.swap_tail_s, 0, 600));
  PSDB_RETURN_IF_ERROR(ParseRounds(args, &p.rounds));
  PSDB_ASSIGN_OR_RETURN(int64_t seed, args.GetInt("seed", 1, 0, INT64_MAX));
  p.seed = static_cast<uint64_t>(seed);
  p.ps_server = args.GetString("ps_server", "");
  p.redis_server = args.GetString("redis_server", p.redis_server);
  p.dir = args.GetString("dir", "");
  PSDB_ASSIGN_OR_RETURN(p.json, args.GetBool("json"));
  return p;
}

double SinceS(Clock::time_point from, Clock::time_point to) {
  return std::chrono::duration<double>(to - from).count();
}

// ---- measuring -------------------------------------------------------------

// One system's figures at the fixed load in one round.
struct FixedLoad {
  double rows_per_s = 0;  // rows of successful lookups / phase seconds
  LatencySummary latency;
};

struct SystemResult {
  std::string id;
  std::string label;
  double load_s = 0;              // startup (replicas) or loading (Redis)
  uint64_t memory_budget_mb = 0;  // replicas only
  std::vector<double> peak;       // rows/s per round, closed loop
  std::vector<FixedLoad> fixed;   // per round
  double hit_rate = NAN;          // replicas: memory-tier hits / lookups

  double Peak() const { return Median(peak); }
  double FixedMedian(double (*get)(const FixedLoad&)) const {
    std::vector<double> v;
    for (const FixedLoad& f : fixed) v.push_back(get(f));
    return Median(v);
  }
};

double RowsPerS(const FixedLoad& f) { return f.rows_per_s; }
double P50(const FixedLoad& f) { return f.latency.p50_s; }
double P99(const FixedLoad& f) { return f.latency.p99_s; }
double P999(const FixedLoad& f) { return f.latency.p999_s; }

// One swap round: a steady window, then the swap window.
struct SwapRound {
  int64_t version = 0;
  double write_s = 0;   // the checkpoint write (Push + Checkpoint)
  double swap_s = 0;    // write start until the replica reported it
  double window_s = 0;  // the swap window's length
  LatencySummary steady;
  LatencySummary swap;
  // The swap window once the bench's own checkpoint write (on the same
  // machine, which production training is not) has finished: what the
  // replica's verify, open, warm and swap cost the requests by themselves.
  LatencySummary after_write;
};

struct Results {
  std::vector<SystemResult> systems;  // serve, serve_tiered, redis
  std::vector<SwapRound> swaps;
  double offered_rows_per_s = 0;
  double checkpoint_write_s = 0;  // version 0
};

double HitRate(const StoreStats& stats) {
  for (const TableStats& t : stats.tables) {
    if (t.name == "emb" && t.hits + t.misses > 0) {
      return static_cast<double>(t.hits) / (t.hits + t.misses);
    }
  }
  return NAN;
}

// Polls the replica until it serves table "emb" at `step` or later.
absl::Status WaitForStep(ServingReplica& replica, int64_t step) {
  const absl::Time deadline = absl::Now() + absl::Minutes(10);
  while (absl::Now() < deadline) {
    PSDB_ASSIGN_OR_RETURN(const StoreStats stats, replica.Stats());
    for (const TableStats& t : stats.tables) {
      if (t.name == "emb" && t.step >= step) return absl::OkStatus();
    }
    absl::SleepFor(absl::Milliseconds(20));
  }
  return absl::DeadlineExceededError(
      absl::StrCat("the replica did not swap to step ", step, " in 10 min"));
}

absl::StatusOr<Results> MeasureAll(const Params& p, const std::string& dir,
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
  };
  const std::vector<uint64_t> stream = ZipfKeyStream(
      p.rows, p.alpha, p.threads * p.batches, p.batch_keys, p.seed);
  // Thread t's i-th lookup, cycling through its batches.
  auto batch = [&](int t, uint64_t i) {
    return absl::MakeConstSpan(stream).subspan(
        (t * p.batches + i % p.batches) * p.batch_keys, p.batch_keys);
  };

  Results results;
  const std::string root = dir + "/ckpt";
  PSDB_ASSIGN_OR_RETURN(std::unique_ptr<CheckpointWriter> writer,
                        CheckpointWriter::Open(options, dir + "/train", root));
  auto t0 = Clock::now();
  PSDB_RETURN_IF_ERROR(writer->WriteAll());
  results.checkpoint_write_s = SinceS(t0, Clock::now());
  log << absl::StrFormat("ps-bench serve: checkpoint of %d rows in %.2f s\n",
                         p.rows, results.checkpoint_write_s);

  const double table_mb =
      static_cast<double>(p.rows * RowMemoryBytes(p.dim)) / (1 << 20);
  const uint64_t full_mb = static_cast<uint64_t>(std::ceil(table_mb * 1.25));
  const uint64_t tiered_mb = std::max<uint64_t>(
      1, static_cast<uint64_t>(std::ceil(table_mb * p.tiered_fraction)));
  PSDB_ASSIGN_OR_RETURN(
      std::unique_ptr<ServingReplica> serve,
      OpenServingReplica(options,
                         {.id = "serve",
                          .label = "psdb replica, whole table in memory",
                          .root = root,
                          .memory_budget_mb = full_mb + 64}));
  PSDB_ASSIGN_OR_RETURN(
      std::unique_ptr<ServingReplica> tiered,
      OpenServingReplica(
          options, {.id = "serve_tiered",
                    .label = absl::StrFormat("psdb replica, %g%% in memory",
                                             p.tiered_fraction * 100),
                    .root = root,
                    .memory_budget_mb = tiered_mb}));
  PSDB_ASSIGN_OR_RETURN(std::unique_ptr<ServerSystem> redis,
                        OpenRedisSystem(options));
  std::vector<ServerSystem*> systems = {serve.get(), tiered.get(), redis.get()};
  for (ServerSystem* s : systems) {
    results.systems.push_back(
        {.id = s->id(), .label = s->label(), .load_s = s->load_s()});
  }
  results.systems[0].memory_budget_mb = full_mb + 64;
  results.systems[1].memory_budget_mb = tiered_mb;

  // Warm-up: one closed-loop pass over each thread's batches.
  for (ServerSystem* s : systems) {
    t0 = Clock::now();
    PSDB_RETURN_IF_ERROR(RunThreads(p.threads, [&](int t) -> absl::Status {
                           for (uint64_t i = 0; i < p.batches; ++i) {
                             PSDB_RETURN_IF_ERROR(s->Pull(t, batch(t, i)));
                           }
                           return absl::OkStatus();
                         }).status());
    log << absl::StrFormat(
        "ps-bench serve: %-12s up in %.2f s, warmed in %.2f s\n", s->id(),
        s->load_s(), SinceS(t0, Clock::now()));
  }

  // 1. Peak, closed loop.
  for (int round = 0; round < p.rounds.repeats; ++round) {
    for (size_t k = 0; k < systems.size(); ++k) {
      ServerSystem& s = *systems[k];
      PSDB_ASSIGN_OR_RETURN(const PhaseTiming timing,
                            RunTimedPhase(p.threads, 1, p.rounds.min_seconds,
                                          [&](int t, uint64_t i) {
                                            return s.Pull(t, batch(t, i));
                                          }));
      const double rate = timing.batches * p.batch_keys / timing.seconds;
      results.systems[k].peak.push_back(rate);
      log << absl::StrFormat(
          "ps-bench serve: round %d/%d %-12s peak %10.0f rows/s\n", round + 1,
          p.rounds.repeats, s.id(), rate);
    }
  }

  // 2. Fixed offered load, open loop: the same for every system.
  double slowest = INFINITY;
  for (const SystemResult& r : results.systems) {
    slowest = std::min(slowest, r.Peak());
  }
  results.offered_rows_per_s = p.load_fraction * slowest;
  const double requests_per_s = results.offered_rows_per_s / p.batch_keys;
  log << absl::StrFormat(
      "ps-bench serve: fixed load %.0f rows/s (%.1f lookups/s), %g of the "
      "slowest peak\n",
      results.offered_rows_per_s, requests_per_s, p.load_fraction);
  auto fixed_load = [&](ServerSystem& s, double seconds,
                        const std::atomic<bool>* stop) {
    return RunOpenLoop(
        p.threads, requests_per_s, seconds, stop,
        [&](int t, uint64_t i) { return s.Pull(t, batch(t, i)); });
  };
  auto ok_rows_per_s = [&](const OpenLoopResult& run) {
    uint64_t ok = 0;
    for (const LatencySample& s : run.samples) ok += s.ok ? 1 : 0;
    return ok * p.batch_keys / run.seconds;
  };
  for (int round = 0; round < p.rounds.repeats; ++round) {
    for (size_t k = 0; k < systems.size(); ++k) {
      ServerSystem& s = *systems[k];
      const OpenLoopResult run = fixed_load(s, p.rounds.min_seconds, nullptr);
      FixedLoad f{.rows_per_s = ok_rows_per_s(run),
                  .latency = Summarize(run.samples)};
      if (f.latency.requests == f.latency.failed) {
        return absl::InternalError(
            absl::StrCat(s.id(), ": no lookup succeeded at the fixed load: ",
                         run.first_error.ToString()));
      }
      results.systems[k].fixed.push_back(f);
      log << absl::StrFormat(
          "ps-bench serve: round %d/%d %-12s fixed %10.0f rows/s  p50 %.3f "
          "p99 %.3f p999 %.3f ms  failed %d\n",
          round + 1, p.rounds.repeats, s.id(), f.rows_per_s,
          f.latency.p50_s * 1e3, f.latency.p99_s * 1e3, f.latency.p999_s * 1e3,
          f.latency.failed);
    }
  }
  for (size_t k = 0; k < 2; ++k) {
    ServingReplica& replica = k == 0 ? *serve : *tiered;
    PSDB_ASSIGN_OR_RETURN(const StoreStats stats, replica.Stats());
    results.systems[k].hit_rate = HitRate(stats);
  }

  // 3. Swaps: serve alone, at the same load.
  tiered.reset();
  redis.reset();
  for (int round = 0; round < p.rounds.repeats; ++round) {
    SwapRound r{.version = round + 1};
    std::atomic<bool> stop{false};
    OpenLoopResult run;
    std::thread loop([&] { run = fixed_load(*serve, 1e9, &stop); });
    absl::SleepFor(absl::Seconds(p.rounds.min_seconds));
    const Clock::time_point write_begin = Clock::now();
    absl::Status status = writer->WriteVersion(
        r.version, static_cast<uint64_t>(p.swap_fraction * p.rows));
    const Clock::time_point written = Clock::now();
    if (status.ok()) status = WaitForStep(*serve, r.version);
    const Clock::time_point seen = Clock::now();
    if (status.ok()) absl::SleepFor(absl::Seconds(p.swap_tail_s));
    stop.store(true);
    loop.join();
    PSDB_RETURN_IF_ERROR(status);
    r.write_s = SinceS(write_begin, written);
    r.swap_s = SinceS(write_begin, seen);
    const double from = SinceS(run.start, write_begin);
    const double to = SinceS(run.start, seen) + p.swap_tail_s;
    r.window_s = to - from;
    r.steady = Summarize(run.samples, 0, from);
    r.swap = Summarize(run.samples, from, to);
    r.after_write = Summarize(run.samples, SinceS(run.start, written), to);
    if (r.steady.requests == 0 || r.swap.requests == 0) {
      return absl::InternalError(
          "a swap round's window holds no lookup; raise --min_seconds or "
          "--swap_tail_s");
    }
    log << absl::StrFormat(
        "ps-bench serve: swap %d/%d to step %d: written in %.2f s, served "
        "%.2f s after the write began; p99 steady %.3f ms, swap window %.3f "
        "ms (after the write %.3f ms); failed %d of %d\n",
        round + 1, p.rounds.repeats, r.version, r.write_s, r.swap_s,
        r.steady.p99_s * 1e3, r.swap.p99_s * 1e3, r.after_write.p99_s * 1e3,
        r.swap.failed, r.swap.requests);
    results.swaps.push_back(r);
  }
  return results;
}

// ---- reporting -------------------------------------------------------------

std::vector<Ratio> Ratios(const Params& p, const Results& r) {
  const SystemResult& serve = r.systems[0];
  const SystemResult& tiered = r.systems[1];
  const SystemResult& redis = r.systems[2];
  std::vector<Ratio> ratios = {
      {.name = "serve_vs_redis_rows",
       .target = Target::AtLeast(2),
       .note = "peak rows/s, closed loop"},
      {.name = "serve_vs_redis_p99",
       .target = Target::AtMost(1),
       .note = "p99 at the fixed load"},
      {.name = "serve_tiered_vs_redis_rows",
       .target = Target::AtLeast(1),
       .note = "peak rows/s, closed loop"},
      {.name = "serve_tiered_vs_redis_p99", .note = "p99 at the fixed load"},
      {.name = "swap_p99_vs_steady",
       .target = Target::AtMost(1.5),
       .note = "serve: swap-window p99 / steady p99"},
      {.name = "swap_failed_requests",
       .target = Target::AtMost(0),
       .note = "a count per swap round, not a ratio"},
  };
  for (int round = 0; round < p.rounds.repeats; ++round) {
    ratios[0].rounds.push_back(serve.peak[round] / redis.peak[round]);
    ratios[1].rounds.push_back(serve.fixed[round].latency.p99_s /
                               redis.fixed[round].latency.p99_s);
    ratios[2].rounds.push_back(tiered.peak[round] / redis.peak[round]);
    ratios[3].rounds.push_back(tiered.fixed[round].latency.p99_s /
                               redis.fixed[round].latency.p99_s);
    ratios[4].rounds.push_back(r.swaps[round].swap.p99_s /
                               r.swaps[round].steady.p99_s);
    ratios[5].rounds.push_back(static_cast<double>(r.swaps[round].swap.failed));
  }
  return ratios;
}

void PrintReport(const Params& p, const MachineInfo& m, const Results& r,
                 const std::vector<Ratio>& ratios, std::ostream& out) {
  out << "ps-bench serve\n";
  out << absl::StrFormat("machine     %d cores, %s, %.2f GiB RAM\n", m.cores,
                         m.cpu_model, m.memory_bytes / double(1ull << 30));
  out << absl::StrFormat(
      "parameters  rows=%d dim=%d threads=%d batch_keys=%d batches=%d "
      "alpha=%g redis_chunk=%d seed=%d\n"
      "rounds      %d, systems alternating; each phase %g s\n"
      "checkpoint  written in %.2f s\n"
      "fixed load  %.0f rows/s offered to every system (%g of the slowest "
      "median peak), open loop\n\n",
      p.rows, p.dim, p.threads, p.batch_keys, p.batches, p.alpha, p.redis_chunk,
      p.seed, p.rounds.repeats, p.rounds.min_seconds, r.checkpoint_write_s,
      r.offered_rows_per_s, p.load_fraction);
  out << absl::StrFormat("%-40s %8s %12s | %12s %8s %8s %8s   %s\n", "system",
                         "up s", "peak rows/s", "rows/s", "p50 ms", "p99 ms",
                         "p999 ms", "hit rate");
  for (const SystemResult& s : r.systems) {
    out << absl::StrFormat(
        "%-40s %8.2f %12.0f | %12.0f %8.3f %8.3f %8.3f   %s\n", s.label,
        s.load_s, s.Peak(), s.FixedMedian(&RowsPerS), s.FixedMedian(&P50) * 1e3,
        s.FixedMedian(&P99) * 1e3, s.FixedMedian(&P999) * 1e3,
        std::isnan(s.hit_rate) ? "-" : absl::StrFormat("%.3f", s.hit_rate));
  }
  out << "(peak: closed loop; rows/s and latency: at the fixed load; medians "
         "over rounds)\n\nswaps of the full-memory replica, at the fixed "
         "load:\n";
  for (const SwapRound& s : r.swaps) {
    out << absl::StrFormat(
        "  step %d: written %.2f s, served after %.2f s; window %.2f s: p99 "
        "%.3f ms (after the write %.3f ms; steady %.3f ms), failed %d of "
        "%d\n",
        s.version, s.write_s, s.swap_s, s.window_s, s.swap.p99_s * 1e3,
        s.after_write.p99_s * 1e3, s.steady.p99_s * 1e3, s.swap.failed,
        s.swap.requests);
  }
  out << "\n";
  PrintRatios(ratios, out);
}

void PrintJson(const Params& p, const MachineInfo& m, const Results& r,
               const std::vector<Ratio>& ratios, std::ostream& out) {
  Json j = StartReportJson("serve", m);
  j["params"] = {{"rows", p.rows},
                 {"dim", p.dim},
                 {"threads", p.threads},
                 {"batch_keys", p.batch_keys},
                 {"batches_per_thread", p.batches},
                 {"alpha", p.alpha},
                 {"redis_chunk", p.redis_chunk},
                 {"tiered_fraction", p.tiered_fraction},
                 {"load_fraction", p.load_fraction},
                 {"swap_fraction", p.swap_fraction},
                 {"swap_tail_s", p.swap_tail_s},
                 {"repeats", p.rounds.repeats},
                 {"min_seconds", p.rounds.min_seconds},
                 {"seed", p.seed}};
  j["checkpoint_write_s"] = r.checkpoint_write_s;
  j["offered_rows_per_s"] = r.offered_rows_per_s;
  Json systems = Json::object();
  for (const SystemResult& s : r.systems) {
    Json one = {{"label", s.label}, {"load_s", s.load_s}};
    if (s.memory_budget_mb > 0) one["memory_budget_mb"] = s.memory_budget_mb;
    if (!std::isnan(s.hit_rate)) one["hit_rate"] = s.hit_rate;
    one["peak_rows_per_s"] = s.Peak();
    one["peak_rows_per_s_rounds"] = s.peak;
    uint64_t requests = 0, failed = 0;
    Json p99_ms_rounds = Json::array();
    for (const FixedLoad& f : s.fixed) {
      requests += f.latency.requests;
      failed += f.latency.failed;
      p99_ms_rounds.push_back(f.latency.p99_s * 1e3);
    }
    one["fixed_load"] = {{"rows_per_s", s.FixedMedian(&RowsPerS)},
                         {"p50_ms", s.FixedMedian(&P50) * 1e3},
                         {"p99_ms", s.FixedMedian(&P99) * 1e3},
                         {"p999_ms", s.FixedMedian(&P999) * 1e3},
                         {"requests", requests},
                         {"failed", failed},
                         {"p99_ms_rounds", std::move(p99_ms_rounds)}};
    systems[s.id] = std::move(one);
  }
  j["systems"] = std::move(systems);
  Json swaps = Json::array();
  for (const SwapRound& s : r.swaps) {
    swaps.push_back(Json{{"step", s.version},
                         {"write_s", s.write_s},
                         {"swap_s", s.swap_s},
                         {"window_s", s.window_s},
                         {"steady_p99_ms", s.steady.p99_s * 1e3},
                         {"steady_requests", s.steady.requests},
                         {"swap_p50_ms", s.swap.p50_s * 1e3},
                         {"swap_p99_ms", s.swap.p99_s * 1e3},
                         {"swap_max_ms", s.swap.max_s * 1e3},
                         {"after_write_p99_ms", s.after_write.p99_s * 1e3},
                         {"swap_requests", s.swap.requests},
                         {"swap_failed", s.swap.failed}});
  }
  j["swaps"] = std::move(swaps);
  AddRatiosJson(ratios, &j);
  WriteJson(j, out);
}

absl::Status Run(const Params& p, std::ostream& out, std::ostream& log) {
  return MeasureAndReport(p, "serve", out, log, &MeasureAll, &Ratios,
                          &PrintJson, &PrintReport);
}

}  // namespace

int RunServeBench(int argc, const char* const* argv, std::ostream& out,
                  std::ostream& err) {
  for (int i = 1; i < argc; ++i) {
    if (absl::string_view(argv[i]) == "--") break;
    if (absl::string_view(argv[i]) == "--freshness") {
      return RunFreshnessBench(argc, argv, out, err);
    }
  }
  return RunScenario<Params>(
      Flags(), argc, argv, out, err, &ParseParams,
      [&](Params& p) -> absl::Status {
        // Beside ps-bench unless --ps_server names it.
        if (p.ps_server.empty()) {
          PSDB_ASSIGN_OR_RETURN(p.ps_server, tools::SiblingBinary("ps-server"));
        }
        return Run(p, out, err);
      });
}

}  // namespace psdb::bench
