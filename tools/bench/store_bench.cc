#include "tools/bench/store_bench.h"

#include <malloc.h>
#include <stdlib.h>
#include <time.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "optim/optimizer.h"
#include "psdb/row.h"
#include "psdb/store.h"
#include "psdb/table_spec.h"
#include "tools/bench/bench_dir.h"
#include "tools/bench/json_writer.h"
#include "tools/bench/machine.h"
#include "tools/bench/process_cpu.h"
#include "tools/bench/process_memory.h"
#include "tools/bench/report.h"
#include "tools/bench/scenario.h"
#include "tools/bench/store_systems.h"
#include "tools/bench/zipf.h"
#include "tools/common/args.h"
#include "util/status_macros.h"

namespace psdb::bench {
namespace {

constexpr char kUsage[] = R"(usage: ps-bench store [--json] [flags]

Pulls and pushes (--optimizer) on one Zipf stream, measured in one run on:
psdb with a budget holding the whole table, psdb with a budget of a fraction
of it, RocksDB used directly within that same memory (memtables, blocks,
index and filters charged to one cache of the budget, as psdb's are), RocksDB
with a block cache of the budget and its memtables outside it, a flat hash
map over one row array (the memory limit), and psdb with the whole-table
budget and its write-ahead log on (durability wal: every push is written to
the log before it returns); then a full vs incremental checkpoint of psdb.
Each round runs every system in turn; ratios are the median over rounds.

flags:
  --rows=N              table rows, all created before measuring (default 4194304)
  --dim=D               floats per row (default 64)
  --optimizer=NAME      the table's optimizer: sgd, adagrad, adam, ... (default
                        adagrad; learning rate 0.05)
  --repeats=N           rounds, the systems alternating within each; each
                        ratio is the median over rounds (default 3)
  --batches=N           measured batches (default 1024)
  --warmup_batches=N    warm-up batches: the stream's prefix (default
                        batches/4, at least 1, at most 256)
  --batch_keys=N        keys per batch (default 4096)
  --alpha=A             Zipf exponent (default 1.05)
  --budget_fraction=F   tiered budget / table bytes (default 0.1)
  --touch_fraction=F    rows updated between the full and the incremental
                        checkpoint (default 0.01)
  --psdb_block_cache_mb=M  psdb's RocksDB share of its memory budget
                        (StoreOptions::rocksdb_block_cache_bytes; default 0:
                        derived from the budget)
  --psdb_mmap_reads=0|1 psdb reads SST files through mmap
                        (StoreOptions::rocksdb_mmap_reads; default 0)
  --rss_base_mb=B       the fixed base of the peak-RSS target: the process's
                        peak RSS while psdb runs <= 1.5 x budget + B (default
                        100, docs/operations/memory.md; it includes this benchmark's
                        own key stream)
  --psdb_background_eviction=0|1  psdb's background evictor
                        (StoreOptions::background_eviction; default 1)
  --seed=S              stream, gradient and initializer seed (default 1)
  --dir=PATH            scratch directory (default: a fresh one under
                        $TMPDIR or /tmp, removed at the end)
  --systems=A,B,..      measure only these of psdb_mem, psdb_tiered,
                        rocksdb, rocksdb_cache, hashmap, psdb_wal (for
                        profiling; ratios that need a skipped system are
                        null) (default all)
  --json                print one JSON object instead of the report
)";

// The systems, in the order each round runs them.
constexpr const char* kSystems[] = {"psdb_mem",      "psdb_tiered", "rocksdb",
                                    "rocksdb_cache", "hashmap",     "psdb_wal"};
enum SystemIndex { kMem, kTiered, kRocks, kRocksCache, kLimit, kWal };

struct Params {
  uint64_t rows = 4194304;
  int dim = 64;
  optim::OptimizerKind optimizer = optim::OptimizerKind::kAdagrad;
  int repeats = 3;
  uint64_t batches = 1024;
  uint64_t warmup_batches = 0;
  uint64_t batch_keys = 4096;
  double alpha = 1.05;
  double budget_fraction = 0.1;
  double touch_fraction = 0.01;
  uint64_t seed = 1;
  uint64_t psdb_block_cache_mb = 0;
  bool psdb_background_eviction = true;
  bool psdb_mmap_reads = false;
  uint64_t rss_base_mb = 100;
  std::string dir;
  bool json = false;
  std::vector<std::string> systems = {std::begin(kSystems), std::end(kSystems)};
  bool Runs(absl::string_view id) const {
    return std::find(systems.begin(), systems.end(), id) != systems.end();
  }
};

