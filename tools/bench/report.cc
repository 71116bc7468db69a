#include "tools/bench/report.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_format.h"
#include "absl/strings/string_view.h"
#include "tools/common/text.h"

namespace psdb::bench {
namespace {

bool AnyNan(const std::vector<double>& values) {
  return std::any_of(values.begin(), values.end(),
                     [](double v) { return std::isnan(v); });
}

// Appends `"key":{"name":value,...}` with value(ratio) written by `write`.
template <typename Write>
void AppendObject(const char* key, absl::Span<const Ratio> ratios,
                  bool targets_only, Write write, std::string* json) {
  *json += "\"";
  *json += key;
  *json += "\":{";
  bool first = true;
  for (const Ratio& r : ratios) {
    if (targets_only && !r.target.has_target()) continue;
    if (!first) *json += ",";
    first = false;
    tools::AppendJsonString(r.name, json);
    *json += ":";
    write(r, json);
  }
  *json += "}";
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

double Ratio::Median() const { return bench::Median(rounds); }

double Ratio::Min() const {
  if (rounds.empty() || AnyNan(rounds)) return NAN;
  return *std::min_element(rounds.begin(), rounds.end());
}

double Ratio::Max() const {
  if (rounds.empty() || AnyNan(rounds)) return NAN;
  return *std::max_element(rounds.begin(), rounds.end());
}

void AppendRatiosJson(absl::Span<const Ratio> ratios, std::string* json) {
  auto number = [](double (Ratio::*stat)() const) {
    return [stat](const Ratio& r, std::string* j) {
      tools::AppendDouble((r.*stat)(), /*json=*/true, j);
    };
  };
  AppendObject("ratios", ratios, false, number(&Ratio::Median), json);
  *json += ",";
  AppendObject("ratios_min", ratios, false, number(&Ratio::Min), json);
  *json += ",";
  AppendObject("ratios_max", ratios, false, number(&Ratio::Max), json);
  *json += ",";
  AppendObject(
      "targets", ratios, true,
      [](const Ratio& r, std::string* j) {
        tools::AppendJsonString(r.target.Text(), j);
      },
      json);
  *json += ",";
  AppendObject(
      "targets_met", ratios, true,
      [](const Ratio& r, std::string* j) {
        const double v = r.Median();
        *j += std::isnan(v) ? "null" : r.target.Met(v) ? "true" : "false";
      },
      json);
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
