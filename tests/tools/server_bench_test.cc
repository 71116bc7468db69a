// ps-bench server smoke test: at toy size the scenario starts a ps-server and
// a redis-server, runs all three systems, stops them and prints one JSON
// object with every ratio, finite and positive. Speed is not asserted here
// (benchmarks measure speed; tests never do).
#include <cmath>
#include <string>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "tests/testing/child_process.h"
#include "tests/testing/test_util.h"

namespace psdb::testing {
namespace {

using ::testing::HasSubstr;

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

TEST(ServerBenchTest, JsonHasEveryRatio) {
  if (RunShell("command -v redis-server").exit_code != 0) {
    GTEST_SKIP() << "redis-server is not installed (dev.sh deps installs it)";
  }
  ScratchDir dir;
  // The subshell keeps the progress lines on stderr out of the output.
  const ShellResult r = RunShell(absl::StrCat(
      "(", BuiltBinary("tools/ps-bench"),
      " server --rows=4096 --batch_keys=256 --batches=3 --warmup_batches=1 "
      "--json --dir=",
      dir.path(), " 2>/dev/null)"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  ASSERT_FALSE(r.output.empty());
  EXPECT_EQ(r.output.front(), '{');
  EXPECT_THAT(r.output, HasSubstr("\"scenario\":\"server\""));
  for (const char* name :
       {"psdb_vs_redis_pull", "psdb_vs_redis_push", "psdb_vs_tcp_limit_pull"}) {
    const double v = Ratio(r.output, name);
    EXPECT_TRUE(std::isfinite(v) && v > 0) << name << " = " << v << "\n"
                                           << r.output;
  }
}

}  // namespace
}  // namespace psdb::testing
