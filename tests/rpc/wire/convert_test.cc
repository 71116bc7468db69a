#include "rpc/wire/convert.h"

#include <cstring>
#include <limits>

#include "gtest/gtest.h"
#include "tests/testing/test_util.h"

namespace psdb::rpc {
namespace {

TEST(ConvertTest, StatusRoundTripKeepsCodeAndMessage) {
  for (absl::StatusCode code :
       {absl::StatusCode::kInvalidArgument, absl::StatusCode::kNotFound,
        absl::StatusCode::kResourceExhausted,
        absl::StatusCode::kFailedPrecondition, absl::StatusCode::kUnavailable,
        absl::StatusCode::kDeadlineExceeded}) {
    const absl::Status in(code, "table 'emb': key 7");
    const grpc::Status wire = ToGrpcStatus(in);
    EXPECT_EQ(static_cast<int>(wire.error_code()), static_cast<int>(code));
    EXPECT_EQ(wire.error_message(), "table 'emb': key 7");
    EXPECT_EQ(FromGrpcStatus(wire), in);
  }
  EXPECT_TRUE(ToGrpcStatus(absl::OkStatus()).ok());
  EXPECT_OK(FromGrpcStatus(grpc::Status::OK));
}

TEST(ConvertTest, FloatsTravelAsLittleEndianBytes) {
  const std::vector<float> values = {1.0f, -2.5f,
                                     std::numeric_limits<float>::denorm_min()};
  std::string bytes;
  FloatsToBytes(values, &bytes);
  ASSERT_EQ(bytes.size(), 12u);
  // 1.0f = 0x3f800000, little-endian.
  EXPECT_EQ(static_cast<unsigned char>(bytes[0]), 0x00);
  EXPECT_EQ(static_cast<unsigned char>(bytes[3]), 0x3f);
  std::vector<float> back(3);
  ASSERT_OK(BytesToFloats(bytes, absl::MakeSpan(back), "values"));
  EXPECT_EQ(0, std::memcmp(back.data(), values.data(), 12));
  EXPECT_THAT(BytesToFloats(bytes.substr(1), absl::MakeSpan(back), "values"),
              StatusIs(absl::StatusCode::kInvalidArgument));
}

TEST(ConvertTest, RowBlockRoundTripAndValidation) {
  RowBatch rows;
  rows.Resize(2, 3, 2);
  for (size_t i = 0; i < rows.values.size(); ++i) rows.values[i] = i + 0.5f;
  for (size_t i = 0; i < rows.state.size(); ++i) rows.state[i] = -1.0f * i;
  rows.headers[1] = RowHeader{7, 3, 9};
  v1::RowBlock block;
  ToProto(rows, &block);
  RowBatch back;
  ASSERT_OK(FromProto(block, 2, &back));
  EXPECT_EQ(back.dim, 2);
  EXPECT_EQ(back.state_size, 3);
  EXPECT_EQ(back.values, rows.values);
  EXPECT_EQ(back.state, rows.state);
  EXPECT_EQ(back.headers, rows.headers);

  EXPECT_THAT(FromProto(block, 3, &back),
              StatusIs(absl::StatusCode::kInvalidArgument));
  v1::RowBlock short_values = block;
  short_values.mutable_values()->resize(15);
  EXPECT_THAT(FromProto(short_values, 2, &back),
              StatusIs(absl::StatusCode::kInvalidArgument));
  v1::RowBlock short_state = block;
  short_state.mutable_state()->append("abcd");
  EXPECT_THAT(FromProto(short_state, 2, &back),
              StatusIs(absl::StatusCode::kInvalidArgument));
}

}  // namespace
}  // namespace psdb::rpc