ScenarioFlags Flags() {
  return {"store",
          kUsage,
          {"rows", "dim", "optimizer", "repeats", "batches", "warmup_batches",
           "batch_keys", "alpha", "budget_fraction", "touch_fraction", "seed",
           "dir", "systems", "psdb_block_cache_mb", "psdb_background_eviction",
           "psdb_mmap_reads", "rss_base_mb"}};
}

absl::StatusOr<Params> ParseParams(const tools::Args& args) {
  Params p;
  PSDB_ASSIGN_OR_RETURN(p.rows, args.GetInt("rows", p.rows, 1, 1ll << 32));
  PSDB_ASSIGN_OR_RETURN(p.dim, args.GetInt("dim", p.dim, 1, 65536));
  PSDB_ASSIGN_OR_RETURN(
      p.optimizer, optim::ParseKind(args.GetString("optimizer", "adagrad")));
  PSDB_ASSIGN_OR_RETURN(p.repeats, args.GetInt("repeats", p.repeats, 1, 50));
  PSDB_ASSIGN_OR_RETURN(p.batches,
                        args.GetInt("batches", p.batches, 1, 1ll << 24));
  const int64_t warmup_default =
      std::clamp<int64_t>(static_cast<int64_t>(p.batches / 4), 1, 256);
  PSDB_ASSIGN_OR_RETURN(
      p.warmup_batches,
      args.GetInt("warmup_batches", warmup_default, 0, 1ll << 24));
  PSDB_ASSIGN_OR_RETURN(p.batch_keys,
                        args.GetInt("batch_keys", p.batch_keys, 1, 1 << 20));
  PSDB_ASSIGN_OR_RETURN(p.alpha, args.GetDouble("alpha", p.alpha, 0.01, 10));
  PSDB_ASSIGN_OR_RETURN(
      p.budget_fraction,
      args.GetDouble("budget_fraction", p.budget_fraction, 1e-6, 1));
  PSDB_ASSIGN_OR_RETURN(
      p.touch_fraction,
      args.GetDouble("touch_fraction", p.touch_fraction, 1e-9, 1));
  PSDB_ASSIGN_OR_RETURN(p.seed, args.GetInt("seed", p.seed, 0, INT64_MAX));
  PSDB_ASSIGN_OR_RETURN(
      p.psdb_block_cache_mb,
      args.GetInt("psdb_block_cache_mb", p.psdb_block_cache_mb, 0, 1 << 20));
  PSDB_ASSIGN_OR_RETURN(const int64_t mmap_reads,
                        args.GetInt("psdb_mmap_reads", 0, 0, 1));
  p.psdb_mmap_reads = mmap_reads == 1;
  PSDB_ASSIGN_OR_RETURN(p.rss_base_mb,
                        args.GetInt("rss_base_mb", p.rss_base_mb, 0, 1 << 20));
  PSDB_ASSIGN_OR_RETURN(const int64_t background,
                        args.GetInt("psdb_background_eviction", 1, 0, 1));
  p.psdb_background_eviction = background == 1;
  p.dir = args.GetString("dir", "");
  PSDB_ASSIGN_OR_RETURN(p.json, args.GetBool("json"));
  PSDB_ASSIGN_OR_RETURN(p.systems, args.GetChoiceList("systems", p.systems));
  return p;
}

using Clock = std::chrono::steady_clock;
double Seconds(Clock::duration d) {
  return std::chrono::duration<double>(d).count();
}

// CPU seconds used by this whole process (every thread, including
// RocksDB's background flushes and compactions). On a shared machine wall
// time includes waiting for a core; CPU time does not.
double SelfCpuSeconds() { return ProcessCpuSeconds().value_or(0); }

