// Finding the programs that ship beside a tool: ps-bench starts ps-server,
// ps-scheduler and ps-train, which the build (tools/ in the build tree) and
// an install (bin/) put in the directory ps-bench itself runs from. One
// lookup, so every scenario finds them, and fails to, the same way.
//
// Thread-safety: reads the file system and /proc/self/exe; safe from any
// thread.
#ifndef PSDB_TOOLS_COMMON_SIBLING_BINARY_H_
#define PSDB_TOOLS_COMMON_SIBLING_BINARY_H_

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace psdb::tools {

// The path of the program `name` in `dir`, or, with an empty `dir` (no
// --bin flag given), in the directory of the running program (the target of
// /proc/self/exe): "<dir>/<name>". NotFound when no executable regular file
// is there, naming the path it looked at (and, for the running program's
// directory, the program); Internal when /proc/self/exe cannot be read.
// REQUIRES: `name` is a file name, without '/'.
absl::StatusOr<std::string> SiblingBinary(absl::string_view name,
                                          absl::string_view dir = "");

}  // namespace psdb::tools

#endif  // PSDB_TOOLS_COMMON_SIBLING_BINARY_H_
