#include "tools/common/flags_help.h"

#include <utility>

#include "absl/flags/usage.h"
#include "absl/flags/usage_config.h"
#include "absl/strings/match.h"

namespace psdb::tools {

void SetFlagsHelp(absl::string_view usage,
                  std::vector<std::string> flag_files) {
  absl::SetProgramUsageMessage(usage);
  auto listed = [files = std::move(flag_files)](absl::string_view path) {
    for (const std::string& file : files) {
      if (absl::StrContains(path, file)) return true;
    }
    return false;
  };
  absl::FlagsUsageConfig config;
  config.contains_helpshort_flags = listed;
  config.contains_help_flags = listed;
  absl::SetFlagsUsageConfig(config);
}

}  // namespace psdb::tools
