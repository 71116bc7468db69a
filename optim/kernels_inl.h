// Inline definitions of optim/kernels.h. Included only by kernels.h.
//
// Formulas (g = grad + weight_decay * w, per element):
//  SGD:       w -= lr * g
//  Momentum:  a = momentum * a + g;  w -= lr * a, or with Nesterov
//             w -= lr * (g + momentum * a)
//             (TensorFlow MomentumOptimizer; PyTorch SGD with dampening 0)
//  Adagrad:   s += g^2;  w -= lr * g / (sqrt(s) + eps)      (PyTorch Adagrad)
//  Row-wise Adagrad (FBGEMM): s += mean_j(g_j^2) over the row (one scalar);
//             w -= lr * g / (sqrt(s) + eps)
//  Adam:      m = b1 m + (1-b1) g;  v = b2 v + (1-b2) g^2;
//             w -= lr * (m / (1-b1^t)) / (sqrt(v / (1-b2^t)) + eps)
//             (Kingma & Ba 2015, Algorithm 1; PyTorch Adam), t = global step
//  LazyAdam:  Adam with t = the row's own update count, kept in its state, so
//             the moments and bias correction of a row advance only when the
//             row is in the batch (as DESIGN.md specifies).
//  FTRL-Proximal (McMahan et al. 2013, Algorithm 1; TensorFlow ApplyFtrl):
//             n' = d n + g^2 (d = accumulator_decay, 1 in the paper);
//             sigma = (n'^(-p) - n^(-p)) / lr;
//             z += g - sigma * w;  n = n';
//             w = |z| <= l1 ? 0 : (sign(z) l1 - z) / (n^(-p) / lr + 2 l2)
//             with p = lr_power (-0.5 gives the square roots of the paper).
//
// State layouts: Momentum [a(dim)]; Adagrad [s(dim)]; row-wise [s];
// Adam/LazyAdam [m(dim) v(dim) t]; FTRL [z(dim) n(dim)].
// The step counters are floats: exact to 2^24 updates, past which the bias
// corrections are exactly 1 anyway.
#ifndef PSDB_OPTIM_KERNELS_INL_H_
#define PSDB_OPTIM_KERNELS_INL_H_

#include <cmath>

