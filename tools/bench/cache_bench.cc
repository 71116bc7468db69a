#include "tools/bench/cache_bench.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "cache/backend.h"
#include "cache/cpu_backend.h"
#include "cache/policy_sim.h"
#include "optim/optimizer.h"
#include "psdb/local_client.h"
#include "psdb/vocab_cache.h"
#include "tools/bench/json_writer.h"
#include "tools/bench/machine.h"
#include "tools/bench/report.h"
#include "tools/bench/scenario.h"
#include "tools/bench/zipf.h"
#include "tools/common/args.h"
#include "util/key_dedup.h"
#include "util/status_macros.h"

namespace psdb::bench {
namespace {

constexpr char kUsage[] = R"(usage: ps-bench cache [--json] [flags]
Cache hit rates (LRU, LFU, lookahead vs Che, static optimum, Belady) on
Zipf streams, and CPU-backend gather throughput vs a plain indexed copy;
the CUDA backend's gather and Adam step against the CPU backend's, where
this build has the CUDA backend and the machine a device.
  --ns=LIST               distinct ids per stream (default 100000,1000000)
  --alphas=LIST           Zipf exponents (default 0.8,1.0,1.2)
  --capacities=LIST       capacity / N (default 0.01,0.1)
  --warmup_capacities=K   warm-up accesses = K x capacity (default 30)
  --counted=N             accesses counted after the warm-up (default 1000000)
  --batch=B               ids per batch for lookahead (default 16)
  --lookahead_capacities=K  lookahead window = K x capacity accesses (default 16)
  --gather_rows=N         rows cached for the gather test (default 262144)
  --gather_batches=N      4096-id batches timed (default 2000)
  --seed=S                stream seed (default 1)
  --json                  print one JSON object instead of the report
)";

struct Params {
  std::vector<int64_t> ns;
  std::vector<double> alphas;
  std::vector<double> capacities;
  int64_t warmup_capacities = 30;
  int64_t counted = 1000000;
  int64_t batch = 16;
  int64_t lookahead_capacities = 16;
  int64_t gather_rows = 262144;
  int64_t gather_batches = 2000;
  int64_t seed = 1;
  bool json = false;
};

template <typename T>
absl::StatusOr<std::vector<T>> ParseList(const tools::Args& args,
                                         absl::string_view name,
                                         absl::string_view def) {
  std::vector<T> out;
  for (absl::string_view s : absl::StrSplit(args.GetString(name, def), ',')) {
    T v;
    bool ok;
    if constexpr (std::is_same_v<T, double>) {
      ok = absl::SimpleAtod(s, &v) && v > 0;
    } else {
      ok = absl::SimpleAtoi(s, &v) && v > 0;
    }
    if (!ok) {
      return absl::InvalidArgumentError(
          absl::StrCat("--", name, ": bad value '", s, "'"));
    }
    out.push_back(v);
  }
  return out;
}

ScenarioFlags Flags() {
  return {
      "cache",
      kUsage,
      {"ns", "alphas", "capacities", "warmup_capacities", "counted", "batch",
       "lookahead_capacities", "gather_rows", "gather_batches", "seed"}};
}

absl::StatusOr<Params> ParseParams(const tools::Args& args) {
  Params p;
  PSDB_ASSIGN_OR_RETURN(p.ns, ParseList<int64_t>(args, "ns", "100000,1000000"));
  PSDB_ASSIGN_OR_RETURN(p.alphas,
                        ParseList<double>(args, "alphas", "0.8,1.0,1.2"));
  PSDB_ASSIGN_OR_RETURN(p.capacities,
                        ParseList<double>(args, "capacities", "0.01,0.1"));
  PSDB_ASSIGN_OR_RETURN(p.warmup_capacities,
                        args.GetInt("warmup_capacities", 30, 0, 1000));
  PSDB_ASSIGN_OR_RETURN(p.counted, args.GetInt("counted", 1000000, 1, 1e10));
  PSDB_ASSIGN_OR_RETURN(p.batch, args.GetInt("batch", 16, 1, 1 << 20));
  PSDB_ASSIGN_OR_RETURN(p.lookahead_capacities,
                        args.GetInt("lookahead_capacities", 16, 0, 1000));
  PSDB_ASSIGN_OR_RETURN(p.gather_rows,
                        args.GetInt("gather_rows", 262144, 4096, 1 << 26));
  PSDB_ASSIGN_OR_RETURN(p.gather_batches,
                        args.GetInt("gather_batches", 2000, 1, 1e8));
  PSDB_ASSIGN_OR_RETURN(p.seed, args.GetInt("seed", 1, 0, INT64_MAX));
  PSDB_ASSIGN_OR_RETURN(p.json, args.GetBool("json"));
  return p;
}

struct HitRate {
  int64_t n;
  double alpha;
  int64_t capacity;
  const char* policy;
  double hit_rate;
};

struct Gather {
  int64_t rows = 0;
  int64_t batches = 0;
  double limit_ids_per_s = 0;
  double backend_ids_per_s = 0;
  double lookup_ids_per_s = 0;
  // Each backend's Gather of a batch, and its ApplyGradients (Adam) of the
  // batch's gradients to the batch's unique rows, in batch ids per second.
  double cpu_apply_ids_per_s = 0;
  double cuda_gather_ids_per_s = 0;
  double cuda_apply_ids_per_s = 0;
  std::string cuda_skipped;  // why the CUDA backend was not timed, if not
};

double Seconds(std::chrono::steady_clock::time_point a,
               std::chrono::steady_clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

absl::Status RunHitRates(const Params& p, std::vector<HitRate>* out,
                         std::ostream& log) {
  for (int64_t n : p.ns) {
    for (double alpha : p.alphas) {
      const std::vector<double> probs = cache::ZipfProbabilities(n, alpha);
      for (double fraction : p.capacities) {
        const int64_t c = std::max<int64_t>(1, std::llround(n * fraction));
        const int64_t warmup = p.warmup_capacities * c;
        const std::vector<uint64_t> trace =
            cache::ZipfTrace(probs, warmup + p.counted, p.seed);
        cache::SimOptions o;
        o.capacity = static_cast<int32_t>(c);
        o.warmup = warmup;
        auto add = [&](const char* policy, double h) {
          out->push_back({n, alpha, c, policy, h});
        };
        o.policy = cache::PolicyKind::kLru;
        PSDB_ASSIGN_OR_RETURN(cache::SimResult lru,
                              cache::SimulateHitRate(trace, o));
        o.policy = cache::PolicyKind::kLfu;
        PSDB_ASSIGN_OR_RETURN(cache::SimResult lfu,
                              cache::SimulateHitRate(trace, o));
        o.policy = cache::PolicyKind::kLookahead;
        o.batch_size = static_cast<int32_t>(p.batch);
        o.lookahead_batches =
            static_cast<int32_t>(p.lookahead_capacities * c / p.batch);
        PSDB_ASSIGN_OR_RETURN(cache::SimResult ahead,
                              cache::SimulateHitRate(trace, o));
        add("lru", lru.hit_rate());
        add("lfu", lfu.hit_rate());
        add("lookahead", ahead.hit_rate());
        add("che", cache::CheLruHitRate(probs, c));
        add("static_opt", cache::StaticOptimumHitRate(probs, c));
        add("belady", cache::BeladyHitRate(trace, c, warmup));
        log << absl::StrFormat("ps-bench cache: n=%d alpha=%.1f C=%d done\n", n,
                               alpha, c);
      }
    }
  }
  return absl::OkStatus();
}

// One batch's positions grouped by slot, as ApplyGradients takes them.
struct ApplyBatch {
  std::vector<int32_t> unique_slots;
  std::vector<int32_t> offsets;
  std::vector<int32_t> positions;
};

ApplyBatch GroupByRow(absl::Span<const int32_t> slots) {
  KeyDedup dedup;
  dedup.Reset(slots.size());
  std::vector<int32_t> inverse(slots.size());
  for (size_t i = 0; i < slots.size(); ++i) {
    bool inserted;
    inverse[i] = static_cast<int32_t>(
        dedup.Insert(static_cast<uint64_t>(slots[i]), &inserted));
  }
  ApplyBatch out;
  for (uint64_t slot : dedup.unique()) {
    out.unique_slots.push_back(static_cast<int32_t>(slot));
  }
  cache::GroupPositionsByRow(inverse, out.unique_slots.size(), &out.offsets,
                             &out.positions);
  return out;
}

absl::Status RunGather(const Params& p, Gather* g) {
  constexpr int kDim = 64;
  constexpr int kBatch = 4096;
  const int64_t rows = p.gather_rows;
  g->rows = rows;
  g->batches = p.gather_batches;
  // The same Zipf(1.0) batches of row indices for every contender.
  ZipfSampler zipf(rows, 1.0);
  SplitMix rng(p.seed);
  std::vector<uint64_t> ranks(kBatch * p.gather_batches);
  for (uint64_t& r : ranks) r = zipf.Sample(rng) - 1;

  // The limit: an indexed copy out of one row array.
  std::vector<float> table(rows * kDim);
  for (size_t i = 0; i < table.size(); ++i)
    table[i] = static_cast<float>(i % 977);
  std::vector<float> out(kBatch * kDim);
  float sink = 0;
  auto t0 = std::chrono::steady_clock::now();
  for (int64_t b = 0; b < p.gather_batches; ++b) {
    const uint64_t* idx = ranks.data() + b * kBatch;
    for (int i = 0; i < kBatch; ++i) {
      std::memcpy(out.data() + i * kDim, table.data() + idx[i] * kDim,
                  sizeof(float) * kDim);
    }
    sink += out[b % out.size()];
  }
  auto t1 = std::chrono::steady_clock::now();
  g->limit_ids_per_s = kBatch * p.gather_batches / Seconds(t0, t1);

  // Each backend's gather alone (slots known) and Adam step, with Adam's
  // row stride.
  std::vector<int32_t> slots(ranks.begin(), ranks.end());
  std::vector<ApplyBatch> applies(p.gather_batches);
  for (int64_t b = 0; b < p.gather_batches; ++b) {
    applies[b] =
        GroupByRow(absl::MakeConstSpan(slots).subspan(b * kBatch, kBatch));
  }
  optim::OptimizerSpec adam;
  adam.kind = optim::OptimizerKind::kAdam;
  const optim::KernelParams params = optim::KernelParamsOf(adam);
  std::vector<float> grads(kBatch * kDim);
  for (size_t i = 0; i < grads.size(); ++i) {
    grads[i] = 1e-3f * static_cast<float>(static_cast<int>(i % 201) - 100);
  }
  auto time_backend = [&](cache::CacheBackend& backend,
                          double* gather_ids_per_s,
                          double* apply_ids_per_s) -> absl::Status {
    PSDB_RETURN_IF_ERROR(backend.Allocate(static_cast<int32_t>(rows), kDim,
                                          optim::StateSize(adam, kDim)));
    auto s0 = std::chrono::steady_clock::now();
    for (int64_t b = 0; b < p.gather_batches; ++b) {
      PSDB_RETURN_IF_ERROR(
          backend.Gather(absl::MakeConstSpan(slots).subspan(b * kBatch, kBatch),
                         absl::MakeSpan(out)));
      sink += out[b % out.size()];
    }
    auto s1 = std::chrono::steady_clock::now();
    *gather_ids_per_s = kBatch * p.gather_batches / Seconds(s0, s1);
    s0 = std::chrono::steady_clock::now();
    for (int64_t b = 0; b < p.gather_batches; ++b) {
      const ApplyBatch& a = applies[b];
      PSDB_RETURN_IF_ERROR(backend.ApplyGradients(
          params, a.unique_slots, a.offsets, a.positions, grads, b + 1));
    }
    s1 = std::chrono::steady_clock::now();
    *apply_ids_per_s = kBatch * p.gather_batches / Seconds(s0, s1);
    return absl::OkStatus();
  };
  cache::CpuBackend cpu;
  PSDB_RETURN_IF_ERROR(
      time_backend(cpu, &g->backend_ids_per_s, &g->cpu_apply_ids_per_s));
  absl::StatusOr<std::unique_ptr<cache::CacheBackend>> cuda =
      cache::MakeBackend(cache::BackendKind::kCuda);
  if (cuda.ok()) {
    PSDB_RETURN_IF_ERROR(time_backend(**cuda, &g->cuda_gather_ids_per_s,
                                      &g->cuda_apply_ids_per_s));
  } else {
    g->cuda_skipped = std::string(cuda.status().message());
  }

  // A warm VocabCache over a real store: every row resident.
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() /
      absl::StrFormat("psdb-cache-bench-%d", static_cast<int64_t>(getpid()));
  std::filesystem::remove_all(dir);
  absl::Status status = [&]() -> absl::Status {
    PSDB_ASSIGN_OR_RETURN(auto client, LocalClient::Open(dir.string()));
    TableSpec spec;
    spec.name = "emb";
    spec.dim = kDim;
    spec.optimizer.kind = optim::OptimizerKind::kAdam;
    PSDB_RETURN_IF_ERROR(client->CreateTable(spec));
    cache::VocabCacheOptions options;
    options.capacity_rows = rows;
    PSDB_ASSIGN_OR_RETURN(
        auto vc, cache::VocabCache::Create(client.get(), {"emb"}, options));
    std::vector<uint64_t> ids(kBatch);
    std::vector<std::vector<float>> result;
    for (int64_t start = 0; start < rows; start += kBatch) {
      for (int i = 0; i < kBatch; ++i) ids[i] = (start + i) % rows;
      PSDB_RETURN_IF_ERROR(vc->Lookup({{"emb", ids}}, &result));
      vc->Release();
    }
    const uint64_t misses_before = vc->Stats()[0].misses;
    auto s0 = std::chrono::steady_clock::now();
    for (int64_t b = 0; b < p.gather_batches; ++b) {
      PSDB_RETURN_IF_ERROR(vc->Lookup(
          {{"emb", absl::MakeConstSpan(ranks).subspan(b * kBatch, kBatch)}},
          &result));
      vc->Release();
      sink += result[0][b % result[0].size()];
    }
    auto s1 = std::chrono::steady_clock::now();
    if (vc->Stats()[0].misses != misses_before) {
      return absl::InternalError("gather test: the warm cache missed");
    }
    g->lookup_ids_per_s = kBatch * p.gather_batches / Seconds(s0, s1);
    return absl::OkStatus();
  }();
  std::filesystem::remove_all(dir);
  if (sink == 12345.678f) std::fprintf(stderr, " ");  // keep the copies alive
  return status;
}

struct Ratios {
  double lru_minus_che_max_pp = 0;
  double lfu_vs_static_opt_min = 1e9;
  double lookahead_vs_belady_min = 1e9;
  // The issue's ratio: CpuBackend::Gather over a plain indexed copy.
  double gather_vs_limit = 0;
  // The whole warm VocabCache::Lookup (dedup, slot map, policy, pins,
  // gather) over the same copy: what a trainer pays per batch. No target.
  double lookup_vs_limit = 0;
  // The CUDA backend over the CPU backend, per call (host spans in and out,
  // so transfers included); NaN where it was not timed. No target.
  double cuda_vs_cpu_gather = std::nan("");
  double cuda_vs_cpu_apply = std::nan("");
  bool lookahead_beats = true;  // where Belady leads LRU/LFU by > 2 points
};

Ratios ComputeRatios(const std::vector<HitRate>& r, const Gather& g) {
  Ratios x;
  for (size_t i = 0; i + 5 < r.size(); i += 6) {
    const double lru = r[i].hit_rate, lfu = r[i + 1].hit_rate,
                 ahead = r[i + 2].hit_rate, che = r[i + 3].hit_rate,
                 stat = r[i + 4].hit_rate, belady = r[i + 5].hit_rate;
    x.lru_minus_che_max_pp =
        std::max(x.lru_minus_che_max_pp, 100 * std::abs(lru - che));
    x.lfu_vs_static_opt_min = std::min(x.lfu_vs_static_opt_min, lfu / stat);
    x.lookahead_vs_belady_min =
        std::min(x.lookahead_vs_belady_min, ahead / belady);
    if (belady - lru > 0.02 && ahead <= lru) x.lookahead_beats = false;
    if (belady - lfu > 0.02 && ahead <= lfu) x.lookahead_beats = false;
  }
  x.gather_vs_limit = g.backend_ids_per_s / g.limit_ids_per_s;
  x.lookup_vs_limit = g.lookup_ids_per_s / g.limit_ids_per_s;
  if (g.cuda_skipped.empty()) {
    x.cuda_vs_cpu_gather = g.cuda_gather_ids_per_s / g.backend_ids_per_s;
    x.cuda_vs_cpu_apply = g.cuda_apply_ids_per_s / g.cpu_apply_ids_per_s;
  }
  return x;
}

// The ratios with their targets, for report.h (one round: hit rates are
// exact for a given stream and the gather is timed once).
std::vector<Ratio> RatioList(const Ratios& x) {
  return {
      {.name = "lru_minus_che_max_pp",
       .target = Target::AtMost(1.5),
       .rounds = {x.lru_minus_che_max_pp}},
      {.name = "lfu_vs_static_opt_min",
       .target = Target::AtLeast(0.97),
       .rounds = {x.lfu_vs_static_opt_min}},
      {.name = "lookahead_vs_belady_min",
       .target = Target::AtLeast(0.95),
       .rounds = {x.lookahead_vs_belady_min}},
      {.name = "gather_vs_limit",
       .target = Target::AtLeast(0.5),
       .rounds = {x.gather_vs_limit},
       .note = "(CpuBackend::Gather)"},
      {.name = "lookup_vs_limit",
       .rounds = {x.lookup_vs_limit},
       .note = "(the whole warm VocabCache::Lookup)"},
      {.name = "cuda_vs_cpu_gather",
       .rounds = {x.cuda_vs_cpu_gather},
       .note = "(CudaBackend::Gather, transfers included)"},
      {.name = "cuda_vs_cpu_apply",
       .rounds = {x.cuda_vs_cpu_apply},
       .note = "(CudaBackend::ApplyGradients, Adam)"},
  };
}

void PrintJson(const Params& p, const MachineInfo& m,
               const std::vector<HitRate>& r, const Gather& g, const Ratios& x,
               std::ostream& out) {
  Json j = StartReportJson("cache", m);
  j["params"] = {{"warmup_capacities", p.warmup_capacities},
                 {"counted", p.counted},
                 {"lookahead_batch", p.batch},
                 {"lookahead_capacities", p.lookahead_capacities},
                 {"seed", p.seed}};
  Json results = Json::array();
  for (const HitRate& h : r) {
    results.push_back(Json{{"n", h.n},
                           {"alpha", h.alpha},
                           {"capacity", h.capacity},
                           {"policy", h.policy},
                           {"hit_rate", h.hit_rate}});
  }
  j["results"] = std::move(results);
  Json gather = {{"dim", 64},
                 {"batch_ids", 4096},
                 {"rows", g.rows},
                 {"batches", g.batches},
                 {"limit_ids_per_s", g.limit_ids_per_s},
                 {"backend_gather_ids_per_s", g.backend_ids_per_s},
                 {"lookup_ids_per_s", g.lookup_ids_per_s},
                 {"cpu_apply_ids_per_s", g.cpu_apply_ids_per_s}};
  if (g.cuda_skipped.empty()) {
    gather["cuda_gather_ids_per_s"] = g.cuda_gather_ids_per_s;
    gather["cuda_apply_ids_per_s"] = g.cuda_apply_ids_per_s;
  } else {
    gather["cuda_skipped"] = g.cuda_skipped;
  }
  j["gather"] = std::move(gather);
  AddRatiosJson(RatioList(x), &j);
  j["lookahead_beats"] = x.lookahead_beats;
  WriteJson(j, out);
}

void PrintReport(const Params& p, const MachineInfo& m,
                 const std::vector<HitRate>& r, const Gather& g,
                 const Ratios& x, std::ostream& out) {
  out << "ps-bench cache\n";
  out << absl::StrFormat("machine     %d cores, %s\n", m.cores, m.cpu_model);
  out << absl::StrFormat(
      "streams     IRM Zipf; warm-up %d x C accesses, then %d counted; "
      "lookahead: %d-id batches, window %d x C accesses\n\n",
      p.warmup_capacities, p.counted, p.batch, p.lookahead_capacities);
  out << absl::StrFormat("%9s %5s %8s | %7s %7s %7s | %7s %7s %7s\n", "N",
                         "alpha", "C", "lru", "lfu", "lookahd", "che", "static",
                         "belady");
  for (size_t i = 0; i + 5 < r.size(); i += 6) {
    out << absl::StrFormat(
        "%9d %5.1f %8d | %7.4f %7.4f %7.4f | %7.4f %7.4f %7.4f\n", r[i].n,
        r[i].alpha, r[i].capacity, r[i].hit_rate, r[i + 1].hit_rate,
        r[i + 2].hit_rate, r[i + 3].hit_rate, r[i + 4].hit_rate,
        r[i + 5].hit_rate);
  }
  out << absl::StrFormat(
      "\ngather      4096-id Zipf(1.0) batches of dim-64 rows, %d rows "
      "cached, %d batches\n"
      "  plain indexed copy (limit)   %12.0f ids/s\n"
      "  CpuBackend::Gather           %12.0f ids/s\n"
      "  VocabCache::Lookup (warm)    %12.0f ids/s\n"
      "  CpuBackend Adam step         %12.0f ids/s\n",
      g.rows, g.batches, g.limit_ids_per_s, g.backend_ids_per_s,
      g.lookup_ids_per_s, g.cpu_apply_ids_per_s);
  if (g.cuda_skipped.empty()) {
    out << absl::StrFormat(
        "  CudaBackend::Gather          %12.0f ids/s\n"
        "  CudaBackend Adam step        %12.0f ids/s\n\n",
        g.cuda_gather_ids_per_s, g.cuda_apply_ids_per_s);
  } else {
    out << "  CudaBackend: not timed: " << g.cuda_skipped << "\n\n";
  }
  PrintRatios(RatioList(x), out);
  out << absl::StrFormat(
      "lookahead beats LRU/LFU where Belady leads by > 2 points: %s\n",
      x.lookahead_beats ? "yes" : "NO");
}

}  // namespace

int RunCacheBench(int argc, const char* const* argv, std::ostream& out,
                  std::ostream& err) {
  return RunScenario<Params>(
      Flags(), argc, argv, out, err, &ParseParams,
      [&](Params& params) -> absl::Status {
        const MachineInfo machine = DescribeMachine();
        std::vector<HitRate> rates;
        Gather gather;
        PSDB_RETURN_IF_ERROR(RunHitRates(params, &rates, err));
        PSDB_RETURN_IF_ERROR(RunGather(params, &gather));
        const Ratios ratios = ComputeRatios(rates, gather);
        if (params.json) {
          PrintJson(params, machine, rates, gather, ratios, out);
        } else {
          PrintReport(params, machine, rates, gather, ratios, out);
        }
        return absl::OkStatus();
      });
}

}  // namespace psdb::bench
