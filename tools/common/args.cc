#include "tools/common/args.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"

extern char** environ;

namespace psdb::tools {

absl::StatusOr<Args> Args::Parse(int argc, const char* const* argv, int begin,
                                 const std::vector<std::string>& bool_flags) {
  Args args;
  bool flags_done = false;
  for (int i = begin; i < argc; ++i) {
    absl::string_view word = argv[i];
    if (flags_done || word.size() < 3 || word.substr(0, 2) != "--") {
      if (word == "--") {
        flags_done = true;
        continue;
      }
      args.positional_.emplace_back(word);
      continue;
    }
    absl::string_view body = word.substr(2);
    std::string name;
    std::string value;
    const size_t eq = body.find('=');
    if (eq != absl::string_view::npos) {
      name = std::string(body.substr(0, eq));
      value = std::string(body.substr(eq + 1));
    } else {
      name = std::string(body);
      const bool is_bool = std::find(bool_flags.begin(), bool_flags.end(),
                                     name) != bool_flags.end();
      if (is_bool) {
        value = "true";
      } else if (i + 1 < argc) {
        value = argv[++i];
      } else {
        return absl::InvalidArgumentError(
            absl::StrCat("flag --", name, " needs a value"));
      }
    }
    if (name.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("malformed flag '", word, "'"));
    }
    args.flags_[name] = value;
  }
  return args;
}

absl::Status Args::CheckKnown(const std::vector<std::string>& known) const {
  for (const auto& [name, value] : flags_) {
    if (std::find(known.begin(), known.end(), name) == known.end()) {
      return absl::InvalidArgumentError(absl::StrCat("unknown flag --", name));
    }
  }
  return absl::OkStatus();
}

bool Args::Has(absl::string_view name) const {
  return flags_.find(name) != flags_.end();
}

std::string Args::GetString(absl::string_view name,
                            absl::string_view def) const {
  auto it = flags_.find(name);
  return it == flags_.end() ? std::string(def) : it->second;
}

absl::StatusOr<int64_t> Args::GetInt(absl::string_view name, int64_t def,
                                     int64_t min, int64_t max) const {
  auto it = flags_.find(name);
  if (it == flags_.end()) return def;
  int64_t v = 0;
  if (!absl::SimpleAtoi(it->second, &v)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--", name, "='", it->second, "' is not an integer"));
  }
  if (v < min || v > max) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--", name, "=", v, " is out of range [", min, ", ", max, "]"));
  }
  return v;
}

absl::StatusOr<double> Args::GetDouble(absl::string_view name, double def,
                                       double min, double max) const {
  auto it = flags_.find(name);
  if (it == flags_.end()) return def;
  double v = 0;
  if (!absl::SimpleAtod(it->second, &v) || !std::isfinite(v)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--", name, "='", it->second, "' is not a number"));
  }
  if (v < min || v > max) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--", name, "=", v, " is out of range [", min, ", ", max, "]"));
  }
  return v;
}

absl::StatusOr<bool> Args::GetBool(absl::string_view name, bool def) const {
  auto it = flags_.find(name);
  if (it == flags_.end()) return def;
  bool v = false;
  if (!absl::SimpleAtob(it->second, &v)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--", name, "='", it->second, "' is not a boolean"));
  }
  return v;
}

absl::StatusOr<std::vector<uint64_t>> Args::GetUint64List(
    absl::string_view name) const {
  std::vector<uint64_t> out;
  auto it = flags_.find(name);
  if (it == flags_.end()) return out;
  for (absl::string_view part :
       absl::StrSplit(it->second, ',', absl::SkipWhitespace())) {
    uint64_t v = 0;
    if (!absl::SimpleAtoi(part, &v)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--", name, ": '", part, "' is not an unsigned 64-bit integer"));
    }
    out.push_back(v);
  }
  if (out.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("--", name, " is empty"));
  }
  return out;
}

absl::StatusOr<std::vector<std::string>> Args::GetChoiceList(
    absl::string_view name, const std::vector<std::string>& choices) const {
  auto it = flags_.find(name);
  if (it == flags_.end()) return choices;
  std::vector<std::string> out =
      absl::StrSplit(it->second, ',', absl::SkipEmpty());
  for (const std::string& word : out) {
    if (std::find(choices.begin(), choices.end(), word) == choices.end()) {
      return absl::InvalidArgumentError(
          absl::StrCat("--", name, ": unknown value '", word, "' (one of ",
                       absl::StrJoin(choices, ", "), ")"));
    }
  }
  if (out.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("--", name, " is empty"));
  }
  return out;
}

std::map<std::string, std::string> PsVariablesInEnvironment() {
  std::map<std::string, std::string> out;
  for (char** e = environ; *e != nullptr; ++e) {
    const absl::string_view entry(*e);
    const size_t eq = entry.find('=');
    if (eq == absl::string_view::npos || eq + 1 == entry.size()) continue;
    if (!absl::StartsWith(entry, "PS_")) continue;
    out.emplace(std::string(entry.substr(0, eq)),
                std::string(entry.substr(eq + 1)));
  }
  return out;
}

}  // namespace psdb::tools
