#include "train/criteo_reader.h"

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "tests/testing/test_util.h"
#include "tests/train/compress.h"

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

// What a FILE* log received: open_memstream's buffer, read after Close().
class MemoryLog {
 public:
  MemoryLog() : file_(open_memstream(&buf_, &size_)) {}
  ~MemoryLog() {
    Close();
    std::free(buf_);
  }
  std::FILE* file() { return file_; }
  std::vector<std::string> Close() {
    if (file_ != nullptr) std::fclose(file_);
    file_ = nullptr;
    return absl::StrSplit(absl::string_view(buf_, size_), '\n',
                          absl::SkipEmpty());
  }

 private:
  char* buf_ = nullptr;
  size_t size_ = 0;
  std::FILE* file_;
};

// Everything a reader yields: every example's columns and its counters.
struct ReadResult {
  CriteoBatch all;
  uint64_t valid = 0;
  uint64_t malformed = 0;
  std::string first_error;
  std::vector<std::string> log;
};

ReadResult ReadEverything(const std::vector<std::string>& files,
                          size_t batch_size) {
  ReadResult out;
  MemoryLog log;
  ReaderOptions options;
  options.malformed_log = log.file();
  auto reader = CriteoReader::Open(files, options);
  EXPECT_TRUE(reader.ok()) << reader.status();
  CriteoBatch batch;
  while (true) {
    auto n = (*reader)->Next(batch_size, &batch);
    EXPECT_TRUE(n.ok()) << n.status();
    if (!n.ok() || *n == 0) break;
    auto append = [](auto& to, const auto& from) {
      to.insert(to.end(), from.begin(), from.end());
    };
    append(out.all.labels, batch.labels);
    append(out.all.ints, batch.ints);
    append(out.all.int_present, batch.int_present);
    append(out.all.cat_keys, batch.cat_keys);
  }
  out.valid = (*reader)->valid_lines();
  out.malformed = (*reader)->malformed_lines();
  out.first_error = (*reader)->first_error();
  out.log = log.Close();
  return out;
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

// Valid lines with malformed ones among them, one with a 1 MiB field.
std::string MixedText(int lines) {
  std::string text;
  for (int i = 0; i < lines; ++i) {
    absl::StrAppend(&text, Line(i % 3 == 0, i), i % 7 == 0 ? "\r\n" : "\n");
    if (i % 1000 == 17) text += "1\t2\t3\n";
    if (i == 2500) {
      std::string huge = Line(1, i);
      huge.replace(huge.rfind('\t') + 1, std::string::npos,
                   std::string(1 << 20, 'z'));
      absl::StrAppend(&text, huge, "\n");
    }
  }
  return text;
}

TEST(CriteoReaderTest, GzipAndZstdFilesReadExactlyAsThePlainFile) {
  ScratchDir dir;
  const std::string text = MixedText(6000);
  const size_t cut = text.size() / 3;
  testing::WriteBytes(dir.Sub("plain"), text);
  testing::WriteBytes(dir.Sub("day_0.gz"),
                      testing::GzipMember(text.substr(0, cut)) +
                          testing::GzipMember(text.substr(cut)));
  testing::WriteBytes(dir.Sub("train.zst"),
                      testing::ZstdFrame(text.substr(0, cut)) +
                          testing::ZstdFrame(text.substr(cut)));
  const ReadResult plain = ReadEverything({dir.Sub("plain")}, 512);
  EXPECT_EQ(plain.valid, 6000u);
  EXPECT_EQ(plain.malformed, 7u);  // 6 short lines and the 1 MiB field
  EXPECT_EQ(plain.all.size(), 6000u);
  EXPECT_EQ(plain.first_error,
            absl::StrCat(dir.Sub("plain"), ":19: 3 fields, expected 40"));
  for (const char* name : {"day_0.gz", "train.zst"}) {
    for (size_t batch : {1000, 4096}) {
      const ReadResult got = ReadEverything({dir.Sub(name)}, batch);
      EXPECT_EQ(got.valid, plain.valid) << name;
      EXPECT_EQ(got.malformed, plain.malformed) << name;
      EXPECT_EQ(got.all.labels, plain.all.labels) << name;
      EXPECT_EQ(got.all.ints, plain.all.ints) << name;
      EXPECT_EQ(got.all.int_present, plain.all.int_present) << name;
      EXPECT_EQ(got.all.cat_keys, plain.all.cat_keys) << name;
      EXPECT_EQ(got.first_error,
                absl::StrCat(dir.Sub(name), ":19: 3 fields, expected 40"));
      ASSERT_EQ(got.log.size(), plain.log.size()) << name;
      for (size_t i = 0; i < got.log.size(); ++i) {
        EXPECT_EQ(got.log[i].substr(got.log[i].find(':')),
                  plain.log[i].substr(plain.log[i].find(':')));
      }
    }
  }
}

TEST(CriteoReaderTest, TruncatedArchiveFailsNamingTheFile) {
  ScratchDir dir;
  const std::string gz = testing::GzipMember(MixedText(3000));
  testing::WriteBytes(dir.Sub("train.txt.gz"), gz.substr(0, gz.size() - 100));
  ASSERT_OK_AND_ASSIGN(auto reader,
                       CriteoReader::Open({dir.Sub("train.txt.gz")},
                                          {.malformed_log = nullptr}));
  CriteoBatch batch;
  absl::Status status;
  for (int i = 0; i < 100 && status.ok(); ++i) {
    status = reader->Next(256, &batch).status();
  }
  EXPECT_THAT(status, StatusIs(absl::StatusCode::kDataLoss));
  EXPECT_THAT(
      std::string(status.message()),
      ::testing::HasSubstr(absl::StrCat(
          "gzip data file ", dir.Sub("train.txt.gz"), " is truncated")));
}

TEST(CriteoReaderTest, MalformedLinesAreLoggedBoundedAndRateLimited) {
  ScratchDir dir;
  const std::string path = dir.Sub("train.txt");
  // A 1 MiB field: longer than any Criteo line, skipped in bounded memory.
  std::string huge_field = Line(1, 1);
  huge_field.replace(huge_field.rfind('\t') + 1, std::string::npos,
                     std::string(1 << 20, 'q'));
  // A 50000-byte label: the line is kept, the message quotes 32 bytes of it.
  const std::string long_label =
      absl::StrCat(std::string(50000, '7'), Line(1, 1).substr(1));
  WriteFile(path,
            {huge_field, Line(1, 1), long_label, std::string(1 << 20, '\x1b'),
             "bad\x1b[31mred", "5", "6", Line(0, 2)});
  MemoryLog log;
  ASSERT_OK_AND_ASSIGN(auto reader,
                       CriteoReader::Open({path}, {.malformed_log = log.file(),
                                                   .max_logged_malformed = 4}));
  CriteoBatch batch;
  ASSERT_OK_AND_ASSIGN(size_t n, reader->Next(100, &batch));
  EXPECT_EQ(n, 2u);
  EXPECT_EQ(reader->malformed_lines(), 6u);
  const std::vector<std::string> lines = log.Close();
  ASSERT_EQ(lines.size(), 5u);
  for (const std::string& l : lines) {
    // Path, problem and 200 bytes of the line (at most 4x when escaped).
    EXPECT_LT(l.size(), 1200u) << l.substr(0, 1500);
    EXPECT_EQ(l.find('\x1b'), std::string::npos) << l.substr(0, 1500);
  }
  const size_t huge_len = huge_field.size();
  EXPECT_EQ(lines[0],
            absl::StrCat("malformed line ", path,
                         ":1: longer than the 65536 bytes a Criteo line may "
                         "have (",
                         huge_len, " bytes): ",
                         absl::CHexEscape(huge_field.substr(0, 200)), "[... ",
                         huge_len - 200, " more bytes]"));
  EXPECT_EQ(
      lines[1],
      absl::StrCat("malformed line ", path, ":3: label '", std::string(32, '7'),
                   "...' (50000 bytes) is not 0 or 1 (", long_label.size(),
                   " bytes): ", std::string(200, '7'), "[... ",
                   long_label.size() - 200, " more bytes]"));
  EXPECT_EQ(lines[2], absl::StrCat("malformed line ", path,
                                   ":4: longer than the 65536 bytes a Criteo "
                                   "line may have (1048576 bytes): ",
                                   absl::CHexEscape(std::string(200, '\x1b')),
                                   "[... 1048376 more bytes]"));
  EXPECT_EQ(
      lines[3],
      absl::StrCat("malformed line ", path,
                   ":5: 1 fields, expected 40 (11 bytes): bad\\x1b[31mred"));
  EXPECT_EQ(lines[4],
            "malformed lines: 4 logged; further ones are counted, not logged");
  EXPECT_EQ(reader->first_error(),
            absl::StrCat(path,
                         ":1: longer than the 65536 bytes a Criteo line may "
                         "have"));
}

TEST(ParseCriteoLineTest, MessagesQuoteAtMost32BytesOfAField) {
  CriteoBatch batch;
  std::string line = Line(1, 1);
  line.replace(line.rfind('\t') + 1, std::string::npos,
               std::string(40000, 'q'));
  EXPECT_EQ(ParseCriteoLine(line, &batch).message(),
            absl::StrCat("categorical feature C26 '", std::string(32, 'q'),
                         "...' (40000 bytes) is not a hex id"));
  line = Line(1, 1);
  line.replace(line.find('\t') + 1, 1, "\x01z");
  EXPECT_EQ(ParseCriteoLine(line, &batch).message(),
            "integer feature I1 '\\x01z' is not an integer");
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

TEST(LoadDataDirTest, CompressedNamesAndTerabyteDays) {
  ScratchDir dir;
  for (const char* name :
       {"train.txt.gz", "train.txt-00001.zst", "day_0.gz", "day_10.gz",
        "day_2.zst", "day_1", "day_x.gz", "days_3.gz", "day_4.gz.md5"}) {
    WriteFile(dir.Sub(name), {Line(1, 1)});
  }
  ASSERT_OK_AND_ASSIGN(DataDir data, LoadDataDir(dir.path()));
  // No test* file: the last day is held out as the test file.
  EXPECT_EQ(data.train_files,
            (std::vector<std::string>{
                dir.Sub("train.txt-00001.zst"), dir.Sub("train.txt.gz"),
                dir.Sub("day_0.gz"), dir.Sub("day_1"), dir.Sub("day_2.zst")}));
  EXPECT_EQ(data.test_files, (std::vector<std::string>{dir.Sub("day_10.gz")}));

  // With a test* file every day trains.
  WriteFile(dir.Sub("test.txt.zst"), {Line(1, 1)});
  ASSERT_OK_AND_ASSIGN(data, LoadDataDir(dir.path()));
  EXPECT_EQ(data.train_files.size(), 6u);
  EXPECT_EQ(data.train_files.back(), dir.Sub("day_10.gz"));
  EXPECT_EQ(data.test_files,
            (std::vector<std::string>{dir.Sub("test.txt.zst")}));

  // One day alone is a train file.
  ScratchDir one;
  WriteFile(one.Sub("day_0.gz"), {Line(1, 1)});
  ASSERT_OK_AND_ASSIGN(data, LoadDataDir(one.path()));
  EXPECT_EQ(data.train_files, (std::vector<std::string>{one.Sub("day_0.gz")}));
  EXPECT_TRUE(data.test_files.empty());
}

TEST(JsonNumberTest, ReadsNumbers) {
  EXPECT_EQ(JsonNumber("{\"a\": 1.5e-1, \"b\":-2}", "a"), 0.15);
  EXPECT_EQ(JsonNumber("{\"a\": 1.5e-1, \"b\":-2}", "b"), -2.0);
  EXPECT_EQ(JsonNumber("{\"a\": 1}", "c"), std::nullopt);
}

}  // namespace
}  // namespace psdb::train

