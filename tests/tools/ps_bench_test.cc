// ps-bench smoke test: the `store` and `cache` scenarios at toy size run and
// print one JSON object with every ratio, finite and positive, in report.h's
// blocks; every scenario answers the same help words and rejects a bad
// command line with the same message and exit code 2. Speed is not asserted
// here (benchmarks measure speed; tests never do).
#include <cmath>
#include <cstdio>
#include <sstream>
#include <string>

#include "absl/strings/str_cat.h"
#include "tests/testing/child_process.h"
#include "tests/testing/test_util.h"
#include "tests/tools/bench_json.h"
#include "tools/bench/scenario.h"

namespace psdb::bench {
namespace {

using ::psdb::testing::ExpectRatioBlocks;
using ::psdb::testing::JsonNumber;
using ::psdb::testing::JsonObject;
using ::testing::HasSubstr;
using ::testing::StartsWith;

TEST(PsBenchTest, StoreScenarioJsonHasEveryRatio) {
  testing::ScratchDir dir;
  const std::string bin = testing::BuiltBinary("tools/ps-bench");
  auto [code, out] = testing::RunShell(
      absl::StrCat(bin,
                   " store --rows=20000 --batches=5 --repeats=1 "
                   "--optimizer=adam --json --dir=",
                   dir.Sub("bench"), " 2>/dev/null"),
      /*merge_stderr=*/false);
  ASSERT_EQ(code, 0) << out;
  ASSERT_EQ(out.front(), '{');
  ASSERT_EQ(out.substr(out.size() - 2), "}\n");
  EXPECT_THAT(out, HasSubstr("\"scenario\":\"store\""));
  EXPECT_THAT(out, HasSubstr("\"rows\":20000"));
  EXPECT_THAT(out, HasSubstr("\"optimizer\":\"adam\""));
  ExpectRatioBlocks(
      out, {"mem_vs_limit_pull", "mem_vs_limit_push", "tiered_vs_rocksdb_pull",
            "tiered_vs_rocksdb_push", "tiered_vs_rocksdb_cache_pull",
            "tiered_vs_rocksdb_cache_push", "incremental_vs_full_checkpoint",
            "wal_vs_checkpoint_push", "tiered_peak_rss_vs_budget_bound",
            "rocksdb_peak_rss_vs_budget_bound"});
  // Both RocksDB peers report their peak RSS.
  const std::string systems = JsonObject(out, "systems");
  for (const char* id : {"rocksdb", "rocksdb_cache", "psdb_tiered"}) {
    EXPECT_GT(JsonNumber(JsonObject(systems, id), "peak_rss_bytes"), 0) << id;
  }
  // One round: the median is the only value.
  const std::string ratios = JsonObject(out, "ratios");
  for (const char* name : {"mem_vs_limit_pull", "tiered_vs_rocksdb_push"}) {
    EXPECT_EQ(JsonNumber(JsonObject(out, "ratios_min"), name),
              JsonNumber(ratios, name));
    EXPECT_EQ(JsonNumber(JsonObject(out, "ratios_max"), name),
              JsonNumber(ratios, name));
  }
  EXPECT_EQ(JsonObject(out, "targets"),
            "{\"mem_vs_limit_pull\":\">= 0.5\",\"mem_vs_limit_push\":\">= "
            "0.5\",\"tiered_vs_rocksdb_pull\":\">= 3\","
            "\"tiered_vs_rocksdb_push\":\">= 3\","
            "\"incremental_vs_full_checkpoint\":\"<= 0.1\","
            "\"wal_vs_checkpoint_push\":\">= 0.5\","
            "\"tiered_peak_rss_vs_budget_bound\":\"<= 1\"}");
  EXPECT_THAT(JsonObject(out, "targets_met"),
              HasSubstr("\"incremental_vs_full_checkpoint\":"));
  EXPECT_TRUE(std::isfinite(
      JsonNumber(JsonObject(out, "ratios_cpu"), "mem_vs_limit_pull")));
}

TEST(PsBenchTest, CacheScenarioJsonHasEveryRatio) {
  const std::string bin = testing::BuiltBinary("tools/ps-bench");
  auto [code, out] = testing::RunShell(
      absl::StrCat(
          bin,
          " cache --ns=2000 --alphas=1.0 --capacities=0.1 --counted=20000 "
          "--gather_rows=4096 --gather_batches=4 --json 2>/dev/null"),
      /*merge_stderr=*/false);
  ASSERT_EQ(code, 0) << out;
  ASSERT_EQ(out.substr(out.size() - 2), "}\n");
  EXPECT_THAT(out, HasSubstr("\"scenario\":\"cache\""));
  ExpectRatioBlocks(
      out, {"lru_minus_che_max_pp", "lfu_vs_static_opt_min",
            "lookahead_vs_belady_min", "gather_vs_limit", "lookup_vs_limit"});
  // lookup_vs_limit has no target, so no verdict either.
  EXPECT_EQ(JsonObject(out, "targets"),
            "{\"lru_minus_che_max_pp\":\"<= 1.5\","
            "\"lfu_vs_static_opt_min\":\">= 0.97\","
            "\"lookahead_vs_belady_min\":\">= 0.95\","
            "\"gather_vs_limit\":\">= 0.5\"}");
  EXPECT_THAT(JsonObject(out, "targets_met"),
              ::testing::Not(HasSubstr("lookup_vs_limit")));
  // Each backend's Adam step; the CUDA backend's figures where this build
  // has it and the machine a device, else the reason it was not timed.
  const std::string gather = JsonObject(out, "gather");
  EXPECT_GT(JsonNumber(gather, "cpu_apply_ids_per_s"), 0) << gather;
  if (gather.find("\"cuda_skipped\":\"") != std::string::npos) {
    EXPECT_THAT(gather, HasSubstr("CUDA"));
  } else {
    EXPECT_GT(JsonNumber(gather, "cuda_gather_ids_per_s"), 0) << gather;
    ExpectRatioBlocks(out, {"cuda_vs_cpu_gather", "cuda_vs_cpu_apply"});
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

// The scenario's usage text, as `ps-bench <name> --help` prints it.
std::string Usage(const char* name) {
  const char* argv[] = {"ps-bench", name, "--help"};
  std::ostringstream out, err;
  EXPECT_EQ(RunBench(3, argv, out, err), 0);
  return out.str();
}

TEST(PsBenchTest, EveryScenarioAnswersTheSameHelpWords) {
  ASSERT_EQ(Scenarios().size(), 7);
  for (const Scenario& s : Scenarios()) {
    const std::string usage = Usage(s.name);
    EXPECT_THAT(usage, StartsWith(absl::StrCat("usage: ps-bench ", s.name)));
    for (const char* word : {"-h", "--help", "help"}) {
      std::ostringstream out, err;
      const char* argv[] = {"ps-bench", s.name, word};
      EXPECT_EQ(RunBench(3, argv, out, err), 0) << s.name << " " << word;
      EXPECT_EQ(out.str(), usage) << s.name << " " << word;
      EXPECT_EQ(err.str(), "") << s.name << " " << word;
    }
    // Help wins over a flag that would not parse.
    std::ostringstream out, err;
    const char* argv[] = {"ps-bench", s.name, "--bogus=1", "-h"};
    EXPECT_EQ(RunBench(4, argv, out, err), 0) << s.name;
    EXPECT_EQ(out.str(), usage) << s.name;
  }
}

TEST(PsBenchTest, EveryScenarioRejectsABadCommandLineTheSameWay) {
  for (const Scenario& s : Scenarios()) {
    const std::string usage = Usage(s.name);
    const std::string prefix = absl::StrCat("ps-bench ", s.name, ": ");
    struct Case {
      std::vector<const char*> args;
      std::string message;
    };
    const Case cases[] = {
        {{"--bogus=1"}, "unknown flag --bogus"},
        {{"--json", "extra"}, "unexpected argument 'extra'"},
        {{"--seed=x"}, "--seed='x' is not an integer"},
    };
    for (const Case& c : cases) {
      std::vector<const char*> argv = {"ps-bench", s.name};
      argv.insert(argv.end(), c.args.begin(), c.args.end());
      std::ostringstream out, err;
      EXPECT_EQ(RunBench(static_cast<int>(argv.size()), argv.data(), out, err),
                2)
          << s.name << " " << c.message;
      EXPECT_EQ(err.str(), absl::StrCat(prefix, c.message, "\n\n", usage));
      EXPECT_EQ(out.str(), "");
    }
  }
}

}  // namespace
}  // namespace psdb::bench
