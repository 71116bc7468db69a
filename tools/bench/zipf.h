// Key streams for benchmarks: Zipf-distributed ranks, scrambled into keys.
//
// ZipfSampler draws ranks k in [1, n] with P(k) proportional to k^-alpha by
// rejection-inversion (W. Hormann, G. Derflinger, "Rejection-inversion to
// generate variates from monotone discrete distributions", ACM TOMACS 6(3),
// 1996; the variant of Apache Commons RNG's RejectionInversionZipfSampler):
// O(1) time and memory per sample for any n and any alpha > 0, exact, with
// an acceptance rate close to 1.
//
// ScrambleKey maps rank r to SplitMix64's bijective mix of r, so distinct
// ranks give distinct keys and the hot keys are spread over the key space
// instead of being numerically adjacent (as real hashed feature ids are).
//
// Thread-safety: a ZipfSampler/SplitMix is used by one thread.
#ifndef PSDB_TOOLS_BENCH_ZIPF_H_
#define PSDB_TOOLS_BENCH_ZIPF_H_

#include <cstdint>
#include <vector>

#include "util/hash.h"

namespace psdb::bench {

// SplitMix64 generator (Steele, Lea, Flood 2014): fast, 64-bit state.
class SplitMix {
 public:
  explicit SplitMix(uint64_t seed) : state_(seed) {}
  uint64_t Next() {
    const uint64_t r = Mix64(state_);  // Mix64 adds the golden gamma itself
    state_ += 0x9e3779b97f4a7c15ULL;
    return r;
  }
  // Uniform in [0, 1) with 53 random bits.
  double NextDouble() { return static_cast<double>(Next() >> 11) * 0x1.0p-53; }

 private:
  uint64_t state_;
};

class ZipfSampler {
 public:
  // REQUIRES: n >= 1, alpha > 0.
  ZipfSampler(uint64_t n, double alpha);
  // A rank in [1, n]; rank 1 is the most frequent.
  uint64_t Sample(SplitMix& rng) const;

 private:
  double H(double x) const;  // x^-alpha
  double HIntegral(
      double x) const;  // integral of H: (x^(1-alpha) - 1)/(1-alpha)
  double HIntegralInverse(double x) const;

  uint64_t n_;
  double alpha_;
  double h_integral_x1_;
  double h_integral_n_;
  double s_;
};

// Key of rank r (0-based): a bijection of uint64, seeded.
inline uint64_t ScrambleKey(uint64_t rank, uint64_t seed) {
  return Mix64(rank ^ seed);
}

// `batches` batches of `batch_keys` keys each, concatenated: Zipf(alpha)
// ranks over [0, rows), scrambled with ScrambleKey(., seed).
std::vector<uint64_t> ZipfKeyStream(uint64_t rows, double alpha,
                                    uint64_t batches, uint64_t batch_keys,
                                    uint64_t seed);

}  // namespace psdb::bench

#endif  // PSDB_TOOLS_BENCH_ZIPF_H_
