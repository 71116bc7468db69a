#include "train/synthetic.h"

#include <filesystem>
#include <fstream>
#include <sstream>

#include "tests/testing/test_util.h"
#include "train/criteo_reader.h"

namespace psdb::train {
namespace {

using ::psdb::testing::ScratchDir;

std::string ReadAll(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

GeneratorOptions Small() {
  GeneratorOptions o;
  o.train_rows = 3000;
  o.test_rows = 1000;
  o.train_files = 3;
  o.max_vocab = 500;
  return o;
}

TEST(GeneratorTest, WritesCriteoFilesAndMeta) {
  ScratchDir dir;
  ASSERT_OK_AND_ASSIGN(GeneratorResult r,
                       GenerateSynthetic(Small(), dir.path()));
  ASSERT_EQ(r.files.size(), 5u);
  EXPECT_EQ(r.files.back(), dir.Sub("meta.json"));
  ASSERT_OK_AND_ASSIGN(DataDir data, LoadDataDir(dir.path()));
  EXPECT_EQ(data.train_files,
            (std::vector<std::string>{dir.Sub("train.txt-00000"),
                                      dir.Sub("train.txt-00001"),
                                      dir.Sub("train.txt-00002")}));
  EXPECT_EQ(data.test_files, (std::vector<std::string>{dir.Sub("test.txt")}));
  ASSERT_TRUE(data.bayes_auc.has_value());
  EXPECT_NEAR(*data.bayes_auc, r.bayes_auc, 1e-6);
  // A learnable signal, far from both chance and perfection.
  EXPECT_GT(r.bayes_auc, 0.65);
  EXPECT_LT(r.bayes_auc, 0.95);
  EXPECT_NEAR(r.bayes_auc_expected, r.bayes_auc, 0.05);
  EXPECT_GT(r.train_ctr, 0.05);
  EXPECT_LT(r.train_ctr, 0.6);

  // Every line parses; the row counts are exact.
  ASSERT_OK_AND_ASSIGN(auto reader, CriteoReader::Open(data.train_files));
  CriteoBatch batch;
  ASSERT_OK_AND_ASSIGN(size_t n, reader->Next(100000, &batch));
  EXPECT_EQ(n, 3000u);
  EXPECT_EQ(reader->malformed_lines(), 0u);
  ASSERT_OK_AND_ASSIGN(auto test_reader, CriteoReader::Open(data.test_files));
  ASSERT_OK_AND_ASSIGN(n, test_reader->Next(100000, &batch));
  EXPECT_EQ(n, 1000u);

  const std::string meta = ReadAll(dir.Sub("meta.json"));
  for (const char* key : {"seed", "train_rows", "test_rows", "vocab_sizes",
                          "bayes_auc_expected", "bayes_logloss", "train_ctr"}) {
    EXPECT_THAT(meta, ::testing::HasSubstr(key));
  }
  EXPECT_EQ(JsonNumber(meta, "train_rows"), 3000.0);
  EXPECT_EQ(r.vocab_sizes.front(), 4);
  EXPECT_EQ(r.vocab_sizes.back(), 500);
}

TEST(GeneratorTest, SameSeedSameBytesOtherSeedOtherData) {
  ScratchDir a, b, c;
  GeneratorOptions o = Small();
  ASSERT_OK(GenerateSynthetic(o, a.path()));
  ASSERT_OK(GenerateSynthetic(o, b.path()));
  o.seed = 2;
  ASSERT_OK(GenerateSynthetic(o, c.path()));
  for (const char* f :
       {"train.txt-00000", "train.txt-00002", "test.txt", "meta.json"}) {
    EXPECT_EQ(ReadAll(a.Sub(f)), ReadAll(b.Sub(f))) << f;
    EXPECT_NE(ReadAll(a.Sub(f)), ReadAll(c.Sub(f))) << f;
  }
}

TEST(GeneratorTest, RejectsBadOptions) {
  ScratchDir dir;
  GeneratorOptions o = Small();
  o.train_rows = 0;
  EXPECT_THAT(GenerateSynthetic(o, dir.path()),
              StatusIs(absl::StatusCode::kInvalidArgument));
  o = Small();
  o.min_vocab = 1000;
  EXPECT_THAT(GenerateSynthetic(o, dir.path()),
              StatusIs(absl::StatusCode::kInvalidArgument));
}

}  // namespace
}  // namespace psdb::train
