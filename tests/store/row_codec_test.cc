#include "store/row_codec.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "tests/testing/test_util.h"
#include "util/hash.h"

namespace psdb {
namespace {

TEST(KeyCodecTest, BigEndianAndOrdered) {
  EXPECT_EQ(EncodeKey(0x0102030405060708ULL),
            std::string("\x01\x02\x03\x04\x05\x06\x07\x08", 8));
  EXPECT_LT(EncodeKey(255), EncodeKey(256));
  EXPECT_LT(EncodeKey(1), EncodeKey(0xffffffffffffffffULL));
  uint64_t k = 0;
  ASSERT_OK(DecodeKey(EncodeKey(0xdeadbeefcafef00dULL), &k));
  EXPECT_EQ(k, 0xdeadbeefcafef00dULL);
  EXPECT_THAT(DecodeKey("abc", &k),
              StatusIs(absl::StatusCode::kInvalidArgument));
}

TEST(RowCodecTest, RoundTrip) {
  const RowHeader h{
      .last_update_step = -3, .update_count = 7, .frequency = 1ull << 40};
  const std::vector<float> values = {1.5f, -2.25f, 3.0f};
  const std::vector<float> state = {0.1f, 0.2f, 0.3f, 0.4f, 0.5f, 0.6f, 7.0f};
  std::string enc;
  EncodeRow(h, values, state, &enc);
  ASSERT_EQ(enc.size(), EncodedRowSize(3, 7));
  EXPECT_EQ(enc.size(), 36u + 4 * 10 + 4);
  EXPECT_EQ(enc[0], 1);

  RowHeader h2;
  std::vector<float> v2(3), s2(7);
  ASSERT_OK(DecodeRow(enc, 3, 7, &h2, absl::MakeSpan(v2), absl::MakeSpan(s2)));
  EXPECT_EQ(h2, h);
  EXPECT_EQ(v2, values);
  EXPECT_EQ(s2, state);

  int dim = 0, ss = 0;
  ASSERT_OK(PeekRowShape(enc, &dim, &ss));
  EXPECT_EQ(dim, 3);
  EXPECT_EQ(ss, 7);
}

TEST(RowCodecTest, EncodeToVerifyAndCopyAgreeWithEncodeAndDecode) {
  const RowHeader h{.last_update_step = 9, .update_count = 4, .frequency = 11};
  const std::vector<float> values = {1.0f, -0.5f};
  const std::vector<float> state = {0.25f, 8.0f, -3.0f};
  std::string enc;
  EncodeRow(h, values, state, &enc);
  std::string to(EncodedRowSize(2, 3), '\0');
  EncodeRowTo(h, values, state, to.data());
  EXPECT_EQ(to, enc);

  ASSERT_OK(VerifyRow(enc, 2, 3));
  RowHeader h2;
  std::vector<float> v2(2), s2(3);
  CopyVerifiedRow(enc, 2, 3, &h2, v2.data(), s2.data());
  EXPECT_EQ(h2, h);
  EXPECT_EQ(v2, values);
  EXPECT_EQ(s2, state);

  // VerifyRow refuses what DecodeRow refuses.
  for (size_t i = 0; i < enc.size(); ++i) {
    std::string bad = enc;
    bad[i] ^= 0x01;
    EXPECT_THAT(VerifyRow(bad, 2, 3), StatusIs(absl::StatusCode::kDataLoss))
        << "byte " << i;
  }
  EXPECT_THAT(VerifyRow(enc.substr(1), 2, 3),
              StatusIs(absl::StatusCode::kDataLoss));
  EXPECT_THAT(VerifyRow(enc, 3, 2), StatusIs(absl::StatusCode::kDataLoss));
}

TEST(RowCodecTest, EmptyState) {
  std::string enc;
  const std::vector<float> values = {4.0f};
  EncodeRow(RowHeader{}, values, {}, &enc);
  std::vector<float> v(1);
  ASSERT_OK(DecodeRow(enc, 1, 0, nullptr, absl::MakeSpan(v), {}));
  EXPECT_EQ(v[0], 4.0f);
}

TEST(RowCodecTest, EveryCorruptedByteIsDataLoss) {
  const std::vector<float> values = {1, 2, 3, 4};
  const std::vector<float> state = {5, 6, 7, 8};
  std::string enc;
  EncodeRow(RowHeader{1, 2, 3}, values, state, &enc);
  std::vector<float> v(4), s(4);
  for (size_t i = 0; i < enc.size(); ++i) {
    std::string bad = enc;
    bad[i] ^= 0x20;
    EXPECT_THAT(
        DecodeRow(bad, 4, 4, nullptr, absl::MakeSpan(v), absl::MakeSpan(s)),
        StatusIs(absl::StatusCode::kDataLoss))
        << "byte " << i;
  }
  EXPECT_THAT(DecodeRow(enc.substr(0, enc.size() - 1), 4, 4, nullptr,
                        absl::MakeSpan(v), absl::MakeSpan(s)),
              StatusIs(absl::StatusCode::kDataLoss));
  // Right bytes, wrong expected shape.
  std::vector<float> v3(3);
  EXPECT_THAT(
      DecodeRow(enc, 3, 5, nullptr, absl::MakeSpan(v3), absl::MakeSpan(s)),
      StatusIs(absl::StatusCode::kDataLoss));
  std::string newer = enc;
  newer[0] = 2;
  int d, ss;
  EXPECT_THAT(PeekRowShape(newer, &d, &ss),
              StatusIs(absl::StatusCode::kDataLoss));
  EXPECT_THAT(PeekRowShape("xx", &d, &ss),
              StatusIs(absl::StatusCode::kDataLoss));
}

// Found by tests/fuzz/row_codec_fuzz (its regression input is kept under
// tests/fuzz/regressions/row_codec_fuzz/): a row whose reserved bytes are
// not zero but whose checksum matches decoded, and re-encoded to other
// bytes. It is not a row any build wrote: DataLoss.
TEST(RowCodecTest, NonZeroReservedBytesAreDataLoss) {
  const std::vector<float> values = {1, 2};
  std::string enc;
  EncodeRow(RowHeader{1, 2, 3}, values, {}, &enc);
  std::vector<float> v(2);
  for (size_t i : {1, 2, 3}) {
    std::string bad = enc;
    bad[i] = 4;
    // A checksum that matches the changed bytes, as a writer would compute
    // it (store/row_codec.h: low 32 bits of XXH3-64 of the bytes before it).
    const size_t body = bad.size() - kRowChecksumBytes;
    const uint32_t sum =
        static_cast<uint32_t>(Hash64(absl::string_view(bad.data(), body)));
    bad.replace(body, sizeof(sum), reinterpret_cast<const char*>(&sum),
                sizeof(sum));
    const absl::Status status =
        DecodeRow(bad, 2, 0, nullptr, absl::MakeSpan(v), {});
    EXPECT_THAT(status, StatusIs(absl::StatusCode::kDataLoss)) << "byte " << i;
    EXPECT_NE(status.message().find("reserved"), absl::string_view::npos)
        << status;
  }
  ASSERT_OK(DecodeRow(enc, 2, 0, nullptr, absl::MakeSpan(v), {}));
}

}  // namespace
}  // namespace psdb
