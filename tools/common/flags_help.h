// How a psdb binary built on absl::flags says what it takes: its usage
// line, and --help listing the flags of the files it names (absl's default
// --help lists only flags from a file named after the program, which
// "ps-server" and ps_server_main.cc are not, so it listed none).
//
// Thread-safety: call once from main, before absl::ParseCommandLine.
#ifndef PSDB_TOOLS_COMMON_FLAGS_HELP_H_
#define PSDB_TOOLS_COMMON_FLAGS_HELP_H_

#include <string>
#include <vector>

#include "absl/strings/string_view.h"

namespace psdb::tools {

// Sets `usage` as the program's usage message and makes --help (and
// --helpshort) list the flags defined in files whose path contains one of
// `flag_files` (e.g. "ps_server_main.cc", "node_config_flags.cc").
void SetFlagsHelp(absl::string_view usage, std::vector<std::string> flag_files);

}  // namespace psdb::tools

#endif  // PSDB_TOOLS_COMMON_FLAGS_HELP_H_
