#include "util/hash.h"

#include <cstring>

#define XXH_INLINE_ALL
#include <xxhash.h>

namespace psdb {

uint64_t Hash64(absl::string_view data, uint64_t seed) {
  return XXH3_64bits_withSeed(data.data(), data.size(), seed);
}

uint64_t HashKey(uint64_t key, uint64_t seed) {
  unsigned char bytes[8];
  for (int i = 0; i < 8; ++i)
    bytes[i] = static_cast<unsigned char>(key >> (8 * i));
  return XXH3_64bits_withSeed(bytes, sizeof(bytes), seed);
}

}  // namespace psdb