namespace psdb::optim {

namespace internal {

PSDB_HOST_DEVICE inline float Decayed(const KernelParams& p, float g, float w) {
  return g + p.weight_decay * w;
}

PSDB_HOST_DEVICE inline float PowNeg(float n, float lr_power) {
  // n^(-lr_power); the common lr_power = -0.5 is a square root, -1 is n.
  // Any other power goes through double pow, rounded once to float, as
  // Adam's bias correction does: CUDA's powf and glibc's differ in a float's
  // last bit (seen on an H100: CudaBackendKindTest), their double pows only
  // in a double's last bits, which the rounding to float hides but at a
  // near-tie (about 1 in 10^8 calls).
  if (lr_power == -1.0f) return n;
  if (lr_power == -0.5f) return sqrtf(n);
  return static_cast<float>(
      pow(static_cast<double>(n), -static_cast<double>(lr_power)));
}

PSDB_HOST_DEVICE inline void AdamStep(const KernelParams& p, int dim, float* w,
                                      float* m, float* v, const float* grad,
                                      double t) {
  const float c1 =
      static_cast<float>(1.0 - pow(static_cast<double>(p.beta1), t));
  const float c2 =
      static_cast<float>(1.0 - pow(static_cast<double>(p.beta2), t));
  for (int j = 0; j < dim; ++j) {
    const float g = Decayed(p, grad[j], w[j]);
    m[j] = p.beta1 * m[j] + (1.0f - p.beta1) * g;
    v[j] = p.beta2 * v[j] + (1.0f - p.beta2) * g * g;
    w[j] -= p.learning_rate * (m[j] / c1) / (sqrtf(v[j] / c2) + p.epsilon);
  }
}

}  // namespace internal

PSDB_HOST_DEVICE inline int StateSizeKernel(int kind, int dim) {
  switch (kind) {
    case 0:
      return 0;  // SGD
    case 1:
      return dim;  // Momentum
    case 2:
      return dim;  // Adagrad
    case 3:
      return 1;  // row-wise Adagrad
    case 4:
      return 2 * dim + 1;  // Adam
    case 5:
      return 2 * dim + 1;  // LazyAdam
    case 6:
      return 2 * dim;  // FTRL
    default:
      return 0;
  }
}

PSDB_HOST_DEVICE inline void InitStateKernel(const KernelParams& p, int dim,
                                             float* state) {
  const int size = StateSizeKernel(p.kind, dim);
  const bool accumulators = p.kind == 2 || p.kind == 3;
  for (int i = 0; i < size; ++i)
    state[i] = accumulators ? p.initial_accumulator : 0.0f;
  if (p.kind == 6) {  // FTRL: z = 0, n = initial_accumulator
    for (int j = 0; j < dim; ++j) state[dim + j] = p.initial_accumulator;
  }
}

PSDB_HOST_DEVICE inline void ApplyKernel(const KernelParams& p, int dim,
                                         float* w, float* state,
                                         const float* grad, int64_t step) {
  using internal::Decayed;
  const float lr = p.learning_rate;
  switch (p.kind) {
    case 0:  // SGD
      for (int j = 0; j < dim; ++j) w[j] -= lr * Decayed(p, grad[j], w[j]);
      return;
    case 1: {  // Momentum
      float* a = state;
      for (int j = 0; j < dim; ++j) {
        const float g = Decayed(p, grad[j], w[j]);
        a[j] = p.momentum * a[j] + g;
        w[j] -= p.nesterov ? lr * (g + p.momentum * a[j]) : lr * a[j];
      }
      return;
    }
    case 2: {  // Adagrad
      float* s = state;
      for (int j = 0; j < dim; ++j) {
        const float g = Decayed(p, grad[j], w[j]);
        s[j] += g * g;
        w[j] -= lr * g / (sqrtf(s[j]) + p.epsilon);
      }
      return;
    }
    case 3: {  // Row-wise Adagrad
      float sum = 0.0f;
      for (int j = 0; j < dim; ++j) {
        const float g = Decayed(p, grad[j], w[j]);
        sum += g * g;
      }
      state[0] += sum / static_cast<float>(dim);
      const float scale = lr / (sqrtf(state[0]) + p.epsilon);
      for (int j = 0; j < dim; ++j) w[j] -= scale * Decayed(p, grad[j], w[j]);
      return;
    }
    case 4:    // Adam: bias correction by the global step.
    case 5: {  // LazyAdam: by the row's own update count.
      float* t = state + 2 * dim;
      const double steps = p.kind == 4 ? static_cast<double>(step) : *t + 1.0;
      *t = p.kind == 4 ? static_cast<float>(step) : *t + 1.0f;
      internal::AdamStep(p, dim, w, state, state + dim, grad, steps);
      return;
    }
    case 6: {  // FTRL-Proximal
      float* z = state;
      float* n = state + dim;
      for (int j = 0; j < dim; ++j) {
        const float g = Decayed(p, grad[j], w[j]);
        const float n_new = p.accumulator_decay * n[j] + g * g;
        const float sigma = (internal::PowNeg(n_new, p.lr_power) -
                             internal::PowNeg(n[j], p.lr_power)) /
                            lr;
        z[j] += g - sigma * w[j];
        n[j] = n_new;
        if (fabsf(z[j]) <= p.l1) {
          w[j] = 0.0f;
        } else {
          const float sign = z[j] > 0.0f ? 1.0f : -1.0f;
          w[j] = (sign * p.l1 - z[j]) /
                 (internal::PowNeg(n[j], p.lr_power) / lr + 2.0f * p.l2);
        }
      }
      return;
    }
    default:
      return;
  }
}

}  // namespace psdb::optim

#endif  // PSDB_OPTIM_KERNELS_INL_H_
