#include "cache/cpu_backend.h"

#include "absl/strings/str_cat.h"
#include "cache/row_ops.h"

namespace psdb::cache {

absl::Status CpuBackend::Allocate(int32_t slots, int dim, int state_stride) {
  if (slots < 1 || dim < 1 || state_stride < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("cpu backend: bad shape slots=", slots, " dim=", dim,
                     " state_stride=", state_stride));
  }
  dim_ = dim;
  stride_ = (dim + state_stride + 15) / 16 * 16;  // 64-byte rows
  // 16 spare floats so the rows can start on a 64-byte boundary.
  pool_.assign(static_cast<size_t>(slots) * stride_ + 16, 0.0f);
  const uintptr_t addr = reinterpret_cast<uintptr_t>(pool_.data());
  base_ = pool_.data() + ((64 - addr % 64) % 64) / sizeof(float);
  scratch_.assign(dim, 0.0f);
  return absl::OkStatus();
}

absl::Status CpuBackend::Write(absl::Span<const int32_t> slots,
                               absl::Span<const float> values,
                               absl::Span<const float> state, int state_size) {
  for (size_t i = 0; i < slots.size(); ++i) {
    ScatterRow(i, dim_, state_size, stride_, slots.data(), values.data(),
               state.data(), base_);
  }
  return absl::OkStatus();
}

absl::Status CpuBackend::Read(absl::Span<const int32_t> slots,
                              absl::Span<float> values, absl::Span<float> state,
                              int state_size) {
  for (size_t i = 0; i < slots.size(); ++i) {
    ReadRow(i, dim_, state_size, stride_, slots.data(), base_, values.data(),
            state.data());
  }
  return absl::OkStatus();
}

absl::Status CpuBackend::Gather(absl::Span<const int32_t> slots,
                                absl::Span<float> out) {
  for (size_t i = 0; i < slots.size(); ++i) {
    GatherRow(i, dim_, stride_, slots.data(), base_, out.data());
  }
  return absl::OkStatus();
}

absl::Status CpuBackend::ApplyGradients(const optim::KernelParams& params,
                                        absl::Span<const int32_t> unique_slots,
                                        absl::Span<const int32_t> offsets,
                                        absl::Span<const int32_t> positions,
                                        absl::Span<const float> grads,
                                        int64_t step) {
  for (size_t u = 0; u < unique_slots.size(); ++u) {
    ApplyGradientRow(params, u, dim_, stride_, unique_slots.data(),
                     offsets.data(), positions.data(), grads.data(), step,
                     base_, scratch_.data());
  }
  return absl::OkStatus();
}

}  // namespace psdb::cache
