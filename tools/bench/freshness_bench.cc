#include "tools/bench/freshness_bench.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "manifest/manifest.h"
#include "tools/bench/json_writer.h"
#include "tools/bench/latency.h"
#include "tools/bench/machine.h"
#include "tools/bench/report.h"
#include "tools/bench/scenario.h"
#include "tools/bench/serve_checkpoints.h"
#include "tools/bench/server_systems.h"
#include "tools/bench/zipf.h"
#include "tools/common/args.h"
#include "tools/common/sibling_binary.h"
#include "util/status_macros.h"

namespace psdb::bench {
namespace {

using Clock = std::chrono::steady_clock;

constexpr char kUsage[] = R"(usage: ps-bench serve --freshness [--json] [flags]

How soon a serving replica (ps-server --serve_from) serves a checkpoint
that changes --delta_rows rows, by table size: for each size an in-process
Store writes a checkpoint of that many rows and a replica follows its root;
then in each round, at a fixed offered load, --delta_rows rows change and
are checkpointed. Per round: seconds from the checkpoint's manifest to the
replica serving it, the bytes the replica read for it, its peak RSS, p99 in
the swap window against a steady window, and failed lookups.

flags:
  --sizes=N,N,...     table sizes in rows (default 1000000,4000000,16000000)
  --delta_rows=N      rows each new checkpoint changes (default 10000)
  --dim=D             floats per row (default 16)
  --memory_budget_mb=M  the replica's --memory_budget_mb (default 256)
  --threads=T         client threads, one connection each (default 2)
  --batch_keys=N      keys per lookup (default 64)
  --load_rps=R        lookups per second offered, open loop (default 400)
  --alpha=A           Zipf exponent of the lookups (default 1.05)
  --steady_s=S        the steady window before each change (default 2)
  --repeats=R         rounds per size (default 3)
  --seed=S            key and row seed (default 1)
  --ps_server=PATH    ps-server binary (default: next to ps-bench)
  --dir=PATH          scratch directory (default: fresh under $TMPDIR or
                      /tmp)
  --json              print one JSON object instead of the report
)";

struct Params {
  std::vector<uint64_t> sizes = {1000000, 4000000, 16000000};
  uint64_t delta_rows = 10000;
  int dim = 16;
  uint64_t memory_budget_mb = 256;
  int threads = 2;
  uint64_t batch_keys = 64;
  double load_rps = 400;
  double alpha = 1.05;
  double steady_s = 2;
  int repeats = 3;
  uint64_t seed = 1;
  std::string ps_server;
  std::string dir;
  bool json = false;
};

ScenarioFlags Flags() {
  return {"serve --freshness",
          kUsage,
          {"freshness", "sizes", "delta_rows", "dim", "memory_budget_mb",
           "threads", "batch_keys", "load_rps", "alpha", "steady_s", "repeats",
           "seed", "ps_server", "dir"},
          {"freshness"}};
}

absl::StatusOr<Params> ParseParams(const tools::Args& args) {
  Params p;
  const std::string sizes = args.GetString("sizes", "");
  if (!sizes.empty()) {
    p.sizes.clear();
    for (absl::string_view s : absl::StrSplit(sizes, ',')) {
      uint64_t n = 0;
      if (!absl::SimpleAtoi(s, &n) || n < 1 || n > (uint64_t{1} << 32)) {
        return absl::InvalidArgumentError(
            absl::StrCat("--sizes: '", s, "' is not a row count"));
      }
      p.sizes.push_back(n);
    }
  }
  PSDB_ASSIGN_OR_RETURN(p.delta_rows,
                        args.GetInt("delta_rows", p.delta_rows, 1, 1 << 26));
  for (uint64_t n : p.sizes) {
    if (p.delta_rows > n) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--delta_rows=", p.delta_rows, " is more than a size (", n, ")"));
    }
  }
  PSDB_ASSIGN_OR_RETURN(int64_t dim, args.GetInt("dim", p.dim, 1, 1024));
  p.dim = static_cast<int>(dim);
  PSDB_ASSIGN_OR_RETURN(
      p.memory_budget_mb,
      args.GetInt("memory_budget_mb", p.memory_budget_mb, 16, 1 << 20));
  PSDB_ASSIGN_OR_RETURN(int64_t threads,
                        args.GetInt("threads", p.threads, 1, 64));
  p.threads = static_cast<int>(threads);
  PSDB_ASSIGN_OR_RETURN(p.batch_keys,
                        args.GetInt("batch_keys", p.batch_keys, 1, 65536));
  PSDB_ASSIGN_OR_RETURN(p.load_rps,
                        args.GetDouble("load_rps", p.load_rps, 1, 1e6));
  PSDB_ASSIGN_OR_RETURN(p.alpha, args.GetDouble("alpha", p.alpha, 0.01, 10));
  PSDB_ASSIGN_OR_RETURN(p.steady_s,
                        args.GetDouble("steady_s", p.steady_s, 0.5, 600));
  PSDB_ASSIGN_OR_RETURN(int64_t repeats,
                        args.GetInt("repeats", p.repeats, 1, 100));
  p.repeats = static_cast<int>(repeats);
  PSDB_ASSIGN_OR_RETURN(int64_t seed, args.GetInt("seed", 1, 0, INT64_MAX));
  p.seed = static_cast<uint64_t>(seed);
  p.ps_server = args.GetString("ps_server", "");
  p.dir = args.GetString("dir", "");
  PSDB_ASSIGN_OR_RETURN(p.json, args.GetBool("json"));
  return p;
}

