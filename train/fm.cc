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

int FwFmPairs(int fields) { return fields * (fields - 1) / 2; }

void FwFmForward(absl::Span<const float> v, absl::Span<const float> r, int n,
                 int fields, int dim, absl::Span<float> out) {
  for (int i = 0; i < n; ++i) {
    const float* x = v.data() + static_cast<size_t>(i) * fields * dim;
    double sum = 0;
    int pair = 0;
    for (int f = 0; f < fields; ++f) {
      for (int g = f + 1; g < fields; ++g, ++pair) {
        float dot = 0;
        for (int k = 0; k < dim; ++k) dot += x[f * dim + k] * x[g * dim + k];
        sum += static_cast<double>(r[pair]) * dot;
      }
    }
    out[i] = static_cast<float>(sum);
  }
}

void FwFmBackward(absl::Span<const float> v, absl::Span<const float> r, int n,
                  int fields, int dim, absl::Span<const float> dout,
                  absl::Span<float> dv, absl::Span<float> dr) {
  std::vector<double> dr_sum(dr.size(), 0.0);
  for (int i = 0; i < n; ++i) {
    const size_t base = static_cast<size_t>(i) * fields * dim;
    const float* x = v.data() + base;
    float* gx = dv.data() + base;
    int pair = 0;
    for (int f = 0; f < fields; ++f) {
      for (int g = f + 1; g < fields; ++g, ++pair) {
        const float* a = x + f * dim;
        const float* b = x + g * dim;
        float dot = 0;
        for (int k = 0; k < dim; ++k) dot += a[k] * b[k];
        dr_sum[pair] += static_cast<double>(dout[i]) * dot;
        const float w = dout[i] * r[pair];
        for (int k = 0; k < dim; ++k) {
          gx[f * dim + k] += w * b[k];
          gx[g * dim + k] += w * a[k];
        }
      }
    }
  }
  for (size_t p = 0; p < dr.size(); ++p) dr[p] = static_cast<float>(dr_sum[p]);
}

}  // namespace psdb::train
