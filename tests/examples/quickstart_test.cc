// Runs build/examples/quickstart into a scratch directory and checks what a
// new user sees: the pulled rows, the changed rows after a push, and the
// checkpoint read back naming the table, its spec and its row count; then
// that the checkpoint verifies (ps-dump's library).
#include <cstdio>
#include <string>

#include "absl/strings/str_join.h"
#include "psdb/checkpoint_reader.h"
#include "tests/testing/child_process.h"
#include "tests/testing/test_util.h"
#include "tools/dump/dump.h"

namespace psdb {
namespace {

using ::testing::ContainsRegex;
using ::testing::HasSubstr;

TEST(QuickstartTest, RunsIntoADirectoryAndPrintsTheCheckpointInfo) {
  testing::ScratchDir dir;
  const std::string bin = testing::BuiltBinary("examples/quickstart");
  auto [code, out] = testing::RunShell(bin + " " + dir.path());
  ASSERT_EQ(code, 0) << out;
  EXPECT_THAT(out, HasSubstr("pulled (initial values):\n  key 42 "));
  EXPECT_THAT(out, HasSubstr("pulled after one push:\n  key 42 "));
  EXPECT_THAT(out, HasSubstr("checkpoint written to " + dir.path() +
                             "/checkpoint/ckpt-"));
  // The manifest's table line: name, dim 8, Adagrad, 3 rows.
  EXPECT_THAT(out, ContainsRegex("checkpoint ckpt-[0-9]+-[0-9]+: step 1\n"
                                 "  table user_emb: dim 8, adagrad, 3 rows\n"));

  ASSERT_OK_AND_ASSIGN(auto reader,
                       ckpt::CheckpointReader::Open(dir.Sub("checkpoint")));
  ASSERT_OK_AND_ASSIGN(ckpt::VerifyReport report, ckpt::Verify(*reader));
  EXPECT_TRUE(report.ok()) << absl::StrJoin(report.errors, "\n");
  EXPECT_EQ(report.rows, 3u);
}

TEST(QuickstartTest, RejectsExtraArguments) {
  const std::string bin = testing::BuiltBinary("examples/quickstart");
  EXPECT_EQ(testing::RunShell(bin + " a b").exit_code, 2);
}

}  // namespace
}  // namespace psdb
