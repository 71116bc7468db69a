// CacheBackend: where a vocab cache pool keeps its slot rows and runs its
// row math. CpuBackend (cache/cpu_backend.h) uses host memory; CudaBackend
// (cache/cuda_backend.h, built when nvcc is found) device memory with pinned
// staging buffers and one stream. Both run the functions of cache/row_ops.h.
//
// All spans are host memory. Slot indices must be < the allocated slots;
// the caller (VocabCache) guarantees it, the backends do not re-check.
//
// Thread-safety: thread-compatible; VocabCache serializes calls.
#ifndef PSDB_CACHE_BACKEND_H_
#define PSDB_CACHE_BACKEND_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "optim/kernels.h"
#include "psdb/vocab_cache.h"

namespace psdb::cache {

class CacheBackend {
 public:
  virtual ~CacheBackend() = default;

  virtual absl::string_view name() const = 0;

  // Allocates `slots` zeroed rows of dim values + state_stride state floats.
  virtual absl::Status Allocate(int32_t slots, int dim, int state_stride) = 0;

  // Slot slots[i] <- values[i*dim ..), state[i*state_size ..).
  virtual absl::Status Write(absl::Span<const int32_t> slots,
                             absl::Span<const float> values,
                             absl::Span<const float> state, int state_size) = 0;
  // values[i*dim ..), state[i*state_size ..) <- slot slots[i].
  virtual absl::Status Read(absl::Span<const int32_t> slots,
                            absl::Span<float> values, absl::Span<float> state,
                            int state_size) = 0;
  // out[i*dim ..) <- values of slot slots[i] (one entry per batch position).
  virtual absl::Status Gather(absl::Span<const int32_t> slots,
                              absl::Span<float> out) = 0;
  // For each unique row u: sums grads[p*dim ..) over the positions
  // positions[offsets[u] .. offsets[u+1]) (ascending) and applies the
  // optimizer to slot unique_slots[u] at `step`.
  virtual absl::Status ApplyGradients(const optim::KernelParams& params,
                                      absl::Span<const int32_t> unique_slots,
                                      absl::Span<const int32_t> offsets,
                                      absl::Span<const int32_t> positions,
                                      absl::Span<const float> grads,
                                      int64_t step) = 0;
};

// The position lists ApplyGradients takes, from a batch's inverse index
// (position i holds unique row inverse[i], 0 <= inverse[i] < num_unique):
// row u's positions are (*positions)[(*offsets)[u] .. (*offsets)[u+1]),
// ascending. A counting sort.
void GroupPositionsByRow(absl::Span<const int32_t> inverse, size_t num_unique,
                         std::vector<int32_t>* offsets,
                         std::vector<int32_t>* positions);

// A new backend of `kind`: Unimplemented for kCuda when this build has no
// CUDA backend, FailedPrecondition when it has one but no device is present.
absl::StatusOr<std::unique_ptr<CacheBackend>> MakeBackend(BackendKind kind);

}  // namespace psdb::cache

#endif  // PSDB_CACHE_BACKEND_H_
