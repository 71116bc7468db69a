// How every ps-bench scenario reports its ratios: one place that writes the
// `--json` blocks and the text table, so the four scenarios agree on shape.
//
// A scenario measures psdb and its peers, and reports ratios (psdb's figure
// over the peer's). When it measures in several rounds (rounds.h), each ratio
// has one value per round; the report gives the median, and the min and max
// beside it, so a reader sees how far a noisy machine moved the figure.
//
// JSON (each object keyed by ratio name, in the scenario's order):
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

#include "absl/types/span.h"

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

// One ratio of a scenario and its value in each round.
struct Ratio {
  std::string name;
  Target target = Target::None();
  // One value per round; NaN where a round did not measure it.
  std::vector<double> rounds;
  // Free text after the value in the text table, e.g. what it compares.
  std::string note;

  // Over `rounds`; NaN if empty or if any round is NaN.
  double Median() const;
  double Min() const;
  double Max() const;
};

// The median of `values` (the mean of the middle two for an even count);
// NaN if empty or if any value is NaN.
double Median(std::vector<double> values);

// Appends `"ratios":{..},"ratios_min":{..},"ratios_max":{..},"targets":{..},
// "targets_met":{..}` (no surrounding braces, no leading comma) to *json.
void AppendRatiosJson(absl::Span<const Ratio> ratios, std::string* json);

// Prints the ratios as a table: name, median (with [min, max] when there
// was more than one round), target, met / MISSED / not run, note.
void PrintRatios(absl::Span<const Ratio> ratios, std::ostream& out);

}  // namespace psdb::bench

#endif  // PSDB_TOOLS_BENCH_REPORT_H_
