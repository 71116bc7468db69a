// LineReader: plain, gzip (one and several members) and zstd (one and
// several frames) files give the same lines, across chunk boundaries, with
// long lines bounded; corrupt and truncated archives fail with DataLoss
// naming the file and the offset.
#include "train/line_reader.h"

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "tests/testing/test_util.h"
#include "tests/train/compress.h"

namespace psdb::train {
namespace {

using ::psdb::testing::GzipMember;
using ::psdb::testing::ScratchDir;
using ::psdb::testing::WriteBytes;
using ::psdb::testing::ZstdFrame;
using ::testing::HasSubstr;

struct ReadLines {
  std::vector<std::string> lines;  // text as returned (truncated if long)
  std::vector<uint64_t> lengths;
};

absl::StatusOr<ReadLines> ReadAll(const std::string& path,
                                  Compression* compression = nullptr) {
  absl::StatusOr<std::unique_ptr<LineReader>> r = LineReader::Open(path);
  if (!r.ok()) return r.status();
  if (compression != nullptr) *compression = (*r)->compression();
  ReadLines out;
  Line line;
  while (true) {
    absl::StatusOr<bool> more = (*r)->Next(&line);
    if (!more.ok()) return more.status();
    if (!*more) break;
    out.lines.emplace_back(line.text);
    out.lengths.push_back(line.length);
  }
  EXPECT_EQ((*r)->lines(), out.lines.size());
  return out;
}

// ~1.3 MB of text: lines of varied length (so they straddle the 256 KiB
// chunks), an empty line, a line longer than kMaxLineBytes, no final '\n'.
std::string Text() {
  std::string s;
  for (int i = 0; i < 20000; ++i) {
    absl::StrAppend(&s, "line ", i, "\t", std::string(i % 97, 'a' + i % 26),
                    "\n");
    if (i == 7000) s += "\n";
    if (i == 9000)
      absl::StrAppend(&s, std::string(kMaxLineBytes + 5, 'x'), "\n");
  }
  s += "last line without newline";
  return s;
}

TEST(CompressionTest, DetectsByMagicBytes) {
  EXPECT_EQ(DetectCompression("\x1f\x8b\x08\x00"), Compression::kGzip);
  EXPECT_EQ(DetectCompression("\x28\xb5\x2f\xfd"), Compression::kZstd);
  EXPECT_EQ(DetectCompression("\x28\xb5\x2f"), Compression::kNone);
  EXPECT_EQ(DetectCompression("1\t2\t3"), Compression::kNone);
  EXPECT_EQ(DetectCompression(""), Compression::kNone);
  EXPECT_EQ(CompressionName(Compression::kZstd), "zstd");
}

TEST(LineReaderTest, PlainGzipAndZstdGiveTheSameLines) {
  ScratchDir dir;
  const std::string text = Text();
  const size_t half = text.size() / 2;
  WriteBytes(dir.Sub("plain"), text);
  WriteBytes(dir.Sub("one.gz"), GzipMember(text));
  // Concatenated members, cut mid-line, as `cat a.gz b.gz`.
  WriteBytes(dir.Sub("two.gz"),
             GzipMember(text.substr(0, half)) + GzipMember(text.substr(half)));
  WriteBytes(dir.Sub("one.zst"), ZstdFrame(text));
  WriteBytes(dir.Sub("two.zst"),
             ZstdFrame(text.substr(0, half)) + ZstdFrame(text.substr(half)));
  // The name does not matter: gzip bytes in a file called .txt.
  WriteBytes(dir.Sub("named_plain.txt"), GzipMember(text));

  Compression c;
  ASSERT_OK_AND_ASSIGN(ReadLines plain, ReadAll(dir.Sub("plain"), &c));
  EXPECT_EQ(c, Compression::kNone);
  ASSERT_EQ(plain.lines.size(), 20000u + 2u + 1u);
  EXPECT_EQ(plain.lines[0], "line 0\t");
  EXPECT_EQ(plain.lines[7001], "");
  EXPECT_EQ(plain.lines.back(), "last line without newline");
  // The long line: its first kMaxLineBytes kept, its full length counted.
  EXPECT_TRUE(plain.lines[9002] == std::string(kMaxLineBytes, 'x'));
  EXPECT_EQ(plain.lengths[9002], kMaxLineBytes + 5);

  for (const auto& [name, want] :
       std::vector<std::pair<std::string, Compression>>{
           {"one.gz", Compression::kGzip},
           {"two.gz", Compression::kGzip},
           {"one.zst", Compression::kZstd},
           {"two.zst", Compression::kZstd},
           {"named_plain.txt", Compression::kGzip}}) {
    ASSERT_OK_AND_ASSIGN(ReadLines got, ReadAll(dir.Sub(name), &c));
    EXPECT_EQ(c, want) << name;
    EXPECT_TRUE(got.lines == plain.lines) << name;
    EXPECT_EQ(got.lengths, plain.lengths) << name;
  }
}

TEST(LineReaderTest, EmptyFilesHaveNoLines) {
  ScratchDir dir;
  WriteBytes(dir.Sub("empty"), "");
  WriteBytes(dir.Sub("empty.gz"), GzipMember(""));
  WriteBytes(dir.Sub("empty.zst"), ZstdFrame(""));
  for (const char* name : {"empty", "empty.gz", "empty.zst"}) {
    ASSERT_OK_AND_ASSIGN(ReadLines got, ReadAll(dir.Sub(name)));
    EXPECT_TRUE(got.lines.empty()) << name;
  }
}

TEST(LineReaderTest, TruncatedArchivesFailNamingFileAndOffset) {
  ScratchDir dir;
  const std::string text = Text();
  const std::string gz = GzipMember(text);
  const std::string zst = ZstdFrame(text);
  for (const auto& [name, bytes, format] :
       std::vector<std::tuple<std::string, std::string, std::string>>{
           {"cut.gz", gz.substr(0, gz.size() / 2), "gzip"},
           {"tail.gz", gz.substr(0, gz.size() - 4), "gzip"},  // no ISIZE
           {"cut.zst", zst.substr(0, zst.size() / 2), "zstd"},
           {"tail.zst", zst.substr(0, zst.size() - 2), "zstd"}}) {
    WriteBytes(dir.Sub(name), bytes);
    auto got = ReadAll(dir.Sub(name));
    ASSERT_THAT(got, StatusIs(absl::StatusCode::kDataLoss)) << name;
    const std::string msg(got.status().message());
    EXPECT_THAT(msg, HasSubstr(dir.Sub(name))) << msg;
    EXPECT_THAT(msg, HasSubstr("truncated")) << msg;
    EXPECT_THAT(msg, HasSubstr(absl::StrCat(format, " data file"))) << msg;
    EXPECT_THAT(msg,
                HasSubstr(absl::StrCat("at compressed byte ", bytes.size())))
        << msg;
  }
}

TEST(LineReaderTest, CorruptArchivesFailAndStayFailed) {
  ScratchDir dir;
  const std::string text = Text();
  std::string gz = GzipMember(text);
  gz[gz.size() - 6] ^= 0x55;  // the CRC-32 of the member
  WriteBytes(dir.Sub("crc.gz"), gz);
  std::string zst = ZstdFrame(text);
  zst[zst.size() - 1] ^= 0x55;  // the frame's content checksum
  WriteBytes(dir.Sub("sum.zst"), zst);
  // A member followed by bytes that start no member.
  WriteBytes(dir.Sub("garbage.gz"), GzipMember(text) + "not gzip");
  for (const char* name : {"crc.gz", "sum.zst", "garbage.gz"}) {
    auto got = ReadAll(dir.Sub(name));
    ASSERT_THAT(got, StatusIs(absl::StatusCode::kDataLoss)) << name;
    EXPECT_THAT(std::string(got.status().message()), HasSubstr("corrupt"))
        << got.status();
  }
  ASSERT_OK_AND_ASSIGN(auto r, LineReader::Open(dir.Sub("crc.gz")));
  Line line;
  absl::Status first;
  for (int i = 0; i < 100000 && first.ok(); ++i) {
    first = r->Next(&line).status();
  }
  EXPECT_THAT(first, StatusIs(absl::StatusCode::kDataLoss));
  EXPECT_THAT(std::string(first.message()),
              HasSubstr(absl::StrCat("(after line ", r->lines(), ")")));
  EXPECT_EQ(r->Next(&line).status(), first);
}

TEST(LineReaderTest, MissingFileIsNotFound) {
  ScratchDir dir;
  EXPECT_THAT(LineReader::Open(dir.Sub("nope")),
              StatusIs(absl::StatusCode::kNotFound));
}

}  // namespace
}  // namespace psdb::train
