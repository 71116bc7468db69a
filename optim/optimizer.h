// Per-row optimizer kernels: the math psdb applies to pushed gradients.
//
// Every optimizer is a pure function over one row:
//   Apply(spec, value[dim], state[StateSize(spec, dim)], grad[dim], step)
// with no locks and no allocation, so the store, the worker cache and the
// CUDA backend all run the same code (the numeric cores live in
// optim/kernels.h as PSDB_HOST_DEVICE functions).
//
// `step` is the 1-based global step of the push (the trainer's step, or the
// table's push counter in embedded mode). Adam uses it for bias correction;
// LazyAdam instead keeps a per-row step count in its state, so a row's
// correction depends only on how often that row was updated.
//
// Thread-safety: all functions are pure; callers serialize access to a row.
#ifndef PSDB_OPTIM_OPTIMIZER_H_
#define PSDB_OPTIM_OPTIMIZER_H_

#include <cstdint>

#include "absl/types/span.h"
#include "optim/kernels.h"
#include "psdb/optimizer.h"

namespace psdb::optim {

// Writes the initial state of a new row (accumulators at
// initial_accumulator, moments and steps at zero).
// REQUIRES: state.size() == StateSize(spec, value_dim).
void InitState(const OptimizerSpec& spec, int dim, absl::Span<float> state);

// Applies one update to one row.
// REQUIRES: value.size() == grad.size() == dim,
//           state.size() == StateSize(spec, dim), step >= 1.
void Apply(const OptimizerSpec& spec, absl::Span<float> value,
           absl::Span<float> state, absl::Span<const float> grad, int64_t step);

// The POD form of `spec` for optim/kernels.h (and CUDA kernels).
KernelParams KernelParamsOf(const OptimizerSpec& spec);

}  // namespace psdb::optim

#endif  // PSDB_OPTIM_OPTIMIZER_H_