double SinceS(Clock::time_point from, Clock::time_point to) {
  return std::chrono::duration<double>(to - from).count();
}

struct Round {
  int64_t step = 0;
  double write_s = 0;  // the change and its checkpoint
  double serve_s = 0;  // checkpoint written -> replica reports the step
  double bytes_read = NAN;
  bool delta = false;
  double peak_rss_bytes = 0;
  LatencySummary steady;
  // From the checkpoint written (its manifest in place) until 0.5 s after
  // the replica served it: what the swap costs the requests. The bench's
  // own write of the change, on the same cores (production training is
  // not), comes before it; `with_write` includes it.
  LatencySummary swap;
  LatencySummary with_write;
};

struct SizeResult {
  uint64_t rows = 0;
  double write_all_s = 0;  // the base checkpoint
  double up_s = 0;         // the replica's start (verifying the base whole)
  std::vector<Round> rounds;

  Series Get(const char* id, double (*f)(const Round&)) const {
    Series s{.id = id};
    for (const Round& r : rounds) s.rounds.push_back(f(r));
    return s;
  }
};

struct Results {
  std::vector<SizeResult> sizes;
  double bound_bytes = 0;  // budget + 2 x delta + 100 MiB
};

// The figures the replica logged for the swap to `checkpoint_id`
// ("serving checkpoint <dir>/<id> (...) after ...: ... B bytes read[, N
// rows over its base]"); NotFound until it logged it.
absl::Status ReadSwapLog(const std::string& log, const std::string& id,
                         Round* round) {
  std::ifstream in(log);
  std::string line;
  while (std::getline(in, line)) {
    if (line.find("serving checkpoint ") == std::string::npos ||
        line.find(absl::StrCat("/", id, " ")) == std::string::npos) {
      continue;
    }
    const size_t read = line.find(" bytes read");
    const size_t start = line.rfind(' ', read - 1);
    double bytes = 0;
    if (read == std::string::npos || start == std::string::npos ||
        !absl::SimpleAtod(line.substr(start + 1, read - start - 1), &bytes)) {
      return absl::InternalError(absl::StrCat("unparsable swap line: ", line));
    }
    round->bytes_read = bytes;
    round->delta = line.find("over its base") != std::string::npos;
    return absl::OkStatus();
  }
  return absl::NotFoundError(absl::StrCat("no swap to ", id, " in ", log));
}

absl::StatusOr<int64_t> ServedStep(ServingReplica& replica) {
  PSDB_ASSIGN_OR_RETURN(const StoreStats stats, replica.Stats());
  for (const TableStats& t : stats.tables) {
    if (t.name == "emb") return t.step;
  }
  return absl::NotFoundError("the replica serves no table emb");
}

