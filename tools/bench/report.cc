#include "tools/bench/report.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_format.h"
#include "absl/strings/string_view.h"

namespace psdb::bench {
namespace {

bool AnyNan(absl::Span<const double> values) {
  return std::any_of(values.begin(), values.end(),
                     [](double v) { return std::isnan(v); });
}

// {name: value(ratio), ...} over `ratios` (only those with a target if
// targets_only).
template <typename Value>
Json RatioObject(absl::Span<const Ratio> ratios, bool targets_only,
                 Value value) {
  Json object = Json::object();
  for (const Ratio& r : ratios) {
    if (targets_only && !r.target.has_target()) continue;
    object[r.name] = value(r);
  }
  return object;
}

}  // namespace

std::string Target::Text() const {
  switch (kind_) {
    case Kind::kAtLeast:
      return absl::StrFormat(">= %g", bound_);
    case Kind::kAtMost:
      return absl::StrFormat("<= %g", bound_);
    case Kind::kNone:
      break;
  }
  return "";
}

bool Target::Met(double value) const {
  switch (kind_) {
    case Kind::kAtLeast:
      return value >= bound_;
    case Kind::kAtMost:
      return value <= bound_;
    case Kind::kNone:
      break;
  }
  return false;
}

double Median(std::vector<double> values) {
  if (values.empty() || AnyNan(values)) return NAN;
  const size_t mid = values.size() / 2;
  std::nth_element(values.begin(), values.begin() + mid, values.end());
  if (values.size() % 2 == 1) return values[mid];
  const double upper = values[mid];
  const double lower = *std::max_element(values.begin(), values.begin() + mid);
  return (lower + upper) / 2;
}

double Min(absl::Span<const double> values) {
  if (values.empty() || AnyNan(values)) return NAN;
  return *std::min_element(values.begin(), values.end());
}

double Max(absl::Span<const double> values) {
  if (values.empty() || AnyNan(values)) return NAN;
  return *std::max_element(values.begin(), values.end());
}

Json SeriesJson(const Series& series) {
  return Json{{"median", series.Median()},
              {"min", series.Min()},
              {"max", series.Max()},
              {"rounds", series.rounds}};
}

Json StartReportJson(absl::string_view scenario, const MachineInfo& machine) {
  return Json{{"scenario", std::string(scenario)},
              {"machine", MachineJson(machine)}};
}

void AddRatiosJson(absl::Span<const Ratio> ratios, Json* report) {
  Json& j = *report;
  j["ratios"] =
      RatioObject(ratios, false, [](const Ratio& r) { return r.Median(); });
  j["ratios_min"] =
      RatioObject(ratios, false, [](const Ratio& r) { return r.Min(); });
  j["ratios_max"] =
      RatioObject(ratios, false, [](const Ratio& r) { return r.Max(); });
  j["targets"] =
      RatioObject(ratios, true, [](const Ratio& r) { return r.target.Text(); });
  j["targets_met"] = RatioObject(ratios, true, [](const Ratio& r) -> Json {
    const double v = r.Median();
    if (std::isnan(v)) return nullptr;
    return r.target.Met(v);
  });
}

void PrintRatios(absl::Span<const Ratio> ratios, std::ostream& out) {
  bool rounds = false;
  for (const Ratio& r : ratios) rounds = rounds || r.rounds.size() > 1;
  // The [min, max] column only when some ratio had several rounds.
  auto row = [&](absl::string_view name, absl::string_view value,
                 absl::string_view range, absl::string_view target,
                 absl::string_view verdict, absl::string_view note) {
    std::string line = absl::StrFormat("%-32s %8s ", name, value);
    if (rounds) absl::StrAppendFormat(&line, "%-19s ", range);
    absl::StrAppendFormat(&line, "%-8s %-7s %s", target, verdict, note);
    line.erase(line.find_last_not_of(' ') + 1);
    out << line << "\n";
  };
  row("ratio", rounds ? "median" : "value", "[min, max]", "target", "", "");
  for (const Ratio& r : ratios) {
    const double v = r.Median();
    const bool measured = !std::isnan(v);
    row(r.name, measured ? absl::StrFormat("%.3f", v) : "-",
        measured ? absl::StrFormat("[%.3f, %.3f]", r.Min(), r.Max()) : "",
        r.target.has_target() ? r.target.Text() : "-",
        !r.target.has_target() ? ""
        : !measured            ? "not run"
        : r.target.Met(v)      ? "met"
                               : "MISSED",
        r.note);
  }
}

}  // namespace psdb::bench
