#include "tests/testing/metrics_scrape.h"

#include <cmath>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "tests/testing/child_process.h"

namespace psdb::testing {
namespace {

struct Sample {
  std::string name;
  MetricLabels labels;
  double value = 0;
};

// Parses one sample line: name{k="v",...} value [timestamp]. Label values
// psdb writes (table names, methods, codes, roles) need no escapes; a line
// with an escaped quote is still split correctly because values are read up
// to an unescaped quote.
std::optional<Sample> ParseLine(absl::string_view line) {
  if (line.empty() || line[0] == '#') return std::nullopt;
  Sample s;
  size_t i = 0;
  while (i < line.size() && line[i] != '{' && line[i] != ' ') ++i;
  s.name = std::string(line.substr(0, i));
  if (i < line.size() && line[i] == '{') {
    ++i;
    while (i < line.size() && line[i] != '}') {
      const size_t eq = line.find('=', i);
      if (eq == absl::string_view::npos || eq + 1 >= line.size()) {
        return std::nullopt;
      }
      std::string key(line.substr(i, eq - i));
      std::string value;
      size_t j = eq + 2;  // past ="
      while (j < line.size() && line[j] != '"') {
        if (line[j] == '\\' && j + 1 < line.size()) ++j;
        value.push_back(line[j++]);
      }
      s.labels[std::move(key)] = std::move(value);
      i = j + 1;
      if (i < line.size() && line[i] == ',') ++i;
    }
    ++i;  // past }
  }
  absl::string_view rest = absl::StripLeadingAsciiWhitespace(line.substr(i));
  const std::vector<absl::string_view> fields =
      absl::StrSplit(rest, ' ', absl::SkipEmpty());
  if (fields.empty()) return std::nullopt;
  if (fields[0] == "+Inf") {
    s.value = HUGE_VAL;
  } else if (!absl::SimpleAtod(fields[0], &s.value)) {
    return std::nullopt;
  }
  return s;
}

}  // namespace

absl::StatusOr<std::string> ScrapeMetrics(const std::string& address) {
  const ShellResult r = RunShell(
      absl::StrCat("curl -sf --max-time 10 http://", address, "/metrics"),
      /*merge_stderr=*/false);
  if (r.exit_code != 0) {
    return absl::UnavailableError(absl::StrCat("curl http://", address,
                                               "/metrics exited ", r.exit_code,
                                               ": ", r.output));
  }
  return r.output;
}

std::optional<double> MetricValue(absl::string_view exposition,
                                  absl::string_view name,
                                  const MetricLabels& labels) {
  for (absl::string_view line : absl::StrSplit(exposition, '\n')) {
    std::optional<Sample> s = ParseLine(line);
    if (s && s->name == name && s->labels == labels) return s->value;
  }
  return std::nullopt;
}

double MetricSum(absl::string_view exposition, absl::string_view name,
                 const MetricLabels& labels) {
  double sum = 0;
  for (absl::string_view line : absl::StrSplit(exposition, '\n')) {
    std::optional<Sample> s = ParseLine(line);
    if (!s || s->name != name) continue;
    bool match = true;
    for (const auto& [k, v] : labels) {
      auto it = s->labels.find(k);
      if (it == s->labels.end() || it->second != v) match = false;
    }
    if (match) sum += s->value;
  }
  return sum;
}

}  // namespace psdb::testing
