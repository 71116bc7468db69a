// ps-dump's command line as a library function, so tests run the exact code
// the tool runs. See RunDump's usage text for the commands and flags.
//
// Exit codes: 0 success; 1 failure (an error, or verify found problems);
// 2 usage error (missing or bad argument).
//
// Thread-safety: not thread-safe (writes to the given streams).
#ifndef PSDB_TOOLS_DUMP_DUMP_CLI_H_
#define PSDB_TOOLS_DUMP_DUMP_CLI_H_

#include <ostream>

namespace psdb::dump {

// argv[0] is the program name, argv[1] the command.
int RunDump(int argc, const char* const* argv, std::ostream& out,
            std::ostream& err);

}  // namespace psdb::dump

#endif  // PSDB_TOOLS_DUMP_DUMP_CLI_H_
