// What the tests of ps-server's and ps-scheduler's command lines share:
// setting the process's absl flags as a command line would, and putting
// them back (ScopedFlags; FlagsTest, a fixture whose flags go back after
// each test), the check that a --help names no build path, and a clean
// environment for the binaries' runs.
//
// Thread-safety: test-thread only (absl flags are process-wide).
#ifndef PSDB_TESTS_TOOLS_CLI_FLAGS_TESTING_H_
#define PSDB_TESTS_TOOLS_CLI_FLAGS_TESTING_H_

#include <cstdlib>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/flags/commandlineflag.h"
#include "absl/flags/reflection.h"
#include "absl/strings/match.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace psdb::testing {

// Flags set for the object's life. (absl::FlagSaver would do, but logs a
// line per flag it restores.)
class ScopedFlags {
 public:
  ScopedFlags() = default;
  ~ScopedFlags() {
    for (auto it = saved_.rbegin(); it != saved_.rend(); ++it) {
      std::string error;
      EXPECT_TRUE(it->first->ParseFrom(it->second, &error)) << error;
    }
  }
  ScopedFlags(const ScopedFlags&) = delete;
  ScopedFlags& operator=(const ScopedFlags&) = delete;

  // Parses each `value` into flag `name` as `--name=value` on the command
  // line would.
  void Set(const std::map<std::string, std::string>& flags) {
    for (const auto& [name, value] : flags) {
      absl::CommandLineFlag* flag = absl::FindCommandLineFlag(name);
      ASSERT_NE(flag, nullptr) << "no flag --" << name;
      saved_.emplace_back(flag, flag->CurrentValue());
      std::string error;
      ASSERT_TRUE(flag->ParseFrom(value, &error))
          << "--" << name << "=" << value << ": " << error;
    }
  }

 private:
  std::vector<std::pair<absl::CommandLineFlag*, std::string>> saved_;
};

// A fixture whose flags go back to what they were after each test.
class FlagsTest : public ::testing::Test {
 protected:
  void SetFlags(const std::map<std::string, std::string>& flags) {
    flags_.Set(flags);
  }

 private:
  ScopedFlags flags_;
};

// `help` (a binary's --help or --helpfull) names neither the machine that
// built it nor a source file: no /tmp/ path, no absolute path of the
// source or build tree (PSDB_SOURCE_DIR, PSDB_BINARY_DIR), no ".cc".
inline void ExpectNoBuildPaths(const std::string& help,
                               const std::string& source_dir,
                               const std::string& binary_dir) {
  EXPECT_THAT(help, ::testing::Not(::testing::HasSubstr("/tmp/")));
  EXPECT_THAT(help, ::testing::Not(::testing::HasSubstr(".cc")));
  EXPECT_THAT(help, ::testing::Not(::testing::HasSubstr(source_dir)));
  EXPECT_THAT(help, ::testing::Not(::testing::HasSubstr(binary_dir)));
}

// "env -i PATH=... [the sanitizers' *SAN_OPTIONS] ": a shell prefix that
// runs a command in an environment with no PS_* variable but those the
// command line adds after it.
inline std::string CleanEnvPrefix() {
  std::string prefix = "env -i PATH=/usr/bin:/bin";
  for (const char* name : {"ASAN_OPTIONS", "LSAN_OPTIONS", "UBSAN_OPTIONS"}) {
    if (const char* value = std::getenv(name); value != nullptr) {
      prefix += std::string(" ") + name + "='" + value + "'";
    }
  }
  return prefix + " ";
}

}  // namespace psdb::testing

#endif  // PSDB_TESTS_TOOLS_CLI_FLAGS_TESTING_H_
