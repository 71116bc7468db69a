// ps-bench's scenarios. `ps-bench <scenario> [flags]` runs one; each lives in
// its own file (tools/bench/<name>_bench.cc) and is listed in scenario.cc.
// To add one: write `int Run<Name>Bench(int argc, const char* const* argv,
// std::ostream& out, std::ostream& err)` (argv[0] = scenario name, flags
// after it; exit code 0 ok, 1 failure, 2 usage), declare it in its own header
// and add a line to kScenarios in scenario.cc.
//
// Thread-safety: RunBench writes to the given streams; one call at a time.
#ifndef PSDB_TOOLS_BENCH_SCENARIO_H_
#define PSDB_TOOLS_BENCH_SCENARIO_H_

#include <ostream>

#include "absl/types/span.h"

namespace psdb::bench {

struct Scenario {
  const char* name;
  const char* summary;
  int (*run)(int argc, const char* const* argv, std::ostream& out,
             std::ostream& err);
};

// Every scenario, in the order `ps-bench help` lists them.
absl::Span<const Scenario> Scenarios();

// ps-bench's main: argv[0] program name, argv[1] scenario.
int RunBench(int argc, const char* const* argv, std::ostream& out,
             std::ostream& err);

}  // namespace psdb::bench

#endif  // PSDB_TOOLS_BENCH_SCENARIO_H_