struct SystemResult {
  std::string id;
  std::string label;
  double load_s = 0;
  double pull_s = 0;
  double push_s = 0;
  double pull_cpu_s = 0;  // process CPU seconds while pulling
  double push_cpu_s = 0;
  uint64_t keys = 0;       // keys pulled (= keys pushed) while measuring
  double hit_rate = -1;    // psdb: memory-tier hits / lookups while measuring
  uint64_t evictions = 0;  // psdb: rows evicted while measuring
  uint64_t background_evictions = 0;  // psdb: of those, by the evictor
  // psdb: this process's RSS when the system was opened, and its peak
  // (VmHWM) from then until it closed; 0 if not measured.
  uint64_t start_rss_bytes = 0;
  uint64_t peak_rss_bytes = 0;
  // keys/s; a zero time (impossible in practice) counts as 1 ns.
  // NaN if the system was not run.
  double PullRate() const {
    return keys == 0 ? NAN : keys / std::max(pull_s, 1e-9);
  }
  double PushRate() const {
    return keys == 0 ? NAN : keys / std::max(push_s, 1e-9);
  }
  // Keys per process CPU second.
  double PullCpuRate() const {
    return keys == 0 ? NAN : keys / std::max(pull_cpu_s, 1e-9);
  }
  double PushCpuRate() const {
    return keys == 0 ? NAN : keys / std::max(push_cpu_s, 1e-9);
  }
};

struct CheckpointResult {
  bool ran = false;
  double full_s = 0;
  uint64_t full_rows = 0;
  double incremental_s = 0;
  uint64_t incremental_rows = 0;
  uint64_t touched = 0;
};

class Runner {
 public:
  Runner(const Params& p, std::ostream& log) : p_(p), log_(log) {
    stream_ = ZipfKeyStream(p.rows, p.alpha, p.warmup_batches + p.batches,
                            p.batch_keys, p.seed);
    SplitMix rng(p.seed ^ 0x6a09e667f3bcc908ULL);
    grads_.resize(p.batch_keys * p.dim);
    for (float& g : grads_)
      g = static_cast<float>(rng.NextDouble() * 0.2 - 0.1);
    out_.resize(p.batch_keys * p.dim);
  }

  // Creates every row (pulls of all keys, in batches).
  absl::Status Load(KvSystem& sys, SystemResult* r) {
    log_ << "  " << r->id << ": creating " << p_.rows << " rows\n";
    const auto t0 = Clock::now();
    std::vector<uint64_t> keys;
    for (uint64_t start = 0; start < p_.rows; start += p_.batch_keys) {
      const uint64_t end = std::min(p_.rows, start + p_.batch_keys);
      keys.clear();
      for (uint64_t rank = start; rank < end; ++rank) {
        keys.push_back(ScrambleKey(rank, p_.seed));
      }
      PSDB_RETURN_IF_ERROR(
          sys.Pull(keys, absl::MakeSpan(out_.data(), keys.size() * p_.dim)));
    }
    r->load_s = Seconds(Clock::now() - t0);
    return absl::OkStatus();
  }

  absl::Status WarmUp(KvSystem& sys, SystemResult* r) {
    log_ << "  " << r->id << ": warm-up, " << p_.warmup_batches << " batches\n";
    for (uint64_t b = 0; b < p_.warmup_batches; ++b) {
      PSDB_RETURN_IF_ERROR(sys.Pull(Batch(b), absl::MakeSpan(out_)));
      PSDB_RETURN_IF_ERROR(sys.Push(Batch(b), grads_));
    }
    return absl::OkStatus();
  }

  absl::Status Measure(KvSystem& sys, SystemResult* r) {
    log_ << "  " << r->id << ": measuring, " << p_.batches << " batches\n";
    Clock::duration pull{}, push{};
    double pull_cpu = 0, push_cpu = 0;
    for (uint64_t b = p_.warmup_batches; b < p_.warmup_batches + p_.batches;
         ++b) {
      const double c0 = SelfCpuSeconds();
      const auto t0 = Clock::now();
      PSDB_RETURN_IF_ERROR(sys.Pull(Batch(b), absl::MakeSpan(out_)));
      const auto t1 = Clock::now();
      const double c1 = SelfCpuSeconds();
      PSDB_RETURN_IF_ERROR(sys.Push(Batch(b), grads_));
      push += Clock::now() - t1;
      push_cpu += SelfCpuSeconds() - c1;
      pull += t1 - t0;
      pull_cpu += c1 - c0;
    }
    r->pull_s = Seconds(pull);
    r->push_s = Seconds(push);
    r->pull_cpu_s = pull_cpu;
    r->push_cpu_s = push_cpu;
    r->keys = p_.batches * p_.batch_keys;
    return absl::OkStatus();
  }

