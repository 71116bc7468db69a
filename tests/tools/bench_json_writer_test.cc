// Tests of ps-bench's one JSON writer (tools/bench/json_writer.h) and the
// blocks every report starts with (report.h, machine.h): the exact text of
// a small report, NaN and infinities as null, integral doubles as integers,
// the shortest round-trip form of the others, keys in the order added,
// strings escaped.
#include <cmath>
#include <cstdint>
#include <limits>
#include <sstream>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "tools/bench/json_writer.h"
#include "tools/bench/machine.h"
#include "tools/bench/report.h"

namespace psdb::bench {
namespace {

TEST(BenchJsonWriterTest, ASmallReportExactly) {
  const MachineInfo machine{.cores = 2,
                            .cpu_model = "Test CPU @ 2.0GHz",
                            .memory_bytes = uint64_t{24} << 30};
  Json report = StartReportJson("toy", machine);
  report["params"] = {{"rows", uint64_t{20000}},
                      {"alpha", 1.05},
                      {"min_seconds", 0.0},
                      {"checkpoint_first", false},
                      {"kinds", std::vector<std::string>{"a", "b"}}};
  report["figures"] = {
      {"rate", SeriesJson({.id = "rate", .rounds = {1500.5, 1000, 2000}})}};
  report["ratios_cpu"] = {{"x", NAN}};
  AddRatiosJson(
      {{.name = "psdb_vs_peer", .target = Target::AtLeast(2), .rounds = {2.5}},
       {.name = "not_run", .target = Target::AtMost(1), .rounds = {NAN}}},
      &report);
  std::ostringstream out;
  WriteJson(report, out);
  EXPECT_EQ(out.str(),
            "{\"scenario\":\"toy\","
            "\"machine\":{\"cores\":2,\"cpu\":\"Test CPU @ 2.0GHz\","
            "\"memory_bytes\":25769803776},"
            "\"params\":{\"rows\":20000,\"alpha\":1.05,\"min_seconds\":0,"
            "\"checkpoint_first\":false,\"kinds\":[\"a\",\"b\"]},"
            "\"figures\":{\"rate\":{\"median\":1500.5,\"min\":1000,"
            "\"max\":2000,\"rounds\":[1500.5,1000,2000]}},"
            "\"ratios_cpu\":{\"x\":null},"
            "\"ratios\":{\"psdb_vs_peer\":2.5,\"not_run\":null},"
            "\"ratios_min\":{\"psdb_vs_peer\":2.5,\"not_run\":null},"
            "\"ratios_max\":{\"psdb_vs_peer\":2.5,\"not_run\":null},"
            "\"targets\":{\"psdb_vs_peer\":\">= 2\",\"not_run\":\"<= 1\"},"
            "\"targets_met\":{\"psdb_vs_peer\":true,\"not_run\":null}}\n");
}

TEST(BenchJsonWriterTest, NonFiniteNumbersAreNull) {
  const double inf = std::numeric_limits<double>::infinity();
  EXPECT_EQ(JsonLine(Json::array({NAN, inf, -inf, 1.5})),
            "[null,null,null,1.5]");
  EXPECT_EQ(JsonLine(Json{{"nested", {{"deeper", Json::array({NAN})}}}}),
            "{\"nested\":{\"deeper\":[null]}}");
}

TEST(BenchJsonWriterTest, IntegralDoublesAreIntegers) {
  EXPECT_EQ(JsonLine(Json::array({2.0, -3.0, 0.0, 4194304.0, 1e15})),
            "[2,-3,0,4194304,1000000000000000]");
  // At 2^53 and beyond: the double's own form.
  EXPECT_EQ(JsonLine(Json::array({9007199254740992.0, 1e300})),
            "[9.007199254740992e+15,1e+300]");
  // Integers stay integers, unsigned and signed alike.
  EXPECT_EQ(JsonLine(Json::array({uint64_t{18446744073709551615u},
                                  int64_t{-9223372036854775807}})),
            "[18446744073709551615,-9223372036854775807]");
}

TEST(BenchJsonWriterTest, OtherDoublesReadBackBitForBit) {
  for (const double v : {0.1, 1.0 / 3, 2.0 / 3 * 1e-7, 123456.789e10,
                         0.30000000000000004, 5e-324}) {
    const std::string text = JsonLine(Json(v));
    EXPECT_EQ(Json::parse(text).get<double>(), v) << text;
  }
  EXPECT_EQ(JsonLine(Json(0.1)), "0.1");
  EXPECT_EQ(JsonLine(Json(0.30000000000000004)), "0.30000000000000004");
}

TEST(BenchJsonWriterTest, KeysKeepTheirOrderAndStringsAreEscaped) {
  Json j;
  j["zeta"] = 1;
  j["alpha"] = 2;
  j["mid"] = "quote \" backslash \\ newline \n tab \t bell \x07";
  EXPECT_EQ(JsonLine(j),
            "{\"zeta\":1,\"alpha\":2,\"mid\":\"quote \\\" backslash \\\\ "
            "newline \\n tab \\t bell \\u0007\"}");
  // Bytes that are not UTF-8 (a CPU name read from /proc) become U+FFFD
  // rather than failing the report.
  EXPECT_EQ(JsonLine(Json("a\xff"
                          "b")),
            "\"a\xef\xbf\xbd"
            "b\"");
  // UTF-8 passes through as it is.
  EXPECT_EQ(JsonLine(Json("\xc2\xb5s")), "\"\xc2\xb5s\"");
}

}  // namespace
}  // namespace psdb::bench