absl::StatusOr<SizeResult> MeasureSize(const Params& p, uint64_t rows,
                                       const std::string& dir,
                                       std::ostream& log) {
  SizeResult result{.rows = rows};
  const ServerSystemOptions options{.rows = rows,
                                    .dim = p.dim,
                                    .threads = p.threads,
                                    .batch_keys = p.batch_keys,
                                    .seed = p.seed,
                                    .ps_server = p.ps_server,
                                    .dir = dir};
  const std::string root = dir + "/ckpt";
  PSDB_ASSIGN_OR_RETURN(std::unique_ptr<CheckpointWriter> writer,
                        CheckpointWriter::Open(options, dir + "/train", root));
  auto t0 = Clock::now();
  PSDB_RETURN_IF_ERROR(writer->WriteAll(/*settle=*/true));
  result.write_all_s = SinceS(t0, Clock::now());
  const std::string replica_log = dir + "/replica.log";
  PSDB_ASSIGN_OR_RETURN(
      std::unique_ptr<ServingReplica> replica,
      OpenServingReplica(options, {.id = "serve",
                                   .label = "psdb replica",
                                   .root = root,
                                   .memory_budget_mb = p.memory_budget_mb,
                                   .log = replica_log}));
  result.up_s = replica->load_s();
  log << absl::StrFormat(
      "ps-bench serve --freshness: %d rows: base checkpoint in %.2f s, "
      "replica up in %.2f s\n",
      rows, result.write_all_s, result.up_s);
  const uint64_t batches = 256;
  const std::vector<uint64_t> stream =
      ZipfKeyStream(rows, p.alpha, p.threads * batches, p.batch_keys, p.seed);
  auto lookup = [&](int t, uint64_t i) {
    return replica->Pull(
        t, absl::MakeConstSpan(stream).subspan(
               (t * batches + i % batches) * p.batch_keys, p.batch_keys));
  };
  for (int round = 0; round < p.repeats; ++round) {
    Round r{.step = round + 1};
    std::atomic<bool> stop{false};
    OpenLoopResult run;
    std::thread loop(
        [&] { run = RunOpenLoop(p.threads, p.load_rps, 1e9, &stop, lookup); });
    absl::SleepFor(absl::Seconds(p.steady_s));
    // The replica's RSS, sampled until the swap is done and a little after.
    std::atomic<bool> sampling{true};
    std::atomic<uint64_t> peak_rss{0};
    std::thread sampler([&] {
      while (sampling.load()) {
        absl::StatusOr<ProcessMemory> m = replica->ServerMemory();
        if (m.ok() && m->rss_bytes > peak_rss.load()) {
          peak_rss.store(m->rss_bytes);
        }
        absl::SleepFor(absl::Milliseconds(5));
      }
    });
    const Clock::time_point write_begin = Clock::now();
    absl::Status status = writer->WriteVersion(r.step, p.delta_rows);
    const Clock::time_point written = Clock::now();
    Clock::time_point seen = written;
    const absl::Time deadline = absl::Now() + absl::Minutes(10);
    while (status.ok()) {
      absl::StatusOr<int64_t> step = ServedStep(*replica);
      seen = Clock::now();
      if (!step.ok()) status = step.status();
      if (!status.ok() || *step >= r.step) break;
      if (absl::Now() > deadline) {
        status = absl::DeadlineExceededError(
            absl::StrCat("the replica did not serve step ", r.step));
      }
      absl::SleepFor(absl::Milliseconds(2));
    }
    absl::SleepFor(absl::Milliseconds(500));
    sampling.store(false);
    sampler.join();
    stop.store(true);
    loop.join();
    PSDB_RETURN_IF_ERROR(status);
    r.write_s = SinceS(write_begin, written);
    r.serve_s = SinceS(written, seen);
    r.peak_rss_bytes = static_cast<double>(peak_rss.load());
    const double from = SinceS(run.start, write_begin);
    r.steady = Summarize(run.samples, 0, from);
    const double to = SinceS(run.start, seen) + 0.5;
    r.swap = Summarize(run.samples, SinceS(run.start, written), to);
    r.with_write = Summarize(run.samples, from, to);
    // The id the writer gave this checkpoint: the newest under the root.
    PSDB_ASSIGN_OR_RETURN(CheckpointRef newest, LatestCheckpoint(root));
    PSDB_RETURN_IF_ERROR(ReadSwapLog(replica_log, newest.id, &r));
    log << absl::StrFormat(
        "ps-bench serve --freshness: %d rows, round %d/%d: change written "
        "in %.3f s, served %.3f s later (%s, %.0f bytes read), peak RSS "
        "%.1f MiB, p99 steady %.3f ms swap %.3f ms (with the write %.3f "
        "ms), failed %d\n",
        rows, round + 1, p.repeats, r.write_s, r.serve_s,
        r.delta ? "laid over its base" : "opened whole", r.bytes_read,
        r.peak_rss_bytes / (1 << 20), r.steady.p99_s * 1e3, r.swap.p99_s * 1e3,
        r.with_write.p99_s * 1e3, r.with_write.failed);
    result.rounds.push_back(r);
  }
  return result;
}

