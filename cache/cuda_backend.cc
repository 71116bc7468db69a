#include "cache/cuda_backend.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "cache/cuda_kernels.h"
#include "util/status_macros.h"

namespace psdb::cache {
namespace {

absl::Status CudaStatus(cudaError_t e, absl::string_view what) {
  if (e == cudaSuccess) return absl::OkStatus();
  return absl::InternalError(
      absl::StrCat("cuda backend: ", what, ": ", cudaGetErrorString(e)));
}

cudaStream_t S(void* s) { return static_cast<cudaStream_t>(s); }

}  // namespace

absl::StatusOr<std::unique_ptr<CacheBackend>> CudaBackend::Create() {
  int devices = 0;
  const cudaError_t e = cudaGetDeviceCount(&devices);
  if (e != cudaSuccess) {
    return absl::FailedPreconditionError(absl::StrCat(
        "no CUDA device: cudaGetDeviceCount failed: ", cudaGetErrorString(e)));
  }
  if (devices == 0) {
    return absl::FailedPreconditionError(
        "no CUDA device: cudaGetDeviceCount found 0 devices");
  }
  std::unique_ptr<CudaBackend> b(new CudaBackend());
  cudaStream_t stream;
  PSDB_RETURN_IF_ERROR(CudaStatus(cudaStreamCreate(&stream), "stream"));
  b->stream_ = stream;
  return std::unique_ptr<CacheBackend>(std::move(b));
}

CudaBackend::~CudaBackend() {
  if (stream_ != nullptr) cudaStreamSynchronize(S(stream_));
  for (Staged& s : buffers_) {
    cudaFree(s.device);
    cudaFreeHost(s.host);
  }
  cudaFree(scratch_.device);
  cudaFree(pool_);
  if (stream_ != nullptr) cudaStreamDestroy(S(stream_));
}

absl::Status CudaBackend::Allocate(int32_t slots, int dim, int state_stride) {
  if (slots < 1 || dim < 1 || state_stride < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("cuda backend: bad shape slots=", slots, " dim=", dim,
                     " state_stride=", state_stride));
  }
  dim_ = dim;
  stride_ = (dim + state_stride + 15) / 16 * 16;  // 64-byte rows
  cudaFree(pool_);
  pool_ = nullptr;
  const size_t bytes = sizeof(float) * static_cast<size_t>(slots) * stride_;
  PSDB_RETURN_IF_ERROR(
      CudaStatus(cudaMalloc(reinterpret_cast<void**>(&pool_), bytes),
                 absl::StrCat("allocating ", bytes, " bytes of slot rows")));
  return CudaStatus(cudaMemsetAsync(pool_, 0, bytes, S(stream_)), "memset");
}

absl::Status CudaBackend::Reserve(int i, size_t bytes) {
  Staged& s = buffers_[i];
  if (bytes <= s.bytes) return absl::OkStatus();
  cudaFree(s.device);
  cudaFreeHost(s.host);
  s.device = s.host = nullptr;
  s.bytes = 0;
  const size_t want = std::max(bytes, 2 * s.bytes);
  PSDB_RETURN_IF_ERROR(CudaStatus(cudaMalloc(&s.device, want), "staging"));
  PSDB_RETURN_IF_ERROR(
      CudaStatus(cudaMallocHost(&s.host, want), "pinned staging"));
  s.bytes = want;
  return absl::OkStatus();
}

absl::StatusOr<void*> CudaBackend::Upload(int i, const void* src,
                                          size_t bytes) {
  PSDB_RETURN_IF_ERROR(Reserve(i, std::max<size_t>(bytes, 4)));
  if (bytes == 0) return buffers_[i].device;
  std::memcpy(buffers_[i].host, src, bytes);
  PSDB_RETURN_IF_ERROR(
      CudaStatus(cudaMemcpyAsync(buffers_[i].device, buffers_[i].host, bytes,
                                 cudaMemcpyHostToDevice, S(stream_)),
                 "upload"));
  return buffers_[i].device;
}

absl::Status CudaBackend::Download(int i, void* dst, size_t bytes) {
  if (bytes == 0) return absl::OkStatus();
  PSDB_RETURN_IF_ERROR(
      CudaStatus(cudaMemcpyAsync(buffers_[i].host, buffers_[i].device, bytes,
                                 cudaMemcpyDeviceToHost, S(stream_)),
                 "download"));
  PSDB_RETURN_IF_ERROR(
      CudaStatus(cudaStreamSynchronize(S(stream_)), "synchronize"));
  std::memcpy(dst, buffers_[i].host, bytes);
  return absl::OkStatus();
}