  // The touched rows: touch_fraction of the table, spread over the ranks.
  absl::Status Touch(KvSystem& sys, uint64_t* touched) {
    const uint64_t n = std::max<uint64_t>(
        1, static_cast<uint64_t>(std::llround(p_.rows * p_.touch_fraction)));
    const uint64_t stride = std::max<uint64_t>(1, p_.rows / n);
    std::vector<uint64_t> keys;
    for (uint64_t i = 0; i < n; i += p_.batch_keys) {
      keys.clear();
      for (uint64_t j = i; j < std::min(n, i + p_.batch_keys); ++j) {
        keys.push_back(ScrambleKey(j * stride % p_.rows, p_.seed));
      }
      PSDB_RETURN_IF_ERROR(sys.Push(
          keys, absl::MakeConstSpan(grads_.data(), keys.size() * p_.dim)));
    }
    *touched = n;
    return absl::OkStatus();
  }

 private:
  absl::Span<const uint64_t> Batch(uint64_t b) const {
    return absl::MakeConstSpan(stream_.data() + b * p_.batch_keys,
                               p_.batch_keys);
  }

  const Params& p_;
  std::ostream& log_;
  std::vector<uint64_t> stream_;
  std::vector<float> grads_;
  std::vector<float> out_;
};

// Memory-tier hits/misses/evictions of the bench table.
TableStats TableStatsOf(PsdbSystem& sys) {
  for (const TableStats& t : sys.store()->Stats().tables) {
    if (t.name == sys.table()) return t;
  }
  return TableStats{};
}

// Starts a peak-RSS measurement: what earlier systems freed goes back to the
// OS first (malloc_trim), then VmHWM restarts from VmRSS. Returns VmRSS.
absl::StatusOr<uint64_t> StartPeakRss() {
  malloc_trim(0);
  PSDB_RETURN_IF_ERROR(ResetPeakRss());
  PSDB_ASSIGN_OR_RETURN(const ProcessMemory m, ReadProcessMemory());
  return m.rss_bytes;
}

// The peak RSS since StartPeakRss.
absl::Status EndPeakRss(SystemResult* r) {
  PSDB_ASSIGN_OR_RETURN(const ProcessMemory m, ReadProcessMemory());
  r->peak_rss_bytes = m.peak_rss_bytes;
  return absl::OkStatus();
}

absl::Status RunPsdb(Runner& runner, const std::string& dir,
                     const TableSpec& spec, const StoreOptions& options,
                     SystemResult* r, CheckpointResult* ckpt) {
  PSDB_ASSIGN_OR_RETURN(r->start_rss_bytes, StartPeakRss());
  PSDB_ASSIGN_OR_RETURN(auto sys, PsdbSystem::Open(dir + "/db", spec, options));
  PSDB_RETURN_IF_ERROR(runner.Load(*sys, r));
  PSDB_RETURN_IF_ERROR(sys->Settle(/*timeout_s=*/600));
  PSDB_RETURN_IF_ERROR(runner.WarmUp(*sys, r));
  const TableStats before = TableStatsOf(*sys);
  PSDB_RETURN_IF_ERROR(runner.Measure(*sys, r));
  const TableStats after = TableStatsOf(*sys);
  const uint64_t hits = after.hits - before.hits;
  const uint64_t lookups = hits + (after.misses - before.misses);
  r->hit_rate = lookups > 0 ? static_cast<double>(hits) / lookups : -1;
  r->evictions = after.evictions - before.evictions;
  r->background_evictions =
      after.background_evictions - before.background_evictions;
  PSDB_RETURN_IF_ERROR(EndPeakRss(r));
  if (ckpt == nullptr) return absl::OkStatus();

  const std::string root = dir + "/checkpoints";
  auto t0 = Clock::now();
  PSDB_ASSIGN_OR_RETURN(CheckpointInfo full, sys->store()->Checkpoint(root));
  ckpt->full_s = Seconds(Clock::now() - t0);
  ckpt->full_rows = full.rows_flushed;
  PSDB_RETURN_IF_ERROR(runner.Touch(*sys, &ckpt->touched));
  t0 = Clock::now();
  PSDB_ASSIGN_OR_RETURN(CheckpointInfo incr, sys->store()->Checkpoint(root));
  ckpt->incremental_s = Seconds(Clock::now() - t0);
  ckpt->incremental_rows = incr.rows_flushed;
  ckpt->ran = true;
  return absl::OkStatus();
}

