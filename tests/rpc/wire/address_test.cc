#include "rpc/wire/address.h"

#include "gtest/gtest.h"

namespace psdb::rpc {
namespace {

TEST(JoinHostPortTest, BracketsIpv6OnlyOnce) {
  EXPECT_EQ(JoinHostPort("127.0.0.1", 7100), "127.0.0.1:7100");
  EXPECT_EQ(JoinHostPort("psdb-scheduler", 7100), "psdb-scheduler:7100");
  EXPECT_EQ(JoinHostPort("::1", 7100), "[::1]:7100");
  EXPECT_EQ(JoinHostPort("[::1]", 7100), "[::1]:7100");
  EXPECT_EQ(JoinHostPort("0.0.0.0", 0), "0.0.0.0:0");
}

}  // namespace
}  // namespace psdb::rpc
