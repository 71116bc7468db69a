#include "tools/bench/zipf.h"

#include <algorithm>
#include <cmath>

namespace psdb::bench {
namespace {

// log1p(x)/x, accurate near 0.
double Helper1(double x) {
  return std::abs(x) > 1e-8 ? std::log1p(x) / x
                            : 1.0 - x * (0.5 - x * (1.0 / 3.0 - 0.25 * x));
}

// expm1(x)/x, accurate near 0.
double Helper2(double x) {
  return std::abs(x) > 1e-8
             ? std::expm1(x) / x
             : 1.0 + x * 0.5 * (1.0 + x * (1.0 / 3.0) * (1.0 + 0.25 * x));
}

}  // namespace

ZipfSampler::ZipfSampler(uint64_t n, double alpha) : n_(n), alpha_(alpha) {
  h_integral_x1_ = HIntegral(1.5) - 1.0;
  h_integral_n_ = HIntegral(static_cast<double>(n_) + 0.5);
  s_ = 2.0 - HIntegralInverse(HIntegral(2.5) - H(2.0));
}

double ZipfSampler::H(double x) const {
  return std::exp(-alpha_ * std::log(x));
}

double ZipfSampler::HIntegral(double x) const {
  const double log_x = std::log(x);
  return Helper2((1.0 - alpha_) * log_x) * log_x;
}

double ZipfSampler::HIntegralInverse(double x) const {
  double t = x * (1.0 - alpha_);
  if (t < -1.0) t = -1.0;  // rounding can push t just below the domain
  return std::exp(Helper1(t) * x);
}

uint64_t ZipfSampler::Sample(SplitMix& rng) const {
  while (true) {
    const double u =
        h_integral_n_ + rng.NextDouble() * (h_integral_x1_ - h_integral_n_);
    const double x = HIntegralInverse(u);
    double kd = std::floor(x + 0.5);
    kd = std::clamp(kd, 1.0, static_cast<double>(n_));
    const uint64_t k = static_cast<uint64_t>(kd);
    if (kd - x <= s_ || u >= HIntegral(kd + 0.5) - H(kd)) return k;
  }
}

std::vector<uint64_t> ZipfKeyStream(uint64_t rows, double alpha,
                                    uint64_t batches, uint64_t batch_keys,
                                    uint64_t seed) {
  ZipfSampler zipf(rows, alpha);
  SplitMix rng(seed * 0x2545f4914f6cdd1dULL + 1);
  std::vector<uint64_t> keys(batches * batch_keys);
  for (uint64_t& k : keys) k = ScrambleKey(zipf.Sample(rng) - 1, seed);
  return keys;
}

}  // namespace psdb::bench
