#include "train/fm.h"

#include <algorithm>
#include <cstddef>
#include <vector>

namespace psdb::train {

void FmForward(absl::Span<const float> v, int n, int fields, int dim,
               absl::Span<float> out) {
  std::vector<double> sum(dim), sum_sq(dim);
  for (int i = 0; i < n; ++i) {
    const float* x = v.data() + static_cast<size_t>(i) * fields * dim;
    std::fill(sum.begin(), sum.end(), 0.0);
    std::fill(sum_sq.begin(), sum_sq.end(), 0.0);
    for (int f = 0; f < fields; ++f) {
      for (int k = 0; k < dim; ++k) {
        const double e = x[f * dim + k];
        sum[k] += e;
        sum_sq[k] += e * e;
      }
    }
    double fm = 0;
    for (int k = 0; k < dim; ++k) fm += sum[k] * sum[k] - sum_sq[k];
    out[i] = static_cast<float>(0.5 * fm);
  }
}

void FmBackward(absl::Span<const float> v, int n, int fields, int dim,
                absl::Span<const float> dout, absl::Span<float> dv) {
  std::vector<float> sum(dim);
  for (int i = 0; i < n; ++i) {
    const size_t base = static_cast<size_t>(i) * fields * dim;
    const float* x = v.data() + base;
    float* g = dv.data() + base;
    std::fill(sum.begin(), sum.end(), 0.0f);
    for (int f = 0; f < fields; ++f) {
      for (int k = 0; k < dim; ++k) sum[k] += x[f * dim + k];
    }
    for (int f = 0; f < fields; ++f) {
      for (int k = 0; k < dim; ++k) {
        g[f * dim + k] += dout[i] * (sum[k] - x[f * dim + k]);
      }
    }
  }
}

}  // namespace psdb::train
