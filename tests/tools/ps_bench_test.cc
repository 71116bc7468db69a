// ps-bench smoke test: the `store` scenario at toy size runs as a real
// process and prints one JSON object with every ratio, finite and positive.
// Speed is not asserted here (benchmarks measure speed; tests never do).
#include <cmath>
#include <cstdio>
#include <sstream>
#include <string>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "tests/testing/test_util.h"
#include "tools/bench/scenario.h"

namespace psdb::bench {
namespace {

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

// The number after "\"name\":" inside the "ratios" object.
double Ratio(const std::string& json, const std::string& name) {
  const size_t ratios = json.find("\"ratios\":{");
  if (ratios == std::string::npos) return NAN;
  const std::string field = "\"" + name + "\":";
  const size_t at = json.find(field, ratios);
  if (at == std::string::npos) return NAN;
  const size_t begin = at + field.size();
  const size_t end = json.find_first_of(",}", begin);
  double v = NAN;
  if (!absl::SimpleAtod(json.substr(begin, end - begin), &v)) return NAN;
  return v;
}

TEST(PsBenchTest, StoreScenarioJsonHasEveryRatio) {
  testing::ScratchDir dir;
  const std::string bin = testing::BuiltBinary("tools/ps-bench");
  auto [code, out] = Shell(absl::StrCat(
      bin, " store --rows=20000 --batches=5 --json --dir=", dir.Sub("bench"),
      " 2>/dev/null"));
  ASSERT_EQ(code, 0) << out;
  ASSERT_EQ(out.front(), '{');
  ASSERT_EQ(out.substr(out.size() - 2), "}\n");
  EXPECT_THAT(out, HasSubstr("\"scenario\":\"store\""));
  EXPECT_THAT(out, HasSubstr("\"rows\":20000"));
  for (const char* name :
       {"mem_vs_limit_pull", "mem_vs_limit_push", "tiered_vs_rocksdb_pull",
        "tiered_vs_rocksdb_push", "incremental_vs_full_checkpoint"}) {
    const double v = Ratio(out, name);
    EXPECT_TRUE(std::isfinite(v) && v > 0) << name << " = " << v << "\n" << out;
  }
}

TEST(PsBenchTest, UsageErrorsExit2) {
  const char* no_scenario[] = {"ps-bench"};
  std::ostringstream out, err;
  EXPECT_EQ(RunBench(1, no_scenario, out, err), 2);
  const char* unknown[] = {"ps-bench", "nope"};
  EXPECT_EQ(RunBench(2, unknown, out, err), 2);
  const char* bad_flag[] = {"ps-bench", "store", "--rows=0"};
  EXPECT_EQ(RunBench(3, bad_flag, out, err), 2);
  EXPECT_THAT(err.str(), HasSubstr("--rows=0 is out of range"));
  const char* unknown_flag[] = {"ps-bench", "store", "--bogus=1"};
  EXPECT_EQ(RunBench(3, unknown_flag, out, err), 2);
  const char* help[] = {"ps-bench", "help"};
  EXPECT_EQ(RunBench(2, help, out, err), 0);
  EXPECT_THAT(out.str(), HasSubstr("store"));
}

}  // namespace
}  // namespace psdb::bench
