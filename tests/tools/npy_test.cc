#include "tools/dump/npy.h"

#include <cstring>
#include <fstream>
#include <iterator>
#include <string>

#include "tests/testing/test_util.h"

namespace psdb::dump {
namespace {

std::string ReadFile(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(f), {});
}

// The preamble numpy.lib.format expects: magic, version 1.0, little-endian
// header length, a dict literal padded with spaces and ending in '\n', the
// whole a multiple of 64 bytes.
TEST(NpyTest, PreambleIsExactlyNumpyV1) {
  const std::string p = NpyPreamble("<f4", 3, 2);
  ASSERT_EQ(p.size(), kNpyPreambleBytes);
  EXPECT_EQ(p.size() % 64, 0u);
  EXPECT_EQ(p.substr(0, 6), std::string("\x93NUMPY", 6));
  EXPECT_EQ(p[6], '\x01');
  EXPECT_EQ(p[7], '\x00');
  const size_t header_len = static_cast<unsigned char>(p[8]) |
                            (static_cast<unsigned char>(p[9]) << 8);
  EXPECT_EQ(header_len, kNpyPreambleBytes - 10);
  const std::string dict =
      "{'descr': '<f4', 'fortran_order': False, 'shape': (3, 2), }";
  EXPECT_EQ(p.substr(10, dict.size()), dict);
  EXPECT_EQ(p.substr(10 + dict.size(), header_len - dict.size() - 1),
            std::string(header_len - dict.size() - 1, ' '));
  EXPECT_EQ(p.back(), '\n');
  EXPECT_EQ(NpyPreamble("<u8", 5, 0).substr(10, 57),
            "{'descr': '<u8', 'fortran_order': False, 'shape': (5,), }");
  // The largest possible shape still fits.
  EXPECT_EQ(NpyPreamble("<f4", ~0ull, 65536).size(), kNpyPreambleBytes);
}

TEST(NpyTest, WriterRewritesTheRowCount) {
  testing::ScratchDir dir;
  const std::string path = dir.Sub("v.npy");
  ASSERT_OK_AND_ASSIGN(auto w, NpyWriter::Create(path, "<f4", 4, 2));
  const float r0[2] = {1.0f, -2.5f};
  const float r1[2] = {0.0f, 3.0f};
  ASSERT_OK(w->AppendRow(r0));
  ASSERT_OK(w->AppendRow(r1));
  ASSERT_OK(w->Finish());
  const std::string bytes = ReadFile(path);
  ASSERT_EQ(bytes.size(), kNpyPreambleBytes + 16);
  EXPECT_EQ(bytes.substr(0, kNpyPreambleBytes), NpyPreamble("<f4", 2, 2));
  float data[4];
  std::memcpy(data, bytes.data() + kNpyPreambleBytes, 16);
  EXPECT_EQ(data[0], 1.0f);
  EXPECT_EQ(data[1], -2.5f);
  EXPECT_EQ(data[2], 0.0f);
  EXPECT_EQ(data[3], 3.0f);
}

TEST(NpyTest, CreateFailsOnBadPath) {
  EXPECT_THAT(NpyWriter::Create("/nonexistent-dir/x.npy", "<f4", 4, 1),
              StatusIs(absl::StatusCode::kInternal));
}

}  // namespace
}  // namespace psdb::dump