absl::Status RunRocks(Runner& runner, const std::string& dir,
                      const TableSpec& spec, const RocksDbMemory& memory,
                      SystemResult* r) {
  PSDB_ASSIGN_OR_RETURN(r->start_rss_bytes, StartPeakRss());
  PSDB_ASSIGN_OR_RETURN(auto sys, RocksDbSystem::Open(dir, spec, memory));
  PSDB_RETURN_IF_ERROR(runner.Load(*sys, r));
  PSDB_RETURN_IF_ERROR(sys->Settle(/*timeout_s=*/600));
  PSDB_RETURN_IF_ERROR(runner.WarmUp(*sys, r));
  PSDB_RETURN_IF_ERROR(runner.Measure(*sys, r));
  return EndPeakRss(r);
}

// The cpu-time value of each ratio (keys per process CPU second instead of
// per wall second), in the order of the ratios; NaN where it has none.
using CpuRatios = std::vector<double>;

// The peak-RSS target's bound for a psdb budget (docs/operations/memory.md).
uint64_t RssBound(const Params& p, uint64_t budget) {
  return static_cast<uint64_t>(1.5 * budget) + (p.rss_base_mb << 20);
}

std::string Gib(uint64_t bytes) {
  return absl::StrFormat("%.2f GiB", bytes / double(1ull << 30));
}

// The systems of one round, in the order of kSystems.
using Round = std::vector<SystemResult>;

// The memory a system was given, for its peak-RSS line.
uint64_t BudgetOf(const SystemResult& s, uint64_t budget, uint64_t mem_budget) {
  return s.id == "psdb_mem" || s.id == "psdb_wal" ? mem_budget : budget;
}

void PrintReport(const Params& p, const MachineInfo& m, uint64_t row_bytes,
                 uint64_t table_bytes, uint64_t budget, uint64_t mem_budget,
                 const std::vector<Round>& rounds, const CheckpointResult& ckpt,
                 const std::vector<Ratio>& ratios, const CpuRatios& cpu,
                 std::ostream& out) {
  out << "ps-bench store\n";
  out << absl::StrFormat("machine     %d cores, %s, %s RAM\n", m.cores,
                         m.cpu_model, Gib(m.memory_bytes));
  out << absl::StrFormat(
      "parameters  rows=%d dim=%d optimizer=%s batch_keys=%d "
      "batches=%d warmup_batches=%d alpha=%g seed=%d repeats=%d "
      "psdb_block_cache_mb=%d psdb_background_eviction=%d "
      "psdb_mmap_reads=%d\n",
      p.rows, p.dim, optim::KindName(p.optimizer), p.batch_keys, p.batches,
      p.warmup_batches, p.alpha, p.seed, p.repeats, p.psdb_block_cache_mb,
      p.psdb_background_eviction ? 1 : 0, p.psdb_mmap_reads ? 1 : 0);
  out << absl::StrFormat(
      "table       %s (%d B/row: values + state + header + key); budget "
      "%.0f%% = %.1f MiB\n\n",
      Gib(table_bytes), row_bytes, p.budget_fraction * 100,
      budget / double(1 << 20));
  out << absl::StrFormat("%-44s %9s %14s %14s %16s %16s %9s\n", "system",
                         "load s", "pull keys/s", "push keys/s",
                         "pull keys/cpu-s", "push keys/cpu-s", "hit rate");
  for (size_t k = 0; k < rounds.size(); ++k) {
    for (const SystemResult& s : rounds[k]) {
      if (s.keys == 0) continue;  // not run (--systems)
      const std::string label =
          rounds.size() > 1 ? absl::StrCat(s.label, " #", k + 1) : s.label;
      out << absl::StrFormat(
          "%-44s %9.2f %14.0f %14.0f %16.0f %16.0f %9s\n", label, s.load_s,
          s.PullRate(), s.PushRate(), s.PullCpuRate(), s.PushCpuRate(),
          s.hit_rate < 0 ? "-" : absl::StrFormat("%.3f", s.hit_rate));
    }
  }
  for (const SystemResult& s : rounds.front()) {
    if (s.peak_rss_bytes == 0) continue;
    const uint64_t b = BudgetOf(s, budget, mem_budget);
    out << absl::StrFormat(
        "%-44s peak RSS %.0f MiB (%.0f MiB at open), memory %.0f MiB, "
        "1.5 x memory + %d MiB = %.0f MiB\n",
        s.label, s.peak_rss_bytes / double(1 << 20),
        s.start_rss_bytes / double(1 << 20), b / double(1 << 20), p.rss_base_mb,
        RssBound(p, b) / double(1 << 20));
  }
  if (ckpt.ran) {
    out << absl::StrFormat(
        "\ncheckpoint  full %.3f s (%d rows flushed); incremental after "
        "updating %d rows (%g%%) %.3f s (%d rows flushed)\n",
        ckpt.full_s, ckpt.full_rows, ckpt.touched, p.touch_fraction * 100,
        ckpt.incremental_s, ckpt.incremental_rows);
  }
  out << "\n";
  std::vector<Ratio> noted = ratios;
  for (size_t i = 0; i < noted.size(); ++i) {
    if (!std::isnan(cpu[i])) {
      noted[i].note =
          absl::StrCat(noted[i].note, noted[i].note.empty() ? "" : " ",
                       absl::StrFormat("(cpu-time %.3f)", cpu[i]));
    }
  }
  PrintRatios(noted, out);
}

