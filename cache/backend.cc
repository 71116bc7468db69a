#include "cache/backend.h"

#include "cache/cpu_backend.h"

#ifdef PSDB_HAVE_CUDA_BACKEND
#include "cache/cuda_backend.h"
#endif

namespace psdb::cache {

absl::StatusOr<std::unique_ptr<CacheBackend>> MakeBackend(BackendKind kind) {
  switch (kind) {
    case BackendKind::kCpu:
      return std::unique_ptr<CacheBackend>(std::make_unique<CpuBackend>());
    case BackendKind::kCuda:
#ifdef PSDB_HAVE_CUDA_BACKEND
      return CudaBackend::Create();
#else
      return absl::UnimplementedError(
          "this psdb build has no CUDA backend (nvcc was not found when it "
          "was configured)");
#endif
  }
  return absl::InvalidArgumentError("unknown backend kind");
}

}  // namespace psdb::cache
