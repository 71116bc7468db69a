#include "train/criteo_reader.h"

#include <fstream>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "tests/testing/test_util.h"

namespace psdb::train {
namespace {

using ::psdb::testing::ScratchDir;

// A valid line: label, ints 1..13 (I3 empty), hex ids (C5 empty).
std::string Line(int label, int tag) {
  std::vector<std::string> f = {absl::StrCat(label)};
  for (int j = 0; j < kNumIntFeatures; ++j) {
    f.push_back(j == 2 ? "" : absl::StrCat(j + tag));
  }
  for (int j = 0; j < kNumCatFeatures; ++j) {
    f.push_back(j == 4 ? "" : absl::StrCat("a", tag, "f", j));
  }
  return absl::StrJoin(f, "\t");
}

void WriteFile(const std::string& path, const std::vector<std::string>& lines) {
  std::ofstream out(path);
  for (const auto& l : lines) out << l << "\n";
}

TEST(ParseCriteoLineTest, ParsesEveryFieldAndEmptyOnes) {
  CriteoBatch batch;
  ASSERT_OK(ParseCriteoLine(Line(1, 7), &batch));
  ASSERT_EQ(batch.size(), 1u);
  EXPECT_EQ(batch.labels[0], 1.0f);
  EXPECT_EQ(batch.ints[0], 7);
  EXPECT_EQ(batch.ints[12], 19);
  EXPECT_EQ(batch.int_present[2], 0);
  EXPECT_EQ(batch.ints[2], 0);
  EXPECT_EQ(batch.int_present[3], 1);
  EXPECT_EQ(batch.cat_keys[0], CategoricalKey(0, 0xa7f0));
  EXPECT_EQ(batch.cat_keys[4], CategoricalKey(4, 0, /*present=*/false));
  EXPECT_EQ(batch.cat_keys[25], CategoricalKey(25, 0xa7f25));
}

TEST(ParseCriteoLineTest, AllEmptyFeaturesAndCrlfAreValid) {
  CriteoBatch batch;
  ASSERT_OK(ParseCriteoLine(
      absl::StrCat("0", std::string(kNumCriteoFields - 1, '\t'), "\r"),
      &batch));
  ASSERT_EQ(batch.size(), 1u);
  EXPECT_EQ(batch.labels[0], 0.0f);
  for (int j = 0; j < kNumIntFeatures; ++j) EXPECT_EQ(batch.int_present[j], 0);
}

TEST(ParseCriteoLineTest, NegativeIntegersParse) {
  CriteoBatch batch;
  std::string line = Line(0, 1);
  line.replace(line.find('\t') + 1, 1, "-3");
  ASSERT_OK(ParseCriteoLine(line, &batch));
  EXPECT_EQ(batch.ints[0], -3);
}

TEST(ParseCriteoLineTest, MalformedLinesAreRejectedAndLeaveBatchUnchanged) {
  CriteoBatch batch;
  const std::string good = Line(1, 1);
  std::vector<std::string> bad = {
      "",
      "1\t2\t3",
      absl::StrCat(good, "\textra"),
      absl::StrCat("2", good.substr(1)),
      absl::StrCat("x", good.substr(1)),
  };
  std::string bad_int = good;
  bad_int.replace(bad_int.find('\t') + 1, 1, "z");
  bad.push_back(bad_int);
  std::string bad_hex = good;
  bad_hex.replace(bad_hex.rfind('\t') + 1, 2, "zz");
  bad.push_back(bad_hex);
  for (const std::string& line : bad) {
    EXPECT_THAT(ParseCriteoLine(line, &batch),
                StatusIs(absl::StatusCode::kInvalidArgument))
        << line;
  }
  EXPECT_EQ(batch.size(), 0u);
  EXPECT_TRUE(batch.ints.empty());
  EXPECT_TRUE(batch.cat_keys.empty());
}

TEST(CategoricalKeyTest, FieldsAndMissingAreDistinct) {
  std::set<uint64_t> keys;
  for (int f = 0; f < kNumCatFeatures; ++f) {
    keys.insert(CategoricalKey(f, 1));
    keys.insert(CategoricalKey(f, 0, false));
    keys.insert(CategoricalKey(f, 0));
  }
  EXPECT_EQ(keys.size(), 3u * kNumCatFeatures);
}

TEST(CriteoReaderTest, CountsAndSkipsMalformedLines) {
  ScratchDir dir;
  const std::string path = dir.Sub("train.txt");
  WriteFile(path, {Line(1, 1), "garbage", Line(0, 2), "1\t2", Line(1, 3)});
  ASSERT_OK_AND_ASSIGN(auto reader, CriteoReader::Open({path}));
  CriteoBatch batch;
  ASSERT_OK_AND_ASSIGN(size_t n, reader->Next(100, &batch));
  EXPECT_EQ(n, 3u);
  EXPECT_EQ(batch.labels, (std::vector<float>{1, 0, 1}));
  EXPECT_EQ(reader->valid_lines(), 3u);
  EXPECT_EQ(reader->malformed_lines(), 2u);
  EXPECT_EQ(reader->first_error(),
            absl::StrCat(path, ":2: 1 fields, expected 40"));
  ASSERT_OK_AND_ASSIGN(n, reader->Next(100, &batch));
  EXPECT_EQ(n, 0u);
}

TEST(CriteoReaderTest, BatchesSpanFilesAndRewind) {
  ScratchDir dir;
  WriteFile(dir.Sub("a"), {Line(1, 1), Line(0, 2), Line(1, 3)});
  WriteFile(dir.Sub("b"), {Line(0, 4), Line(0, 5)});
  ASSERT_OK_AND_ASSIGN(auto reader,
                       CriteoReader::Open({dir.Sub("a"), dir.Sub("b")}));
  CriteoBatch batch;
  std::vector<size_t> sizes;
  for (int i = 0; i < 4; ++i) {
    ASSERT_OK_AND_ASSIGN(size_t n, reader->Next(2, &batch));
    sizes.push_back(n);
  }
  EXPECT_EQ(sizes, (std::vector<size_t>{2, 2, 1, 0}));
  reader->Rewind();
  ASSERT_OK_AND_ASSIGN(size_t n, reader->Next(10, &batch));
  EXPECT_EQ(n, 5u);
}

TEST(CriteoReaderTest, FileWithNoValidLineIsAnError) {
  ScratchDir dir;
  WriteFile(dir.Sub("good"), {Line(1, 1)});
  WriteFile(dir.Sub("bad"), {"nonsense", "more nonsense"});
  ASSERT_OK_AND_ASSIGN(auto reader,
                       CriteoReader::Open({dir.Sub("good"), dir.Sub("bad")}));
  CriteoBatch batch;
  auto n = reader->Next(10, &batch);
  EXPECT_THAT(n, StatusIs(absl::StatusCode::kDataLoss));
  EXPECT_THAT(std::string(n.status().message()),
              ::testing::HasSubstr(dir.Sub("bad")));

  WriteFile(dir.Sub("empty"), {});
  ASSERT_OK_AND_ASSIGN(auto reader2, CriteoReader::Open({dir.Sub("empty")}));
  EXPECT_THAT(reader2->Next(10, &batch), StatusIs(absl::StatusCode::kDataLoss));
}

TEST(CriteoReaderTest, MissingFileIsNotFound) {
  ScratchDir dir;
  ASSERT_OK_AND_ASSIGN(auto reader, CriteoReader::Open({dir.Sub("nope")}));
  CriteoBatch batch;
  EXPECT_THAT(reader->Next(10, &batch), StatusIs(absl::StatusCode::kNotFound));
}

TEST(CriteoReaderTest, RejectsBadShardOptions) {
  EXPECT_THAT(CriteoReader::Open({}),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(CriteoReader::Open({"a"}, {.rank = 2, .world = 2}),
              StatusIs(absl::StatusCode::kInvalidArgument));
  // Two files cannot be sharded by file over three workers.
  EXPECT_THAT(CriteoReader::Open({"a", "b"}, {.rank = 2, .world = 3}),
              StatusIs(absl::StatusCode::kInvalidArgument));
}

// Reads every example of one shard; returns the I1 values (unique per line).
std::vector<int64_t> ReadShard(const std::vector<std::string>& files,
                               ReaderOptions options) {
  auto reader = CriteoReader::Open(files, options);
  EXPECT_TRUE(reader.ok()) << reader.status();
  std::vector<int64_t> ids;
  CriteoBatch batch;
  while (true) {
    auto n = (*reader)->Next(3, &batch);
    EXPECT_TRUE(n.ok()) << n.status();
    if (!n.ok() || *n == 0) break;
    for (size_t i = 0; i < *n; ++i)
      ids.push_back(batch.ints[i * kNumIntFeatures]);
  }
  return ids;
}

class ShardingTest : public ::testing::TestWithParam<ShardBy> {};

TEST_P(ShardingTest, RanksPartitionTheInputExactly) {
  ScratchDir dir;
  std::vector<std::string> files;
  int next = 0;
  for (int f = 0; f < 5; ++f) {
    std::vector<std::string> lines;
    for (int i = 0; i < 3 + f; ++i) lines.push_back(Line(i % 2, 100 * next++));
    files.push_back(dir.Sub(absl::StrCat("train.txt-0000", f)));
    WriteFile(files.back(), lines);
  }
  for (int world : {1, 2, 3}) {
    std::multiset<int64_t> all;
    for (int rank = 0; rank < world; ++rank) {
      const std::vector<int64_t> ids = ReadShard(
          files, {.rank = rank, .world = world, .shard_by = GetParam()});
      all.insert(ids.begin(), ids.end());
      if (GetParam() == ShardBy::kLine) {
        // Line g (over all files) goes to rank g % world.
        for (size_t k = 0; k < ids.size(); ++k) {
          EXPECT_EQ(ids[k], 100 * (rank + static_cast<int64_t>(k) * world));
        }
      }
    }
    std::multiset<int64_t> expected;
    for (int i = 0; i < next; ++i) expected.insert(100 * i);
    EXPECT_EQ(all, expected) << "world " << world;
  }
}

INSTANTIATE_TEST_SUITE_P(ByFileAndLine, ShardingTest,
                         ::testing::Values(ShardBy::kFile, ShardBy::kLine));

TEST(ShardingTest, ByFileAssignsFilesRoundRobin) {
  ASSERT_OK_AND_ASSIGN(auto reader,
                       CriteoReader::Open({"f0", "f1", "f2", "f3", "f4"},
                                          {.rank = 1, .world = 2}));
  EXPECT_EQ(reader->files(), (std::vector<std::string>{"f1", "f3"}));
}

TEST(LoadDataDirTest, FindsTrainTestAndBayesAuc) {
  ScratchDir dir;
  WriteFile(dir.Sub("train.txt-00001"), {Line(1, 1)});
  WriteFile(dir.Sub("train.txt-00000"), {Line(1, 1)});
  WriteFile(dir.Sub("test.txt"), {Line(1, 1)});
  WriteFile(dir.Sub("README"), {"not data"});
  WriteFile(dir.Sub("meta.json"), {"{\"seed\": 3, \"bayes_auc\": 0.8125}"});
  ASSERT_OK_AND_ASSIGN(DataDir data, LoadDataDir(dir.path()));
  EXPECT_EQ(data.train_files,
            (std::vector<std::string>{dir.Sub("train.txt-00000"),
                                      dir.Sub("train.txt-00001")}));
  EXPECT_EQ(data.test_files, (std::vector<std::string>{dir.Sub("test.txt")}));
  ASSERT_TRUE(data.bayes_auc.has_value());
  EXPECT_DOUBLE_EQ(*data.bayes_auc, 0.8125);
}

TEST(LoadDataDirTest, MissingDirOrTrainFilesIsNotFound) {
  ScratchDir dir;
  EXPECT_THAT(LoadDataDir(dir.Sub("nope")),
              StatusIs(absl::StatusCode::kNotFound));
  WriteFile(dir.Sub("test.txt"), {Line(1, 1)});
  EXPECT_THAT(LoadDataDir(dir.path()), StatusIs(absl::StatusCode::kNotFound));
}

TEST(JsonNumberTest, ReadsNumbers) {
  EXPECT_EQ(JsonNumber("{\"a\": 1.5e-1, \"b\":-2}", "a"), 0.15);
  EXPECT_EQ(JsonNumber("{\"a\": 1.5e-1, \"b\":-2}", "b"), -2.0);
  EXPECT_EQ(JsonNumber("{\"a\": 1}", "c"), std::nullopt);
}

}  // namespace
}  // namespace psdb::train
