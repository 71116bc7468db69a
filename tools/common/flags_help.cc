#include "tools/common/flags_help.h"

#include <utility>

#include "absl/container/flat_hash_set.h"
#include "absl/flags/usage.h"
#include "absl/flags/usage_config.h"
#include "absl/strings/match.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"

namespace psdb::tools {
namespace {

// "x/parse.cc" -> "x/parse"; only the last component's extension goes.
absl::string_view WithoutExtension(absl::string_view path) {
  const size_t slash = path.rfind('/');
  const size_t dot = path.rfind('.');
  if (dot == absl::string_view::npos ||
      (slash != absl::string_view::npos && dot < slash)) {
    return path;
  }
  return path.substr(0, dot);
}

bool IsFileOf(absl::string_view path, absl::string_view file) {
  if (file.empty() || !absl::EndsWith(path, file)) return false;
  return path.size() == file.size() || file.front() == '/' ||
         path[path.size() - file.size() - 1] == '/';
}

}  // namespace

std::string FlagsHelpName(absl::string_view path,
                          const std::vector<FlagsHelpGroup>& groups) {
  for (const FlagsHelpGroup& group : groups) {
    if (IsFileOf(path, group.file)) return group.title;
  }
  const std::vector<absl::string_view> parts =
      absl::StrSplit(path, '/', absl::SkipEmpty());
  if (parts.empty()) return "";
  // Abseil's own flags (--helpfull): from the last "absl" directory, the
  // library's own layout rather than where it was built.
  for (size_t i = parts.size() - 1; i-- > 0;) {
    if (parts[i] == "absl") {
      return std::string(WithoutExtension(absl::StrJoin(
          std::vector<absl::string_view>(parts.begin() + i, parts.end()),
          "/")));
    }
  }
  return std::string(WithoutExtension(parts.back()));
}

void SetFlagsHelp(absl::string_view usage, std::vector<FlagsHelpGroup> groups) {
  absl::SetProgramUsageMessage(usage);
  absl::flat_hash_set<std::string> titles;
  for (const FlagsHelpGroup& group : groups) titles.insert(group.title);
  // absl hands the filters the name normalize_filename made; naming it
  // again is the identity for a title, so the filter holds either way.
  auto listed = [groups, titles](absl::string_view path) {
    return titles.contains(FlagsHelpName(path, groups));
  };
  absl::FlagsUsageConfig config;
  config.contains_helpshort_flags = listed;
  config.contains_help_flags = listed;
  config.normalize_filename = [groups =
                                   std::move(groups)](absl::string_view path) {
    return FlagsHelpName(path, groups);
  };
  absl::SetFlagsUsageConfig(config);
}

}  // namespace psdb::tools
