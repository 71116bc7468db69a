// CpuBackend: cache slot rows in host memory, row math from cache/row_ops.h.
//
// Thread-safety: thread-compatible (see CacheBackend).
#ifndef PSDB_CACHE_CPU_BACKEND_H_
#define PSDB_CACHE_CPU_BACKEND_H_

#include <cstdint>
#include <vector>

#include "cache/backend.h"

namespace psdb::cache {

class CpuBackend final : public CacheBackend {
 public:
  absl::string_view name() const override { return "cpu"; }
  absl::Status Allocate(int32_t slots, int dim, int state_stride) override;
  absl::Status Write(absl::Span<const int32_t> slots,
                     absl::Span<const float> values,
                     absl::Span<const float> state, int state_size) override;
  absl::Status Read(absl::Span<const int32_t> slots, absl::Span<float> values,
                    absl::Span<float> state, int state_size) override;
  absl::Status Gather(absl::Span<const int32_t> slots,
                      absl::Span<float> out) override;
  absl::Status ApplyGradients(const optim::KernelParams& params,
                              absl::Span<const int32_t> unique_slots,
                              absl::Span<const int32_t> offsets,
                              absl::Span<const int32_t> positions,
                              absl::Span<const float> grads,
                              int64_t step) override;

 private:
  int dim_ = 0;
  int64_t stride_ = 0;
  std::vector<float> pool_;
  float* base_ = nullptr;  // first row, 64-byte aligned, inside pool_
  std::vector<float> scratch_;
};

}  // namespace psdb::cache

#endif  // PSDB_CACHE_CPU_BACKEND_H_