namespace psdb::train {
namespace {

// The tags (I1 of Line(label, tag)) a reader with `options` yields.
std::set<int64_t> TagsRead(const std::vector<std::string>& files,
                           const ReaderOptions& options) {
  std::set<int64_t> tags;
  auto reader = CriteoReader::Open(files, options);
  EXPECT_TRUE(reader.ok()) << reader.status();
  if (!reader.ok()) return tags;
  CriteoBatch batch;
  for (int pass = 0; pass < 2; ++pass) {  // a second epoch yields the same
    std::set<int64_t> seen;
    while (true) {
      auto n = (*reader)->Next(500, &batch);
      EXPECT_TRUE(n.ok()) << n.status();
      if (!n.ok() || *n == 0) break;
      for (size_t i = 0; i < batch.size(); ++i) {
        seen.insert(batch.ints[i * kNumIntFeatures]);
      }
    }
    if (pass == 0) tags = seen;
    EXPECT_EQ(seen, tags) << "pass " << pass;
    (*reader)->Rewind();
  }
  return tags;
}

// The validation split is a pure function of the line: the train and valid
// readers partition the input, the held-out lines are exactly those
// InValidSplit picks (about the fraction asked for), and line sharding over
// two ranks splits the same train lines.
TEST(ValidSplitTest, PartitionsByTheLineHashWhateverTheSharding) {
  ScratchDir dir;
  constexpr int kLines = 20000;
  constexpr double kFraction = 0.05;
  std::vector<std::string> a, b;
  std::set<int64_t> want_valid, all;
  for (int i = 1; i <= kLines; ++i) {
    const std::string line = Line(i % 2, i);
    (i <= kLines / 2 ? a : b).push_back(line);
    all.insert(i);
    if (InValidSplit(line, kFraction)) want_valid.insert(i);
  }
  WriteFile(dir.Sub("a"), a);
  WriteFile(dir.Sub("b"), b);
  const std::vector<std::string> files = {dir.Sub("a"), dir.Sub("b")};

  ReaderOptions o;
  o.valid_fraction = kFraction;
  o.split = Split::kValid;
  const std::set<int64_t> valid = TagsRead(files, o);
  o.split = Split::kTrain;
  const std::set<int64_t> train = TagsRead(files, o);
  EXPECT_EQ(valid, want_valid);
  // Binomial(20000, 0.05): mean 1000, sd 31; 5 sd either way.
  EXPECT_GT(valid.size(), 845u);
  EXPECT_LT(valid.size(), 1155u);
  std::set<int64_t> both = train;
  both.insert(valid.begin(), valid.end());
  EXPECT_EQ(both, all);
  EXPECT_EQ(train.size() + valid.size(), all.size());  // disjoint

  // Two line-sharded ranks hold out the same lines.
  o.shard_by = ShardBy::kLine;
  o.world = 2;
  std::set<int64_t> ranks;
  for (int r = 0; r < 2; ++r) {
    o.rank = r;
    const std::set<int64_t> mine = TagsRead(files, o);
    ranks.insert(mine.begin(), mine.end());
  }
  EXPECT_EQ(ranks, train);

  // kAll ignores the fraction; a '\r' line ending does not move a line.
  ReaderOptions plain;
  plain.valid_fraction = kFraction;
  EXPECT_EQ(TagsRead(files, plain), all);
  for (int i = 1; i <= 200; ++i) {
    EXPECT_EQ(InValidSplit(Line(1, i) + "\r", 0.5),
              InValidSplit(Line(1, i), 0.5));
  }
  EXPECT_FALSE(InValidSplit(Line(1, 1), 0));
}

TEST(ValidSplitTest, FractionOutOfRangeIsRejected) {
  ScratchDir dir;
  WriteFile(dir.Sub("a"), {Line(1, 1)});
  for (double f : {-0.1, 1.0, 2.0}) {
    ReaderOptions o;
    o.valid_fraction = f;
    EXPECT_THAT(CriteoReader::Open({dir.Sub("a")}, o).status(),
                StatusIs(absl::StatusCode::kInvalidArgument))
        << f;
  }
}

}  // namespace
}  // namespace psdb::train
