// CudaBackend: cache slot rows in device memory. Transfers go through
// pinned host staging buffers on one stream; scatter, gather and the
// optimizer run as kernels (cache/cuda_kernels.cu) over the row functions
// of cache/row_ops.h, the ones CpuBackend runs. nvcc compiles with
// --fmad=false so device arithmetic rounds like the host's.
//
// Built only when CMake finds nvcc (PSDB_CUDA_ENABLED); MakeBackend(kCuda)
// reaches it. Each call is synchronous: it returns when its copies and
// kernels have finished.
//
// Thread-safety: thread-compatible (see CacheBackend).
#ifndef PSDB_CACHE_CUDA_BACKEND_H_
#define PSDB_CACHE_CUDA_BACKEND_H_

#include <cstddef>
#include <memory>

#include "cache/backend.h"

namespace psdb::cache {

class CudaBackend final : public CacheBackend {
 public:
  // FailedPrecondition "no CUDA device: ..." when cudaGetDeviceCount fails
  // or finds no device.
  static absl::StatusOr<std::unique_ptr<CacheBackend>> Create();
  ~CudaBackend() override;

  absl::string_view name() const override { return "cuda"; }
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
  // A device buffer and its pinned host twin, grown on demand.
  struct Staged {
    void* device = nullptr;
    void* host = nullptr;
    size_t bytes = 0;
  };
  static constexpr int kBuffers = 4;

  CudaBackend() = default;
  absl::Status Reserve(int i, size_t bytes);
  // Copies host bytes to buffer i on the device; returns its device pointer.
  absl::StatusOr<void*> Upload(int i, const void* src, size_t bytes);
  // Copies `bytes` of buffer i back into dst.
  absl::Status Download(int i, void* dst, size_t bytes);
  absl::Status Sync(int launch_error, const char* what);

  void* stream_ = nullptr;  // cudaStream_t
  float* pool_ = nullptr;
  int dim_ = 0;
  int64_t stride_ = 0;
  Staged buffers_[kBuffers];
  Staged scratch_;
};

}  // namespace psdb::cache

#endif  // PSDB_CACHE_CUDA_BACKEND_H_
