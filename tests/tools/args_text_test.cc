#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "tests/testing/test_util.h"
#include "tools/common/args.h"
#include "tools/common/text.h"

namespace psdb::tools {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

absl::StatusOr<Args> ParseWords(std::vector<const char*> words) {
  return Args::Parse(static_cast<int>(words.size()), words.data(), 1,
                     {"json", "with-state"});
}

TEST(ArgsTest, FlagsAndPositionals) {
  ASSERT_OK_AND_ASSIGN(
      Args a, ParseWords({"prog", "--rows=10", "--table", "emb", "--json",
                          "/ckpt", "--", "--literal"}));
  EXPECT_THAT(a.positional(), ElementsAre("/ckpt", "--literal"));
  EXPECT_EQ(a.GetString("table", ""), "emb");
  ASSERT_OK_AND_ASSIGN(int64_t rows, a.GetInt("rows", 0, 1, 100));
  EXPECT_EQ(rows, 10);
  ASSERT_OK_AND_ASSIGN(bool json, a.GetBool("json"));
  EXPECT_TRUE(json);
  ASSERT_OK_AND_ASSIGN(bool ws, a.GetBool("with-state"));
  EXPECT_FALSE(ws);
  // An absent flag is its default; a given one is what it says.
  ASSERT_OK_AND_ASSIGN(bool ws_default, a.GetBool("with-state", true));
  EXPECT_TRUE(ws_default);
  ASSERT_OK_AND_ASSIGN(bool json_default, a.GetBool("json", false));
  EXPECT_TRUE(json_default);
  ASSERT_OK_AND_ASSIGN(int64_t absent, a.GetInt("dim", 64, 1, 100));
  EXPECT_EQ(absent, 64);
  EXPECT_OK(a.CheckKnown({"rows", "table", "json"}));
  EXPECT_THAT(a.CheckKnown({"rows", "json"}),
              StatusIs(absl::StatusCode::kInvalidArgument));
}

TEST(ArgsTest, BadValuesNameTheFlag) {
  ASSERT_OK_AND_ASSIGN(Args a, ParseWords({"prog", "--rows=ten", "--dim=0",
                                           "--alpha=x", "--keys=1,x"}));
  absl::StatusOr<int64_t> rows = a.GetInt("rows", 0, 1, 100);
  EXPECT_THAT(rows, StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(std::string(rows.status().message()), HasSubstr("--rows"));
  EXPECT_THAT(a.GetInt("dim", 1, 1, 100),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(a.GetDouble("alpha", 1, 0, 2),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(a.GetUint64List("keys"),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(ParseWords({"prog", "--table"}),
              StatusIs(absl::StatusCode::kInvalidArgument));
}

TEST(ArgsTest, KeyList) {
  ASSERT_OK_AND_ASSIGN(Args a,
                       ParseWords({"prog", "--keys=3,18446744073709551615,1"}));
  ASSERT_OK_AND_ASSIGN(std::vector<uint64_t> keys, a.GetUint64List("keys"));
  EXPECT_THAT(keys, ElementsAre(3u, 18446744073709551615u, 1u));
}

TEST(ArgsTest, ChoiceList) {
  const std::vector<std::string> choices = {"a", "bb", "c"};
  ASSERT_OK_AND_ASSIGN(Args none, ParseWords({"prog"}));
  ASSERT_OK_AND_ASSIGN(std::vector<std::string> all,
                       none.GetChoiceList("systems", choices));
  EXPECT_THAT(all, ElementsAre("a", "bb", "c"));
  ASSERT_OK_AND_ASSIGN(Args some, ParseWords({"prog", "--systems=c,a"}));
  ASSERT_OK_AND_ASSIGN(std::vector<std::string> picked,
                       some.GetChoiceList("systems", choices));
  EXPECT_THAT(picked, ElementsAre("c", "a"));
  ASSERT_OK_AND_ASSIGN(Args bad, ParseWords({"prog", "--systems=a,b"}));
  absl::StatusOr<std::vector<std::string>> got =
      bad.GetChoiceList("systems", choices);
  EXPECT_THAT(got, StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_EQ(got.status().message(),
            "--systems: unknown value 'b' (one of a, bb, c)");
  ASSERT_OK_AND_ASSIGN(Args empty, ParseWords({"prog", "--systems=,"}));
  EXPECT_THAT(empty.GetChoiceList("systems", choices),
              StatusIs(absl::StatusCode::kInvalidArgument));
}

TEST(TextTest, FloatsRoundTripShortest) {
  std::string s;
  AppendFloat(0.1f, false, &s);
  EXPECT_EQ(s, "0.1");
  s.clear();
  AppendFloat(-1.5e-7f, false, &s);
  EXPECT_EQ(std::stof(s), -1.5e-7f);
  s.clear();
  AppendFloat(std::numeric_limits<float>::quiet_NaN(), true, &s);
  EXPECT_EQ(s, "null");
  s.clear();
  AppendFloat(-std::numeric_limits<float>::infinity(), false, &s);
  EXPECT_EQ(s, "-inf");
}

}  // namespace
}  // namespace psdb::tools
