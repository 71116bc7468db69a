// Tests of tools/common/sibling_binary.h: a program found in a given
// directory or beside the running one, and the NotFound that names where it
// looked when it is missing, not executable or not a file.
#include "tools/common/sibling_binary.h"

#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/test_util.h"

namespace psdb::tools {
namespace {

using ::testing::HasSubstr;

// Writes a file at `path` with permission bits `mode`.
void WriteFile(const std::string& path, mode_t mode) {
  std::ofstream(path) << "#!/bin/sh\n";
  ASSERT_EQ(chmod(path.c_str(), mode), 0) << path;
}

TEST(SiblingBinaryTest, FindsAnExecutableInTheGivenDirectory) {
  testing::ScratchDir dir;
  WriteFile(dir.Sub("ps-server"), 0755);
  const absl::StatusOr<std::string> found =
      SiblingBinary("ps-server", dir.path());
  ASSERT_TRUE(found.ok()) << found.status();
  EXPECT_EQ(*found, dir.Sub("ps-server"));
}

TEST(SiblingBinaryTest, NamesThePathWhenMissingNotExecutableOrADirectory) {
  testing::ScratchDir dir;
  WriteFile(dir.Sub("plain"), 0644);
  std::filesystem::create_directory(dir.Sub("folder"));
  for (const char* name : {"missing", "plain", "folder"}) {
    const absl::StatusOr<std::string> found = SiblingBinary(name, dir.path());
    EXPECT_EQ(found.status(),
              absl::NotFoundError(absl::StrCat(
                  name, " not found: no executable file ", dir.Sub(name))))
        << name;
  }
}

TEST(SiblingBinaryTest, WithoutADirectoryLooksBesideThisProgram) {
  const std::filesystem::path self =
      std::filesystem::read_symlink("/proc/self/exe");
  // This test binary is itself beside this test binary.
  const absl::StatusOr<std::string> found =
      SiblingBinary(self.filename().string());
  ASSERT_TRUE(found.ok()) << found.status();
  EXPECT_EQ(*found, self.string());
  // A missing one: the message names the path and the program it is
  // beside.
  const absl::StatusOr<std::string> missing = SiblingBinary("no-such-program");
  EXPECT_EQ(missing.status(),
            absl::NotFoundError(
                absl::StrCat("no-such-program not found: no executable file ",
                             (self.parent_path() / "no-such-program").string(),
                             " (beside ", self.string(), ")")));
}

}  // namespace
}  // namespace psdb::tools
