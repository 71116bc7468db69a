// Launchers of the CUDA backend's kernels (cache/cuda_kernels.cu). Plain
// pointers only, so nvcc compiles nothing but this file's implementation
// and cache/row_ops.h; cache/cuda_backend.cc (host compiler) calls them.
// Every pointer is device memory; `stream` is a cudaStream_t. Each kernel
// runs one thread per row and calls the cache/row_ops.h function the CPU
// backend calls. Launchers return a cudaError_t as int (0 = success).
//
// Thread-safety: calls on one stream are ordered by CUDA.
#ifndef PSDB_CACHE_CUDA_KERNELS_H_
#define PSDB_CACHE_CUDA_KERNELS_H_

#include <cstdint>

#include "optim/kernels.h"

namespace psdb::cache::cuda {

int LaunchScatter(void* stream, int64_t n, int dim, int state_size,
                  int64_t stride, const int32_t* slots, const float* values,
                  const float* state, float* pool);
int LaunchRead(void* stream, int64_t n, int dim, int state_size, int64_t stride,
               const int32_t* slots, const float* pool, float* values,
               float* state);
int LaunchGather(void* stream, int64_t n, int dim, int64_t stride,
                 const int32_t* slots, const float* pool, float* out);
int LaunchApplyGradients(void* stream, const optim::KernelParams& params,
                         int64_t n_unique, int dim, int64_t stride,
                         const int32_t* unique_slots, const int32_t* offsets,
                         const int32_t* positions, const float* grads,
                         int64_t step, float* pool, float* scratch);

}  // namespace psdb::cache::cuda

#endif  // PSDB_CACHE_CUDA_KERNELS_H_