absl::Status CudaBackend::Sync(int launch_error, const char* what) {
  PSDB_RETURN_IF_ERROR(
      CudaStatus(static_cast<cudaError_t>(launch_error), what));
  return CudaStatus(cudaStreamSynchronize(S(stream_)), what);
}

absl::Status CudaBackend::Write(absl::Span<const int32_t> slots,
                                absl::Span<const float> values,
                                absl::Span<const float> state, int state_size) {
  const int64_t n = slots.size();
  PSDB_ASSIGN_OR_RETURN(void* d_slots, Upload(0, slots.data(), 4 * n));
  PSDB_ASSIGN_OR_RETURN(void* d_values, Upload(1, values.data(), 4 * n * dim_));
  PSDB_ASSIGN_OR_RETURN(void* d_state,
                        Upload(2, state.data(), 4 * n * state_size));
  return Sync(cuda::LaunchScatter(stream_, n, dim_, state_size, stride_,
                                  static_cast<const int32_t*>(d_slots),
                                  static_cast<const float*>(d_values),
                                  static_cast<const float*>(d_state), pool_),
              "scatter");
}

absl::Status CudaBackend::Read(absl::Span<const int32_t> slots,
                               absl::Span<float> values,
                               absl::Span<float> state, int state_size) {
  const int64_t n = slots.size();
  PSDB_ASSIGN_OR_RETURN(void* d_slots, Upload(0, slots.data(), 4 * n));
  PSDB_RETURN_IF_ERROR(Reserve(1, std::max<size_t>(4, 4 * n * dim_)));
  PSDB_RETURN_IF_ERROR(Reserve(2, std::max<size_t>(4, 4 * n * state_size)));
  PSDB_RETURN_IF_ERROR(
      Sync(cuda::LaunchRead(stream_, n, dim_, state_size, stride_,
                            static_cast<const int32_t*>(d_slots), pool_,
                            static_cast<float*>(buffers_[1].device),
                            static_cast<float*>(buffers_[2].device)),
           "read"));
  PSDB_RETURN_IF_ERROR(Download(1, values.data(), 4 * n * dim_));
  return Download(2, state.data(), 4 * n * state_size);
}

absl::Status CudaBackend::Gather(absl::Span<const int32_t> slots,
                                 absl::Span<float> out) {
  const int64_t n = slots.size();
  PSDB_ASSIGN_OR_RETURN(void* d_slots, Upload(0, slots.data(), 4 * n));
  PSDB_RETURN_IF_ERROR(Reserve(1, std::max<size_t>(4, 4 * n * dim_)));
  PSDB_RETURN_IF_ERROR(
      Sync(cuda::LaunchGather(stream_, n, dim_, stride_,
                              static_cast<const int32_t*>(d_slots), pool_,
                              static_cast<float*>(buffers_[1].device)),
           "gather"));
  return Download(1, out.data(), 4 * n * dim_);
}

absl::Status CudaBackend::ApplyGradients(const optim::KernelParams& params,
                                         absl::Span<const int32_t> unique_slots,
                                         absl::Span<const int32_t> offsets,
                                         absl::Span<const int32_t> positions,
                                         absl::Span<const float> grads,
                                         int64_t step) {
  const int64_t n = unique_slots.size();
  PSDB_ASSIGN_OR_RETURN(void* d_slots, Upload(0, unique_slots.data(), 4 * n));
  PSDB_ASSIGN_OR_RETURN(void* d_offsets,
                        Upload(1, offsets.data(), 4 * offsets.size()));
  PSDB_ASSIGN_OR_RETURN(void* d_positions,
                        Upload(2, positions.data(), 4 * positions.size()));
  PSDB_ASSIGN_OR_RETURN(void* d_grads,
                        Upload(3, grads.data(), 4 * grads.size()));
  const size_t scratch_bytes = std::max<size_t>(4, 4 * n * dim_);
  if (scratch_bytes > scratch_.bytes) {
    cudaFree(scratch_.device);
    scratch_.device = nullptr;
    scratch_.bytes = 0;
    PSDB_RETURN_IF_ERROR(
        CudaStatus(cudaMalloc(&scratch_.device, scratch_bytes), "scratch"));
    scratch_.bytes = scratch_bytes;
  }
  return Sync(
      cuda::LaunchApplyGradients(stream_, params, n, dim_, stride_,
                                 static_cast<const int32_t*>(d_slots),
                                 static_cast<const int32_t*>(d_offsets),
                                 static_cast<const int32_t*>(d_positions),
                                 static_cast<const float*>(d_grads), step,
                                 pool_, static_cast<float*>(scratch_.device)),
      "apply gradients");
}

}  // namespace psdb::cache
