// The CUDA backend's kernels: one thread per row, each calling the shared
// host/device row function of cache/row_ops.h (and optim/kernels.h).
#include <cuda_runtime.h>

#include "cache/cuda_kernels.h"
#include "cache/row_ops.h"

namespace psdb::cache::cuda {
namespace {

constexpr int kThreads = 128;

int Blocks(int64_t n) {
  return static_cast<int>((n + kThreads - 1) / kThreads);
}

__global__ void ScatterKernel(int64_t n, int dim, int state_size,
                              int64_t stride, const int32_t* slots,
                              const float* values, const float* state,
                              float* pool) {
  const int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (i < n) ScatterRow(i, dim, state_size, stride, slots, values, state, pool);
}

__global__ void ReadKernel(int64_t n, int dim, int state_size, int64_t stride,
                           const int32_t* slots, const float* pool,
                           float* values, float* state) {
  const int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (i < n) ReadRow(i, dim, state_size, stride, slots, pool, values, state);
}

__global__ void GatherKernel(int64_t n, int dim, int64_t stride,
                             const int32_t* slots, const float* pool,
                             float* out) {
  const int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (i < n) GatherRow(i, dim, stride, slots, pool, out);
}

__global__ void ApplyKernelRows(optim::KernelParams params, int64_t n, int dim,
                                int64_t stride, const int32_t* unique_slots,
                                const int32_t* offsets,
                                const int32_t* positions, const float* grads,
                                int64_t step, float* pool, float* scratch) {
  const int64_t u = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (u < n) {
    ApplyGradientRow(params, u, dim, stride, unique_slots, offsets, positions,
                     grads, step, pool, scratch + u * dim);
  }
}

int Launched() { return static_cast<int>(cudaGetLastError()); }

}  // namespace

int LaunchScatter(void* stream, int64_t n, int dim, int state_size,
                  int64_t stride, const int32_t* slots, const float* values,
                  const float* state, float* pool) {
  if (n == 0) return 0;
  ScatterKernel<<<Blocks(n), kThreads, 0, static_cast<cudaStream_t>(stream)>>>(
      n, dim, state_size, stride, slots, values, state, pool);
  return Launched();
}

int LaunchRead(void* stream, int64_t n, int dim, int state_size, int64_t stride,
               const int32_t* slots, const float* pool, float* values,
               float* state) {
  if (n == 0) return 0;
  ReadKernel<<<Blocks(n), kThreads, 0, static_cast<cudaStream_t>(stream)>>>(
      n, dim, state_size, stride, slots, pool, values, state);
  return Launched();
}

int LaunchGather(void* stream, int64_t n, int dim, int64_t stride,
                 const int32_t* slots, const float* pool, float* out) {
  if (n == 0) return 0;
  GatherKernel<<<Blocks(n), kThreads, 0, static_cast<cudaStream_t>(stream)>>>(
      n, dim, stride, slots, pool, out);
  return Launched();
}

int LaunchApplyGradients(void* stream, const optim::KernelParams& params,
                         int64_t n_unique, int dim, int64_t stride,
                         const int32_t* unique_slots, const int32_t* offsets,
                         const int32_t* positions, const float* grads,
                         int64_t step, float* pool, float* scratch) {
  if (n_unique == 0) return 0;
  ApplyKernelRows<<<Blocks(n_unique), kThreads, 0,
                    static_cast<cudaStream_t>(stream)>>>(
      params, n_unique, dim, stride, unique_slots, offsets, positions, grads,
      step, pool, scratch);
  return Launched();
}

}  // namespace psdb::cache::cuda
