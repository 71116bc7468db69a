#include "tools/bench/scenario.h"

#include <cstring>

#include "tools/bench/cache_bench.h"
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
    {"cache",
     "cache hit rates (LRU, LFU, lookahead vs Che, static optimum, Belady) "
     "and CPU-backend gather throughput vs a plain indexed copy",
     &RunCacheBench},
    {"train",
     "ps-train samples/s: embedded vs a local cluster (scheduler, servers, "
     "worker processes) with prefetch on and off; cache hit rate",
     &RunTrainBench},
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

}  // namespace psdb::bench
