// How a psdb binary built on absl::flags (ps-server, ps-scheduler) says
// what it takes: its usage line, and a --help that lists the binary's own
// flags in named groups.
//
// absl's defaults fit neither: its --help lists only flags from a file
// named after the program (which "ps-server" and its sources are not, so it
// listed none), and it names each group by the source path the compiler
// recorded, a directory of the machine that built the binary ("Flags from
// /tmp/build-7/rpc/control/node_config_flags.cc"). Here --help lists the
// groups a binary names, each under its title ("Flags from ps-server
// TLS:"), and every other name absl prints (--helpfull lists Abseil's own
// flags too) is cut to one that names no build path and no source file:
// see FlagsHelpName.
//
// Thread-safety: call SetFlagsHelp once from main, before
// absl::ParseCommandLine. FlagsHelpName is a pure function.
#ifndef PSDB_TOOLS_COMMON_FLAGS_HELP_H_
#define PSDB_TOOLS_COMMON_FLAGS_HELP_H_

#include <string>
#include <vector>

#include "absl/strings/string_view.h"

namespace psdb::tools {

// The flags one source file defines, as --help shows them.
struct FlagsHelpGroup {
  // The file, as its path in the source tree ("tools/common/tls_flags.cc"):
  // it matches a recorded path that ends with it at a '/' boundary,
  // wherever the tree was built.
  std::string file;
  // What --help calls the group: "  Flags from <title>:". No '/' and no
  // '.' (absl groups titles by what precedes a '/'; a title must not look
  // like a file).
  std::string title;
};

// Sets `usage` as the program's usage message and makes --help (and
// --helpshort) list the flags of `groups`, each under its title.
void SetFlagsHelp(absl::string_view usage, std::vector<FlagsHelpGroup> groups);

// The name --help and --helpfull show for the flags defined in the source
// file `path` (as the compiler recorded it): the title of the group whose
// file it is; else, for Abseil's own flags, the path from its last "absl"
// directory without the extension ("absl/flags/parse"); else the file's
// base name without the extension.
std::string FlagsHelpName(absl::string_view path,
                          const std::vector<FlagsHelpGroup>& groups);

}  // namespace psdb::tools

#endif  // PSDB_TOOLS_COMMON_FLAGS_HELP_H_
