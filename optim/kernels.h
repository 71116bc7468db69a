// The numeric cores of psdb's optimizers, written once for host and device.
//
// Each kernel updates one row given raw pointers; PSDB_HOST_DEVICE makes them
// callable from CUDA kernels (cache/cuda_backend.cu) as well as from the CPU
// paths (optim/optimizer.cc, the store, the CPU cache backend), so the CPU
// tests exercise exactly the math the GPU runs. No allocation, no locks, no
// branches on data beyond what the formulas need; loops are simple so the
// compiler vectorizes them.
//
// Thread-safety: pure functions over caller-owned memory.
#ifndef PSDB_OPTIM_KERNELS_H_
#define PSDB_OPTIM_KERNELS_H_

#include <cstdint>

#if defined(__CUDACC__)
#define PSDB_HOST_DEVICE __host__ __device__
#else
#define PSDB_HOST_DEVICE
#endif

namespace psdb::optim {

// Plain-old-data copy of OptimizerSpec usable on the device.
struct KernelParams {
  int kind;  // OptimizerKind as int
  float learning_rate;
  float momentum;
  bool nesterov;
  float initial_accumulator;
  float beta1;
  float beta2;
  float epsilon;
  float l1;
  float l2;
  float lr_power;
  float weight_decay;
  float accumulator_decay;
};

// Updates value[0..dim) and state with grad[0..dim) at global step `step`.
// The state layout per kind is documented in optimizer.h (StateSize).
PSDB_HOST_DEVICE void ApplyKernel(const KernelParams& p, int dim, float* value,
                                  float* state, const float* grad,
                                  int64_t step);

// Initializes a row's optimizer state.
PSDB_HOST_DEVICE void InitStateKernel(const KernelParams& p, int dim,
                                      float* state);

// Floats of state per row (see optimizer.h).
PSDB_HOST_DEVICE int StateSizeKernel(int kind, int dim);

}  // namespace psdb::optim

// Definitions are inline so nvcc and the host compiler each see them.
#include "optim/kernels_inl.h"

#endif  // PSDB_OPTIM_KERNELS_H_