absl::StatusOr<Results> MeasureAll(const Params& p, const std::string& dir,
                                   std::ostream& log) {
  Results results;
  results.bound_bytes =
      static_cast<double>(p.memory_budget_mb << 20) +
      2.0 * static_cast<double>(p.delta_rows * RowMemoryBytes(p.dim)) +
      static_cast<double>(100 << 20);
  for (uint64_t rows : p.sizes) {
    const std::string sub = absl::StrCat(dir, "/rows-", rows);
    std::filesystem::create_directories(sub);
    PSDB_ASSIGN_OR_RETURN(SizeResult r, MeasureSize(p, rows, sub, log));
    results.sizes.push_back(std::move(r));
    // The next size needs the disk; the replica's log stays.
    std::filesystem::rename(sub + "/replica.log",
                            absl::StrCat(dir, "/replica-", rows, ".log"));
    std::filesystem::remove_all(sub);
  }
  return results;
}

double ServeS(const Round& r) { return r.serve_s; }
double BytesRead(const Round& r) { return r.bytes_read; }
double PeakRss(const Round& r) { return r.peak_rss_bytes; }
double SwapP99(const Round& r) { return r.swap.p99_s; }
double SteadyP99(const Round& r) { return r.steady.p99_s; }

std::vector<Ratio> Ratios(const Params& p, const Results& r) {
  const SizeResult& small = r.sizes.front();
  const SizeResult& large = r.sizes.back();
  std::vector<Ratio> ratios = {
      {.name = "serve_s_largest",
       .target = Target::AtMost(0.5),
       .note =
           absl::StrCat("seconds to serve the change, ", large.rows, " rows")},
      {.name = "serve_s_largest_vs_smallest",
       .target = Target::AtMost(1.2),
       .note = absl::StrCat(large.rows, " rows / ", small.rows)},
      {.name = "bytes_read_largest_vs_smallest",
       .target = Target::AtMost(1.2),
       .note = "bytes the replica read for the swap"},
      {.name = "peak_rss_vs_bound",
       .target = Target::AtMost(1),
       .note = "largest size: / (budget + 2 x delta + 100 MiB)"},
      {.name = "swap_p99_vs_steady",
       .target = Target::AtMost(1.5),
       .note = "largest size"},
      {.name = "swap_failed_requests",
       .target = Target::AtMost(0),
       .note = "a count per round, every size"},
  };
  for (int i = 0; i < p.repeats; ++i) {
    const Round& s = small.rounds[i];
    const Round& l = large.rounds[i];
    ratios[0].rounds.push_back(l.serve_s);
    ratios[1].rounds.push_back(l.serve_s / s.serve_s);
    ratios[2].rounds.push_back(l.bytes_read / s.bytes_read);
    ratios[3].rounds.push_back(l.peak_rss_bytes / r.bound_bytes);
    ratios[4].rounds.push_back(l.swap.p99_s / l.steady.p99_s);
    uint64_t failed = 0;
    for (const SizeResult& size : r.sizes) {
      failed += size.rounds[i].with_write.failed;
    }
    ratios[5].rounds.push_back(static_cast<double>(failed));
  }
  return ratios;
}

