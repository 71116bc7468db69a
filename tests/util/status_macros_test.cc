#include "util/status_macros.h"

#include "gtest/gtest.h"
#include "tests/testing/test_util.h"

namespace psdb {
namespace {

absl::StatusOr<int> Half(int x) {
  if (x % 2 != 0) return absl::InvalidArgumentError("odd");
  return x / 2;
}

absl::StatusOr<int> Quarter(int x) {
  PSDB_ASSIGN_OR_RETURN(int h, Half(x));
  PSDB_ASSIGN_OR_RETURN(int q, Half(h));
  return q;
}

absl::Status CheckEven(int x) {
  PSDB_RETURN_IF_ERROR(Half(x).status());
  return absl::OkStatus();
}

TEST(StatusMacrosTest, PropagatesErrorsAndValues) {
  ASSERT_OK_AND_ASSIGN(int q, Quarter(8));
  EXPECT_EQ(q, 2);
  EXPECT_THAT(Quarter(6), StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_OK(CheckEven(4));
  EXPECT_THAT(CheckEven(3), StatusIs(absl::StatusCode::kInvalidArgument));
}

TEST(StatusMacrosTest, AnnotateKeepsCode) {
  absl::Status s = Annotate(absl::NotFoundError("x"), "table t");
  EXPECT_EQ(s.code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(s.message(), "table t: x");
  EXPECT_TRUE(Annotate(absl::OkStatus(), "ctx").ok());
}

}  // namespace
}  // namespace psdb
