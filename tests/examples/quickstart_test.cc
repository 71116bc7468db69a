// Runs build/examples/quickstart into a scratch directory and checks what a
// new user sees: the pulled rows, the changed rows after a push, and the
// ps-dump info of the checkpoint naming the table and its row count; then
// that the checkpoint verifies.
#include <cstdio>
#include <string>

#include "absl/strings/str_join.h"
#include "tests/testing/test_util.h"
#include "tools/dump/checkpoint_reader.h"
#include "tools/dump/dump.h"

namespace psdb {
namespace {

using ::testing::ContainsRegex;
using ::testing::HasSubstr;

std::pair<int, std::string> Shell(const std::string& command) {
  std::string out;
  FILE* p = popen(command.c_str(), "r");
  if (p == nullptr) return {-1, ""};
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof(buf), p)) > 0) out.append(buf, n);
  const int status = pclose(p);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, out};
}

TEST(QuickstartTest, RunsIntoADirectoryAndPrintsTheCheckpointInfo) {
  testing::ScratchDir dir;
  const std::string bin = testing::BuiltBinary("examples/quickstart");
  auto [code, out] = Shell(bin + " " + dir.path() + " 2>&1");
  ASSERT_EQ(code, 0) << out;
  EXPECT_THAT(out, HasSubstr("pulled (initial values):\n  key 42 "));
  EXPECT_THAT(out, HasSubstr("pulled after one push:\n  key 42 "));
  EXPECT_THAT(out, HasSubstr("checkpoint written to " + dir.path() +
                             "/checkpoint/ckpt-"));
  // ps-dump info's table line: name, dim 8, Adagrad, 8 state floats, 3 rows.
  EXPECT_THAT(out, ContainsRegex("user_emb +8 +adagrad\\(lr=0.1\\) +8 +"
                                 "[^ ]+ +0 +[0-9]+ +3 +[0-9]+\n"));

  ASSERT_OK_AND_ASSIGN(auto reader,
                       dump::CheckpointReader::Open(dir.Sub("checkpoint")));
  ASSERT_OK_AND_ASSIGN(dump::VerifyReport report, dump::Verify(*reader));
  EXPECT_TRUE(report.ok()) << absl::StrJoin(report.errors, "\n");
  EXPECT_EQ(report.rows, 3u);
}

TEST(QuickstartTest, RejectsExtraArguments) {
  const std::string bin = testing::BuiltBinary("examples/quickstart");
  EXPECT_EQ(Shell(bin + " a b 2>/dev/null").first, 2);
}

}  // namespace
}  // namespace psdb