Json SystemJson(const SystemResult& s) {
  Json r = {{"load_s", s.load_s},
            {"pull_s", s.pull_s},
            {"push_s", s.push_s},
            {"keys", s.keys},
            {"pull_keys_per_s", s.PullRate()},
            {"push_keys_per_s", s.PushRate()},
            {"pull_cpu_s", s.pull_cpu_s},
            {"push_cpu_s", s.push_cpu_s}};
  if (s.hit_rate >= 0) {
    r["hit_rate"] = s.hit_rate;
    r["evictions"] = s.evictions;
    r["background_evictions"] = s.background_evictions;
  }
  if (s.peak_rss_bytes > 0) {
    r["start_rss_bytes"] = s.start_rss_bytes;
    r["peak_rss_bytes"] = s.peak_rss_bytes;
  }
  return r;
}

void PrintJson(const Params& p, const MachineInfo& m, uint64_t row_bytes,
               uint64_t table_bytes, uint64_t budget, uint64_t mem_budget,
               const std::vector<Round>& rounds, const CheckpointResult& ckpt,
               const std::vector<Ratio>& ratios, const CpuRatios& cpu,
               std::ostream& out) {
  Json j = StartReportJson("store", m);
  j["params"] = {{"rows", p.rows},
                 {"dim", p.dim},
                 {"optimizer", optim::KindName(p.optimizer)},
                 {"repeats", p.repeats},
                 {"batch_keys", p.batch_keys},
                 {"batches", p.batches},
                 {"warmup_batches", p.warmup_batches},
                 {"alpha", p.alpha},
                 {"budget_fraction", p.budget_fraction},
                 {"touch_fraction", p.touch_fraction},
                 {"seed", p.seed},
                 {"psdb_block_cache_mb", p.psdb_block_cache_mb},
                 {"psdb_background_eviction", p.psdb_background_eviction},
                 {"psdb_mmap_reads", p.psdb_mmap_reads},
                 {"rss_base_mb", p.rss_base_mb},
                 {"mem_budget_bytes", mem_budget},
                 {"row_bytes", row_bytes},
                 {"table_bytes", table_bytes},
                 {"budget_bytes", budget}};
  // Per system: its label and one object per round.
  Json by_id = Json::object();
  for (size_t i = 0; i < rounds.front().size(); ++i) {
    const SystemResult& first = rounds.front()[i];
    if (first.keys == 0) continue;  // not run (--systems)
    Json each = Json::array();
    for (const Round& round : rounds) each.push_back(SystemJson(round[i]));
    by_id[first.id] = {{"label", first.label}, {"rounds", std::move(each)}};
  }
  j["systems"] = std::move(by_id);
  j["checkpoint"] = {{"full_s", ckpt.full_s},
                     {"full_rows_flushed", ckpt.full_rows},
                     {"touched_rows", ckpt.touched},
                     {"incremental_s", ckpt.incremental_s},
                     {"incremental_rows_flushed", ckpt.incremental_rows}};
  AddRatiosJson(ratios, &j);
  // Beside the shared blocks: the same ratios in keys per CPU second
  // (medians over rounds); ratios that are not rates have none.
  Json by_cpu = Json::object();
  for (size_t i = 0; i < ratios.size(); ++i) {
    if (!std::isnan(cpu[i])) by_cpu[ratios[i].name] = cpu[i];
  }
  j["ratios_cpu"] = std::move(by_cpu);
  WriteJson(j, out);
}

