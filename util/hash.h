// Hashing used wherever psdb needs a stable, platform-independent hash:
// the consistent-hash ring, deterministic row initialization and stripe
// selection. All are XXH3-64 (xxHash), so values never change across builds.
//
// Thread-safety: pure functions.
#ifndef PSDB_UTIL_HASH_H_
#define PSDB_UTIL_HASH_H_

#include <cstddef>
#include <cstdint>

#include "absl/strings/string_view.h"

namespace psdb {

// XXH3-64 of `data` with `seed`.
uint64_t Hash64(absl::string_view data, uint64_t seed = 0);

// XXH3-64 of the 8 little-endian bytes of `key` with `seed`.
uint64_t HashKey(uint64_t key, uint64_t seed = 0);

// SplitMix64 finalizer (Steele, Lea, Flood 2014): a bijective 64-bit mix.
// Cheap enough for per-element use, e.g. counter-based random streams.
constexpr uint64_t Mix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

}  // namespace psdb

#endif  // PSDB_UTIL_HASH_H_
