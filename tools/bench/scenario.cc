#include "tools/bench/scenario.h"

#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "tools/bench/cache_bench.h"
#include "tools/bench/control_bench.h"
#include "tools/bench/migrate_bench.h"
#include "tools/bench/serve_bench.h"
#include "tools/bench/server_bench.h"
#include "tools/bench/store_bench.h"
#include "tools/bench/train_bench.h"
#include "tools/common/args.h"

namespace psdb::bench {
namespace {

constexpr Scenario kScenarios[] = {
    {"store",
     "embedded Store pulls/pushes vs RocksDB used directly and a flat hash "
     "map (the memory limit); incremental vs full checkpoint",
     &RunStoreBench},
    {"server",
     "psdb over loopback (ps-server + RemoteClient) vs Redis pipelined "
     "MGET/MSET vs a raw-TCP gather server (the limit)",
     &RunServerBench},
    {"serve",
     "read-only serving replicas (whole table / 10% in memory) vs Redis: "
     "peak rows/s, p50/p99/p999 at a fixed load, p99 through a checkpoint "
     "swap",
     &RunServeBench},
    {"cache",
     "cache hit rates (LRU, LFU, lookahead vs Che, static optimum, Belady) "
     "and CPU-backend gather throughput vs a plain indexed copy",
     &RunCacheBench},
    {"train",
     "ps-train samples/s: embedded vs a local cluster (scheduler, servers, "
     "worker processes) with prefetch on and off; cache hit rate",
     &RunTrainBench},
    {"control",
     "the control plane on etcd vs in-process: formation of a cluster, a "
     "standby scheduler taking the lead, a killed server reaching every "
     "worker's map",
     &RunControlBench},
    {"migrate",
     "live resharding (add-server) rows/s vs PullRows + PutRows through the "
     "public API; training samples/s before, during and after a migration",
     &RunMigrateBench},
};

void PrintUsage(std::ostream& os) {
  os << "usage: ps-bench <scenario> [--json] [flags]\n"
        "       ps-bench <scenario> --help   (the scenario's flags)\n\n"
        "scenarios:\n";
  for (const Scenario& s : kScenarios) {
    os << "  " << s.name << "\t" << s.summary << "\n";
  }
}

}  // namespace

absl::Span<const Scenario> Scenarios() { return kScenarios; }

int RunBench(int argc, const char* const* argv, std::ostream& out,
             std::ostream& err) {
  if (argc < 2) {
    err << "ps-bench: no scenario given\n\n";
    PrintUsage(err);
    return tools::kUsageExitCode;
  }
  const char* name = argv[1];
  if (std::strcmp(name, "help") == 0 || std::strcmp(name, "--help") == 0 ||
      std::strcmp(name, "-h") == 0) {
    PrintUsage(out);
    return 0;
  }
  for (const Scenario& s : kScenarios) {
    if (std::strcmp(name, s.name) == 0)
      return s.run(argc - 1, argv + 1, out, err);
  }
  err << "ps-bench: unknown scenario '" << name << "'\n\n";
  PrintUsage(err);
  return tools::kUsageExitCode;
}

std::optional<int> ReadScenarioArgs(const ScenarioFlags& flags, int argc,
                                    const char* const* argv, std::ostream& out,
                                    std::ostream& err, tools::Args* args) {
  // Help wins over everything else on the line, even a bad flag: someone
  // asking for the usage gets it.
  for (int i = 1; i < argc; ++i) {
    const absl::string_view a = argv[i];
    if (a == "--") break;
    if (a == "-h" || a == "--help" || a == "help") {
      out << flags.usage;
      return 0;
    }
  }
  std::vector<std::string> bool_flags = flags.bool_flags;
  bool_flags.push_back("json");
  absl::StatusOr<tools::Args> parsed =
      tools::Args::Parse(argc, argv, 1, bool_flags);
  absl::Status status = parsed.status();
  if (status.ok()) {
    std::vector<std::string> known = flags.known;
    known.push_back("json");
    status = parsed->CheckKnown(known);
  }
  if (status.ok() && !parsed->positional().empty()) {
    status = absl::InvalidArgumentError(
        absl::StrCat("unexpected argument '", parsed->positional()[0], "'"));
  }
  if (!status.ok()) {
    PrintUsageError(flags, status, err);
    return tools::kUsageExitCode;
  }
  *args = *std::move(parsed);
  return std::nullopt;
}

void PrintUsageError(const ScenarioFlags& flags, const absl::Status& status,
                     std::ostream& err) {
  err << "ps-bench " << flags.name << ": " << status.message() << "\n\n"
      << flags.usage;
}

}  // namespace psdb::bench