absl::Status Run(const Params& p, std::ostream& out, std::ostream& log) {
  TableSpec spec;
  spec.name = "emb";
  spec.dim = p.dim;
  spec.seed = p.seed;
  spec.optimizer.kind = p.optimizer;
  spec.optimizer.learning_rate = 0.05f;
  spec.optimizer.initial_accumulator = 0.1f;
  const int state_size = optim::StateSize(spec.optimizer, spec.dim);
  const uint64_t row_bytes =
      4ull * (p.dim + state_size) + sizeof(RowHeader) + sizeof(uint64_t);
  const uint64_t table_bytes = row_bytes * p.rows;
  const uint64_t budget =
      static_cast<uint64_t>(std::llround(table_bytes * p.budget_fraction));
  const MachineInfo machine = DescribeMachine();

  PSDB_ASSIGN_OR_RETURN(const BenchDir scratch, BenchDir::Make(p.dir, "store"));
  const std::string& dir = scratch.path();
  log << "ps-bench store: scratch directory " << dir << "\n";
  auto fresh = [&](const std::string& name) {
    const std::string sub = dir + "/" + name;
    std::error_code ec;
    std::filesystem::remove_all(sub, ec);
    std::filesystem::create_directories(sub, ec);
    return sub;
  };
  auto drop = [&](const std::string& sub) {
    std::error_code ec;
    std::filesystem::remove_all(sub, ec);
  };

  log << "ps-bench store: generating the stream\n";
  Runner runner(p, log);
  CheckpointResult ckpt;

  // psdb's budget covers its rows, memtables and block cache (0: RocksDB's
  // share derived from the budget).
  const uint64_t kPsdbBlockCache = p.psdb_block_cache_mb << 20;
  // Twice the raw row bytes: room for the store's index and slab overhead.
  const uint64_t mem_budget = 2 * table_bytes + (64ull << 20);
  auto psdb_options = [&](uint64_t bytes) {
    StoreOptions options;
    options.memory_budget_bytes = bytes;
    options.rocksdb_block_cache_bytes = kPsdbBlockCache;
    options.rocksdb_mmap_reads = p.psdb_mmap_reads;
    options.background_eviction = p.psdb_background_eviction;
    return options;
  };
  // The equal-memory peer's memtables: the share psdb's own split gives
  // its memtables (budget / 16, psdb/store_options.h), within 256 KiB to
  // 128 MiB.
  const RocksDbMemory equal = {.cache_bytes = budget,
                               .charge_all = true,
                               .memtable_bytes = std::clamp<uint64_t>(
                                   budget / 16, 256 << 10, 128ull << 20)};
  const RocksDbMemory cache_only = {.cache_bytes = budget};
  const std::string pct = absl::StrFormat("%g%%", p.budget_fraction * 100);
  const std::string labels[] = {
      "psdb, budget = whole table",
      absl::StrCat("psdb, budget = ", pct),
      absl::StrCat("rocksdb direct, all memory = ", pct),
      absl::StrCat("rocksdb direct, block cache = ", pct),
      "flat hash map (limit)",
      "psdb, whole table, durability=wal"};

  std::vector<Round> rounds(p.repeats);
  for (int k = 0; k < p.repeats; ++k) {
    log << "ps-bench store: round " << k + 1 << " of " << p.repeats << "\n";
    Round& round = rounds[k];
    round.resize(std::size(kSystems));
    for (size_t i = 0; i < std::size(kSystems); ++i) {
      SystemResult& r = round[i];
      r.id = kSystems[i];
      r.label = labels[i];
      if (!p.Runs(r.id)) continue;
      const std::string sub = fresh(r.id);
      switch (i) {
        case kMem:  // the checkpoints: once, in the first round
          PSDB_RETURN_IF_ERROR(RunPsdb(runner, sub, spec,
                                       psdb_options(mem_budget), &r,
                                       k == 0 ? &ckpt : nullptr));
          break;
        case kTiered:
          PSDB_RETURN_IF_ERROR(
              RunPsdb(runner, sub, spec, psdb_options(budget), &r, nullptr));
          break;
        case kRocks:
          PSDB_RETURN_IF_ERROR(RunRocks(runner, sub, spec, equal, &r));
          break;
        case kRocksCache:
          PSDB_RETURN_IF_ERROR(RunRocks(runner, sub, spec, cache_only, &r));
          break;
        case kLimit: {
          HashMapSystem sys(spec, p.rows);
          PSDB_RETURN_IF_ERROR(runner.Load(sys, &r));
          PSDB_RETURN_IF_ERROR(runner.WarmUp(sys, &r));
          PSDB_RETURN_IF_ERROR(runner.Measure(sys, &r));
          break;
        }
        case kWal: {
          StoreOptions options = psdb_options(mem_budget);
          options.durability = Durability::kWal;
          PSDB_RETURN_IF_ERROR(
              RunPsdb(runner, sub, spec, options, &r, nullptr));
          break;
        }
      }
      drop(sub);
    }
  }

  // Each ratio's value per round, wall and CPU time.
  struct Pair {
    std::vector<double> wall, cpu;
  };
  auto rate_ratio = [&](SystemIndex a, SystemIndex b, bool pull) {
    Pair out;
    for (const Round& r : rounds) {
      out.wall.push_back(pull ? r[a].PullRate() / r[b].PullRate()
                              : r[a].PushRate() / r[b].PushRate());
      out.cpu.push_back(pull ? r[a].PullCpuRate() / r[b].PullCpuRate()
                             : r[a].PushCpuRate() / r[b].PushCpuRate());
    }
    return out;
  };
  auto rss_ratio = [&](SystemIndex a) {
    std::vector<double> out;
    for (const Round& r : rounds) {
      out.push_back(r[a].peak_rss_bytes == 0
                        ? NAN
                        : r[a].peak_rss_bytes /
                              static_cast<double>(RssBound(p, budget)));
    }
    return out;
  };
  std::vector<Ratio> ratios;
  CpuRatios cpu;
  auto add = [&](const char* name, Target target, Pair v,
                 const char* note = "") {
    ratios.push_back(
        {.name = name, .target = target, .rounds = v.wall, .note = note});
    cpu.push_back(Median(v.cpu));
  };
  add("mem_vs_limit_pull", Target::AtLeast(0.5),
      rate_ratio(kMem, kLimit, true));
  add("mem_vs_limit_push", Target::AtLeast(0.5),
      rate_ratio(kMem, kLimit, false));
  add("tiered_vs_rocksdb_pull", Target::AtLeast(3),
      rate_ratio(kTiered, kRocks, true), "(equal memory)");
  add("tiered_vs_rocksdb_push", Target::AtLeast(3),
      rate_ratio(kTiered, kRocks, false), "(equal memory)");
  add("tiered_vs_rocksdb_cache_pull", Target::None(),
      rate_ratio(kTiered, kRocksCache, true), "(memtables outside its cache)");
  add("tiered_vs_rocksdb_cache_push", Target::None(),
      rate_ratio(kTiered, kRocksCache, false), "(memtables outside its cache)");
  ratios.push_back(
      {.name = "incremental_vs_full_checkpoint",
       .target = Target::AtMost(0.1),
       .rounds = {ckpt.ran ? ckpt.incremental_s / std::max(ckpt.full_s, 1e-9)
                           : NAN}});
  cpu.push_back(NAN);
  add("wal_vs_checkpoint_push", Target::AtLeast(0.5),
      rate_ratio(kWal, kMem, false));
  ratios.push_back({.name = "tiered_peak_rss_vs_budget_bound",
                    .target = Target::AtMost(1),
                    .rounds = rss_ratio(kTiered),
                    .note = "(peak RSS / (1.5 x budget + base))"});
  cpu.push_back(NAN);
  ratios.push_back({.name = "rocksdb_peak_rss_vs_budget_bound",
                    .target = Target::None(),
                    .rounds = rss_ratio(kRocks),
                    .note = "(the equal-memory peer, same bound)"});
  cpu.push_back(NAN);
  if (p.json) {
    PrintJson(p, machine, row_bytes, table_bytes, budget, mem_budget, rounds,
              ckpt, ratios, cpu, out);
  } else {
    PrintReport(p, machine, row_bytes, table_bytes, budget, mem_budget, rounds,
                ckpt, ratios, cpu, out);
  }
  for (const Round& r : rounds) {
    if (r[kMem].evictions > 0) {
      log << "ps-bench store: warning: psdb_mem evicted " << r[kMem].evictions
          << " rows; its budget did not hold the table\n";
    }
  }
  return absl::OkStatus();
}

}  // namespace

int RunStoreBench(int argc, const char* const* argv, std::ostream& out,
                  std::ostream& err) {
  return RunScenario<Params>(Flags(), argc, argv, out, err, &ParseParams,
                             [&](Params& p) { return Run(p, out, err); });
}

}  // namespace psdb::bench
