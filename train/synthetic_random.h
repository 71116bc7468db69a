// Internal to train/synthetic*.cc: the counter-based and sequential random
// numbers of the synthetic generator, and the id bijection. Everything here
// is a pure function of its inputs, the same on every platform, so the same
// seed writes the same bytes anywhere.
//
// Thread-safety: functions are pure; an Rng is thread-compatible.
#ifndef PSDB_TRAIN_SYNTHETIC_RANDOM_H_
#define PSDB_TRAIN_SYNTHETIC_RANDOM_H_

#include <cmath>
#include <cstdint>

#include "util/hash.h"

namespace psdb::train::synthetic_internal {

inline constexpr double kTwoPi = 6.283185307179586;

// Counter-based uniform in [0, 1) from a 64-bit hash (53 bits).
inline double ToUnit(uint64_t h) {
  return static_cast<double>(h >> 11) * 0x1.0p-53;
}

// A standard normal determined by `h` (Box-Muller on two derived draws).
inline double NormalOf(uint64_t h) {
  const double u1 = ToUnit(Mix64(h)) + 0x1.0p-54;  // (0, 1)
  const double u2 = ToUnit(Mix64(h ^ 0x5851f42d4c957f2dULL));
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(kTwoPi * u2);
}

// A sequential stream (SplitMix64), the same on every platform.
class Rng {
 public:
  explicit Rng(uint64_t seed) : state_(seed) {}
  uint64_t Next() { return Mix64(state_++ * 0x9e3779b97f4a7c15ULL); }
  double Uniform() { return ToUnit(Next()); }
  double Normal() { return NormalOf(Next()); }

 private:
  uint64_t state_;
};

// MurmurHash3's fmix32: a bijection on 32-bit values.
inline uint32_t Scramble32(uint32_t x) {
  x ^= x >> 16;
  x *= 0x85ebca6bu;
  x ^= x >> 13;
  x *= 0xc2b2ae35u;
  x ^= x >> 16;
  return x;
}

// The inverse of Scramble32: each step undone in reverse order (the
// multipliers' inverses mod 2^32; x ^= x >> 13 is undone by x ^= x >> 13 ^
// x >> 26).
inline uint32_t Unscramble32(uint32_t x) {
  x ^= x >> 16;
  x *= 0x7ed1b41du;
  x ^= (x >> 13) ^ (x >> 26);
  x *= 0xa5cb9243u;
  x ^= x >> 16;
  return x;
}

}  // namespace psdb::train::synthetic_internal

#endif  // PSDB_TRAIN_SYNTHETIC_RANDOM_H_
