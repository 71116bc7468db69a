// ps-bench's scenarios. `ps-bench <scenario> [flags]` runs one; each lives in
// its own file (tools/bench/<name>_bench.cc) and is listed in scenario.cc.
// To add one: write `int Run<Name>Bench(int argc, const char* const* argv,
// std::ostream& out, std::ostream& err)` (argv[0] = scenario name, flags
// after it; exit code 0 ok, 1 failure, 2 usage), declare it in its own header
// and add a line to kScenarios in scenario.cc. Its body is one call to
// RunScenario below, which gives every scenario the same command line: the
// same help words, the same usage-error message and exit codes. Its --json
// report is a Json value (json_writer.h) that starts with StartReportJson,
// holds report.h's ratio blocks (AddRatiosJson) and is written by
// WriteJson; its figures over rounds are report.h's Series.
//
// Thread-safety: RunBench and RunScenario write to the given streams; one
// call at a time.
#ifndef PSDB_TOOLS_BENCH_SCENARIO_H_
#define PSDB_TOOLS_BENCH_SCENARIO_H_

#include <csignal>
#include <optional>
#include <ostream>
#include <string>
#include <type_traits>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "tools/bench/bench_dir.h"
#include "tools/bench/machine.h"
#include "tools/bench/report.h"
#include "tools/common/args.h"
#include "util/status_macros.h"

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

// A scenario's command line, as RunScenario reads it.
struct ScenarioFlags {
  // The scenario's name: messages start "ps-bench <name>: ".
  const char* name;
  // Printed on `out` for help, and on `err` after a usage error.
  const char* usage;
  // Every flag it takes, without "--", but `json`: that one (a flag without
  // a value) every scenario accepts.
  std::vector<std::string> known;
  // Those of `known` that take no value, like `json`. Default: none
  std::vector<std::string> bool_flags = {};
};

// The prologue every scenario shares. `-h`, `--help` or `help` among the
// arguments (before any `--`), even beside a bad flag: the usage on `out`,
// returns 0. Arguments that do not parse (a malformed or unknown flag, any
// positional argument): "ps-bench <name>: <message>", a blank line and the
// usage on `err`, returns tools::kUsageExitCode. Otherwise stores the flags in
// *args and returns nullopt: the scenario goes on.
std::optional<int> ReadScenarioArgs(const ScenarioFlags& flags, int argc,
                                    const char* const* argv, std::ostream& out,
                                    std::ostream& err, tools::Args* args);

// The same usage-error message, for a flag value the scenario rejects.
void PrintUsageError(const ScenarioFlags& flags, const absl::Status& status,
                     std::ostream& err);

// A scenario's main: ReadScenarioArgs, then parse(args) (an error is a usage
// error, exit 2), then run(params): 0 when it returns OK, else
// "ps-bench <name>: <status>" on `err` and 1.
template <typename Params>
int RunScenario(
    const ScenarioFlags& flags, int argc, const char* const* argv,
    std::ostream& out, std::ostream& err,
    absl::StatusOr<Params> (*parse)(const tools::Args&),
    std::type_identity_t<absl::FunctionRef<absl::Status(Params&)>> run) {
  tools::Args args;
  if (std::optional<int> code =
          ReadScenarioArgs(flags, argc, argv, out, err, &args)) {
    return *code;
  }
  absl::StatusOr<Params> params = parse(args);
  if (!params.ok()) {
    PrintUsageError(flags, params.status(), err);
    return tools::kUsageExitCode;
  }
  const absl::Status status = run(*params);
  if (status.ok()) return 0;
  err << "ps-bench " << flags.name << ": " << status << "\n";
  return 1;
}

// The body of a scenario that starts processes in a scratch directory and
// reports results with ratios (control, serve, migrate): ignores SIGPIPE (a
// dead peer is an error, not a crash), runs measure(p, dir, log) in a
// BenchDir named `name` under p.dir (a fresh temporary one is removed
// before the report), then prints print_json or print_report (p.json) of
// the results, make_ratios(p, results) and the machine on `out`.
template <typename Params, typename Measure, typename MakeRatios,
          typename PrintJson, typename PrintReport>
absl::Status MeasureAndReport(const Params& p, absl::string_view name,
                              std::ostream& out, std::ostream& log,
                              Measure measure, MakeRatios make_ratios,
                              PrintJson print_json, PrintReport print_report) {
  signal(SIGPIPE, SIG_IGN);
  decltype(measure(p, std::string(), log)) results;
  {
    PSDB_ASSIGN_OR_RETURN(BenchDir dir, BenchDir::Make(p.dir, name));
    results = measure(p, dir.path(), log);
  }
  PSDB_RETURN_IF_ERROR(results.status());
  const std::vector<Ratio> ratios = make_ratios(p, *results);
  const MachineInfo machine = DescribeMachine();
  if (p.json) {
    print_json(p, machine, *results, ratios, out);
  } else {
    print_report(p, machine, *results, ratios, out);
  }
  return absl::OkStatus();
}

}  // namespace psdb::bench

#endif  // PSDB_TOOLS_BENCH_SCENARIO_H_
