// Command-line parsing shared by psdb's tools (ps-dump, ps-bench, ...).
//
// Tools take a subcommand and GNU-style flags:
//   ps-dump export --table=emb --format tsv --limit=10 /ckpt
// Args::Parse splits argv into positional words and flags (`--name=value`,
// `--name value`, or a bare `--name` for booleans; `--` ends the flags).
// Typed getters validate values and say which flag was wrong, so a tool can
// print the message with its usage text and exit 2. Deliberately small:
// absl::flags is process-global, which fits subcommands with per-command
// flag sets badly.
//
// Thread-safety: plain value; not synchronized.
#ifndef PSDB_TOOLS_COMMON_ARGS_H_
#define PSDB_TOOLS_COMMON_ARGS_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace psdb::tools {

// Exit code of a tool for a usage error (missing or bad argument).
inline constexpr int kUsageExitCode = 2;

class Args {
 public:
  // Parses argv[begin..argc). `bool_flags` are the flags that take no value
  // (so `--json /dir` leaves /dir positional). InvalidArgument on a
  // malformed flag (e.g. `--` followed by nothing but `=`).
  static absl::StatusOr<Args> Parse(int argc, const char* const* argv,
                                    int begin,
                                    const std::vector<std::string>& bool_flags);

  const std::vector<std::string>& positional() const { return positional_; }

  // InvalidArgument naming the first flag not in `known`.
  absl::Status CheckKnown(const std::vector<std::string>& known) const;

  bool Has(absl::string_view name) const;
  // The flag's value, or `def` when absent.
  std::string GetString(absl::string_view name, absl::string_view def) const;
  // InvalidArgument naming the flag if the value is not an integer / not in
  // [min, max].
  absl::StatusOr<int64_t> GetInt(absl::string_view name, int64_t def,
                                 int64_t min, int64_t max) const;
  absl::StatusOr<double> GetDouble(absl::string_view name, double def,
                                   double min, double max) const;
  // A bare flag is true; `--name=true|false|1|0` also work; `def` when
  // the flag is not given.
  absl::StatusOr<bool> GetBool(absl::string_view name, bool def = false) const;
  // Comma-separated unsigned 64-bit integers (`--keys=1,2,3`).
  absl::StatusOr<std::vector<uint64_t>> GetUint64List(
      absl::string_view name) const;
  // Comma-separated words, each one of `choices` (`--systems=a,b`); all of
  // `choices` when the flag is absent. InvalidArgument naming an unknown
  // word, or an empty list.
  absl::StatusOr<std::vector<std::string>> GetChoiceList(
      absl::string_view name, const std::vector<std::string>& choices) const;

 private:
  std::vector<std::string> positional_;
  std::map<std::string, std::string, std::less<>> flags_;
};

// The PS_* variables set to a non-empty value in this process's
// environment, by name. A tool's --dry_run lists which of them it reads and
// which it ignores (rpc/control/node_config.h reads a fixed set; a misspelt
// one would otherwise go unnoticed).
std::map<std::string, std::string> PsVariablesInEnvironment();

}  // namespace psdb::tools

#endif  // PSDB_TOOLS_COMMON_ARGS_H_