void PrintReport(const Params& p, const MachineInfo& m, const Results& r,
                 const std::vector<Ratio>& ratios, std::ostream& out) {
  out << "ps-bench serve --freshness\n";
  out << absl::StrFormat("machine     %d cores, %s, %.2f GiB RAM\n", m.cores,
                         m.cpu_model, m.memory_bytes / double(1ull << 30));
  out << absl::StrFormat(
      "parameters  delta_rows=%d dim=%d memory_budget_mb=%d threads=%d "
      "batch_keys=%d load_rps=%g alpha=%g repeats=%d seed=%d\n\n",
      p.delta_rows, p.dim, p.memory_budget_mb, p.threads, p.batch_keys,
      p.load_rps, p.alpha, p.repeats, p.seed);
  out << absl::StrFormat("%12s %9s %9s | %9s %12s %6s %10s %9s %9s\n", "rows",
                         "base s", "up s", "serve s", "bytes read", "delta",
                         "peak MiB", "p99 ms", "steady ms");
  for (const SizeResult& s : r.sizes) {
    int deltas = 0;
    for (const Round& round : s.rounds) deltas += round.delta ? 1 : 0;
    out << absl::StrFormat(
        "%12d %9.2f %9.2f | %9.3f %12.0f %3d/%-2d %10.1f %9.3f %9.3f\n", s.rows,
        s.write_all_s, s.up_s, s.Get("", &ServeS).Median(),
        s.Get("", &BytesRead).Median(), deltas, s.rounds.size(),
        s.Get("", &PeakRss).Median() / (1 << 20),
        s.Get("", &SwapP99).Median() * 1e3,
        s.Get("", &SteadyP99).Median() * 1e3);
  }
  out << "(medians over rounds; delta: rounds laid over the replica's "
         "base)\n\n";
  PrintRatios(ratios, out);
}

void PrintJson(const Params& p, const MachineInfo& m, const Results& r,
               const std::vector<Ratio>& ratios, std::ostream& out) {
  Json j = StartReportJson("serve_freshness", m);
  j["params"] = {
      {"sizes", p.sizes},       {"delta_rows", p.delta_rows},
      {"dim", p.dim},           {"memory_budget_mb", p.memory_budget_mb},
      {"threads", p.threads},   {"batch_keys", p.batch_keys},
      {"load_rps", p.load_rps}, {"alpha", p.alpha},
      {"steady_s", p.steady_s}, {"repeats", p.repeats},
      {"seed", p.seed}};
  j["rss_bound_bytes"] = r.bound_bytes;
  Json sizes = Json::array();
  for (const SizeResult& s : r.sizes) {
    Json rounds = Json::array();
    for (const Round& x : s.rounds) {
      rounds.push_back(Json{{"step", x.step},
                            {"write_s", x.write_s},
                            {"serve_s", x.serve_s},
                            {"bytes_read", x.bytes_read},
                            {"delta", x.delta},
                            {"peak_rss_bytes", x.peak_rss_bytes},
                            {"steady_p99_ms", x.steady.p99_s * 1e3},
                            {"swap_p99_ms", x.swap.p99_s * 1e3},
                            {"with_write_p99_ms", x.with_write.p99_s * 1e3},
                            {"swap_requests", x.swap.requests},
                            {"swap_failed", x.with_write.failed}});
    }
    sizes.push_back(
        Json{{"rows", s.rows},
             {"base_write_s", s.write_all_s},
             {"replica_up_s", s.up_s},
             {"serve_s", SeriesJson(s.Get("serve_s", &ServeS))},
             {"bytes_read", SeriesJson(s.Get("bytes_read", &BytesRead))},
             {"peak_rss_bytes", SeriesJson(s.Get("peak_rss_bytes", &PeakRss))},
             {"rounds", std::move(rounds)}});
  }
  j["sizes"] = std::move(sizes);
  AddRatiosJson(ratios, &j);
  WriteJson(j, out);
}

}  // namespace

int RunFreshnessBench(int argc, const char* const* argv, std::ostream& out,
                      std::ostream& err) {
  return RunScenario<Params>(
      Flags(), argc, argv, out, err, &ParseParams,
      [&](Params& p) -> absl::Status {
        if (p.ps_server.empty()) {
          PSDB_ASSIGN_OR_RETURN(p.ps_server, tools::SiblingBinary("ps-server"));
        }
        return MeasureAndReport(p, "serve_freshness", out, err, &MeasureAll,
                                &Ratios, &PrintJson, &PrintReport);
      });
}

}  // namespace psdb::bench
