#include "cache/backend.h"

#include "cache/cpu_backend.h"

#ifdef PSDB_HAVE_CUDA_BACKEND
#include "cache/cuda_backend.h"
#endif

namespace psdb::cache {

void GroupPositionsByRow(absl::Span<const int32_t> inverse, size_t num_unique,
                         std::vector<int32_t>* offsets,
                         std::vector<int32_t>* positions) {
  offsets->assign(num_unique + 1, 0);
  for (int32_t u : inverse) ++(*offsets)[u + 1];
  for (size_t u = 0; u < num_unique; ++u) (*offsets)[u + 1] += (*offsets)[u];
  positions->resize(inverse.size());
  std::vector<int32_t> fill(offsets->begin(), offsets->end() - 1);
  for (size_t i = 0; i < inverse.size(); ++i) {
    (*positions)[fill[inverse[i]]++] = static_cast<int32_t>(i);
  }
}

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
