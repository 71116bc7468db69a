// How every ps-bench scenario reports what it measured: its figures over
// rounds (Series), its ratios (Ratio), the `--json` blocks of both
// (json_writer.h writes them) and the text table of the ratios, so the
// scenarios agree on shape.
//
// A scenario measures psdb and its peers, and reports ratios (psdb's figure
// over the peer's). When it measures in several rounds (timing.h), each
// figure and each ratio has one value per round; the report gives the
// median, and the min and max beside it, so a reader sees how far a noisy
// machine moved the figure.
//
// NaN means "not measured". The rule, for Series and Ratio alike: the
// median, min and max of the rounds are NaN when there are no rounds or any
// round is NaN (a figure some round did not measure has no median), and
// NaN is written to JSON as null (json_writer.h).
//
// JSON of the ratios (each object keyed by ratio name, in the scenario's
// order):
//   "ratios":      {name: median over rounds}   (a plain number; null = not
//                                                measured)
//   "ratios_min":  {name: min over rounds}
//   "ratios_max":  {name: max over rounds}
//   "targets":     {name: "<op> <bound>"}       (ratios with a target only)
//   "targets_met": {name: true|false|null}      (null: not measured)
// With one round, median == min == max.
//
// Thread-safety: plain values and pure functions.
#ifndef PSDB_TOOLS_BENCH_REPORT_H_
#define PSDB_TOOLS_BENCH_REPORT_H_

#include <ostream>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "tools/bench/json_writer.h"
#include "tools/bench/machine.h"

namespace psdb::bench {

// What a ratio should reach: `value >= bound`, `value <= bound`, or nothing.
class Target {
 public:
  static Target None() { return Target(Kind::kNone, 0); }
  static Target AtLeast(double bound) { return Target(Kind::kAtLeast, bound); }
  static Target AtMost(double bound) { return Target(Kind::kAtMost, bound); }

  bool has_target() const { return kind_ != Kind::kNone; }
  // ">= 2", "<= 0.1"; "" with no target.
  std::string Text() const;
  // False for NaN (a ratio not measured meets nothing).
  bool Met(double value) const;

 private:
  enum class Kind { kNone, kAtLeast, kAtMost };
  Target(Kind kind, double bound) : kind_(kind), bound_(bound) {}
  Kind kind_;
  double bound_;
};

// The median of `values` (the mean of the middle two for an even count),
// their min and max; NaN if `values` is empty or holds a NaN.
double Median(std::vector<double> values);
double Min(absl::Span<const double> values);
double Max(absl::Span<const double> values);

// One measured figure of a scenario (a time, a rate, a count) and its value
// in each round.
struct Series {
  // Its key in the --json report.
  std::string id;
  // Its line in the text report.
  std::string label;
  // The text report prints it with this many decimals.
  int decimals = 0;
  // One value per round; NaN where a round did not measure it.
  std::vector<double> rounds;

  // Over `rounds`, by the NaN rule above.
  double Median() const { return bench::Median(rounds); }
  double Min() const { return bench::Min(rounds); }
  double Max() const { return bench::Max(rounds); }
};

// {"median":m,"min":a,"max":b,"rounds":[r0,r1,..]}.
Json SeriesJson(const Series& series);

// One ratio of a scenario and its value in each round.
struct Ratio {
  std::string name;
  Target target = Target::None();
  // One value per round; NaN where a round did not measure it.
  std::vector<double> rounds;
  // Free text after the value in the text table, e.g. what it compares.
  std::string note;

  // Over `rounds`, by the NaN rule above.
  double Median() const { return bench::Median(rounds); }
  double Min() const { return bench::Min(rounds); }
  double Max() const { return bench::Max(rounds); }
};

// {"scenario":"<scenario>","machine":MachineJson(machine)}: how every
// scenario's --json report starts; the scenario adds its keys after these.
Json StartReportJson(absl::string_view scenario, const MachineInfo& machine);

// Adds the blocks "ratios", "ratios_min", "ratios_max", "targets" and
// "targets_met" above to the object *report, after its keys so far.
// REQUIRES: *report is an object (or null, which becomes one).
void AddRatiosJson(absl::Span<const Ratio> ratios, Json* report);

// Prints the ratios as a table: name, median (with [min, max] when there
// was more than one round), target, met / MISSED / not run, note.
void PrintRatios(absl::Span<const Ratio> ratios, std::ostream& out);

}  // namespace psdb::bench

#endif  // PSDB_TOOLS_BENCH_REPORT_H_
