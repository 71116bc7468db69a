// Reading ps-bench's --json output in tests: the text of a named object,
// the numbers in it, and the check every scenario's ratio blocks pass.
// The lookups work on the text (ps-bench writes one compact object per run,
// tools/bench/json_writer.h, and a test looks fields up by name, and
// sometimes checks the text itself); ExpectRatioBlocks also parses the whole
// output (nlohmann_json), so every scenario's test checks it is one JSON
// object.
//
// Thread-safety: pure functions.
#ifndef PSDB_TESTS_TOOLS_BENCH_JSON_H_
#define PSDB_TESTS_TOOLS_BENCH_JSON_H_

#include <cmath>
#include <initializer_list>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace psdb::testing {

// The object `"key":{...}` (braces included) at its first occurrence in
// `json`, at any depth; "" if absent. Braces inside strings are skipped.
inline std::string JsonObject(const std::string& json, const std::string& key) {
  const std::string field = "\"" + key + "\":{";
  const size_t at = json.find(field);
  if (at == std::string::npos) return "";
  const size_t begin = at + field.size() - 1;
  int depth = 0;
  bool in_string = false;
  for (size_t i = begin; i < json.size(); ++i) {
    const char c = json[i];
    if (in_string) {
      if (c == '\\') {
        ++i;
      } else if (c == '"') {
        in_string = false;
      }
    } else if (c == '"') {
      in_string = true;
    } else if (c == '{') {
      ++depth;
    } else if (c == '}' && --depth == 0) {
      return json.substr(begin, i - begin + 1);
    }
  }
  return "";
}

// The number after `"name":` in `object` (first occurrence); NaN if absent,
// null or not a number.
inline double JsonNumber(const std::string& object, const std::string& name) {
  const std::string field = "\"" + name + "\":";
  const size_t at = object.find(field);
  if (at == std::string::npos) return NAN;
  const size_t begin = at + field.size();
  const size_t end = object.find_first_of(",}]", begin);
  double v = NAN;
  if (!absl::SimpleAtod(object.substr(begin, end - begin), &v)) return NAN;
  return v;
}

// The numbers of the array `"name":[...]` in `object`; empty if absent.
inline std::vector<double> JsonNumbers(const std::string& object,
                                       const std::string& name) {
  const std::string field = "\"" + name + "\":[";
  const size_t at = object.find(field);
  if (at == std::string::npos) return {};
  const size_t begin = at + field.size();
  const size_t end = object.find(']', begin);
  std::vector<double> out;
  for (absl::string_view s :
       absl::StrSplit(absl::string_view(object).substr(begin, end - begin), ',',
                      absl::SkipEmpty())) {
    double v = NAN;
    if (!absl::SimpleAtod(s, &v)) v = NAN;
    out.push_back(v);
  }
  return out;
}

// `json` is one JSON object with report.h's five blocks, and they hold
// every name: "ratios" (finite, > 0) between "ratios_min" and "ratios_max".
inline void ExpectRatioBlocks(const std::string& json,
                              std::initializer_list<const char*> names) {
  const nlohmann::json parsed =
      nlohmann::json::parse(json, /*cb=*/nullptr, /*allow_exceptions=*/false);
  ASSERT_TRUE(parsed.is_object()) << "not one JSON object:\n" << json;
  for (const char* block :
       {"ratios", "ratios_min", "ratios_max", "targets", "targets_met"}) {
    EXPECT_TRUE(parsed.contains(block) && parsed[block].is_object())
        << block << "\n"
        << json;
  }
  const std::string ratios = JsonObject(json, "ratios");
  const std::string mins = JsonObject(json, "ratios_min");
  const std::string maxs = JsonObject(json, "ratios_max");
  for (const char* name : names) {
    const double v = JsonNumber(ratios, name);
    EXPECT_TRUE(std::isfinite(v) && v > 0) << name << " = " << v << "\n"
                                           << json;
    EXPECT_LE(JsonNumber(mins, name), v) << name << "\n" << json;
    EXPECT_GE(JsonNumber(maxs, name), v) << name << "\n" << json;
  }
}

}  // namespace psdb::testing

#endif  // PSDB_TESTS_TOOLS_BENCH_JSON_H_
