// The cache's per-row numeric operations, written once for host and device:
// the CPU backend calls them in loops, the CUDA backend (cuda_backend.cu)
// calls the same functions from one-thread-per-row kernels, so the CPU tests
// run the math the GPU runs.
//
// Slot storage layout (both backends): slot s is one contiguous row of
// `stride` >= dim + state_stride floats, values first, then the optimizer
// state (state_stride >= the state size of every table sharing the pool);
// backends round the stride up to 64 bytes so rows start on cache lines.
//
// Gradient sums follow the store's order exactly (store/table_push.cc, Push):
// the first occurrence's gradient is copied, later ones are added in
// position order, so a write-back cache produces the store's bits.
//
// Thread-safety: pure functions over caller-owned memory.
#ifndef PSDB_CACHE_ROW_OPS_H_
#define PSDB_CACHE_ROW_OPS_H_

#include <cstdint>

#include "optim/kernels.h"

namespace psdb::cache {

// Rows never overlap; __restrict__ lets the host compiler vectorize.
PSDB_HOST_DEVICE inline void CopyRow(int n, const float* __restrict__ src,
                                     float* __restrict__ dst) {
  for (int j = 0; j < n; ++j) dst[j] = src[j];
}

// out row i <- values of slot slots[i].
PSDB_HOST_DEVICE inline void GatherRow(int64_t i, int dim, int64_t stride,
                                       const int32_t* slots, const float* pool,
                                       float* out) {
  CopyRow(dim, pool + slots[i] * stride, out + i * dim);
}

// Slot slots[i] <- values row i and state row i (state_size floats).
PSDB_HOST_DEVICE inline void ScatterRow(int64_t i, int dim, int state_size,
                                        int64_t stride, const int32_t* slots,
                                        const float* values, const float* state,
                                        float* pool) {
  float* row = pool + slots[i] * stride;
  CopyRow(dim, values + i * dim, row);
  if (state_size > 0) CopyRow(state_size, state + i * state_size, row + dim);
}

// values row i, state row i <- slot slots[i].
PSDB_HOST_DEVICE inline void ReadRow(int64_t i, int dim, int state_size,
                                     int64_t stride, const int32_t* slots,
                                     const float* pool, float* values,
                                     float* state) {
  const float* row = pool + slots[i] * stride;
  CopyRow(dim, row, values + i * dim);
  if (state_size > 0) CopyRow(state_size, row + dim, state + i * state_size);
}

// sum <- grads[positions[begin]] + grads[positions[begin+1]] + ... in order.
// REQUIRES: begin < end.
PSDB_HOST_DEVICE inline void SumGradients(int dim, const float* grads,
                                          const int32_t* positions,
                                          int32_t begin, int32_t end,
                                          float* sum) {
  CopyRow(dim, grads + static_cast<int64_t>(positions[begin]) * dim, sum);
  for (int32_t k = begin + 1; k < end; ++k) {
    const float* g = grads + static_cast<int64_t>(positions[k]) * dim;
    for (int j = 0; j < dim; ++j) sum[j] += g[j];
  }
}

// Applies unique row u's summed gradient to its slot: the optimizer step
// the store's Push would apply. `scratch` holds dim floats.
PSDB_HOST_DEVICE inline void ApplyGradientRow(
    const optim::KernelParams& params, int64_t u, int dim, int64_t stride,
    const int32_t* unique_slots, const int32_t* offsets,
    const int32_t* positions, const float* grads, int64_t step, float* pool,
    float* scratch) {
  SumGradients(dim, grads, positions, offsets[u], offsets[u + 1], scratch);
  float* row = pool + unique_slots[u] * stride;
  optim::ApplyKernel(params, dim, row, row + dim, scratch, step);
}

}  // namespace psdb::cache

#endif  // PSDB_CACHE_ROW_OPS_H_
