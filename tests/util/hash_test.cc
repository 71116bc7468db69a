#include "util/hash.h"

#include "gtest/gtest.h"

namespace psdb {
namespace {

TEST(HashTest, KeyHashIsHashOfLittleEndianBytes) {
  const uint64_t key = 0x0102030405060708ULL;
  const char bytes[8] = {8, 7, 6, 5, 4, 3, 2, 1};
  EXPECT_EQ(HashKey(key, 42), Hash64(absl::string_view(bytes, 8), 42));
}

TEST(HashTest, SeedChangesHash) {
  EXPECT_NE(HashKey(1, 0), HashKey(1, 1));
  EXPECT_EQ(HashKey(1, 7), HashKey(1, 7));
}

TEST(HashTest, XXH3KnownValue) {
  // XXH3_64bits("", seed 0) from the xxHash reference test vectors.
  EXPECT_EQ(Hash64(""), 0x2D06800538D394C2ULL);
}

TEST(HashTest, Mix64IsBijectiveOnSample) {
  EXPECT_EQ(Mix64(0),
            0xe220a8397b1dcdafULL);  // SplitMix64 first output, seed 0.
  EXPECT_NE(Mix64(1), Mix64(2));
}

}  // namespace
}  // namespace psdb
