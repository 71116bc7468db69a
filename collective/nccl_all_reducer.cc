#include "collective/nccl_all_reducer.h"

#include <cuda_runtime_api.h>
#include <nccl.h>

#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "util/status_macros.h"

namespace psdb::collective {
namespace {

absl::Status Cuda(cudaError_t e, absl::string_view what) {
  if (e == cudaSuccess) return absl::OkStatus();
  return absl::InternalError(
      absl::StrCat("nccl: ", what, ": ", cudaGetErrorString(e)));
}

absl::Status Nccl(ncclResult_t r, absl::string_view what) {
  if (r == ncclSuccess) return absl::OkStatus();
  return absl::UnavailableError(
      absl::StrCat("nccl: ", what, ": ", ncclGetErrorString(r)));
}

}  // namespace

int CudaDeviceCount() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) return 0;
  return n;
}

struct NcclAllReducer::State {
  int device = 0;
  ncclComm_t comm = nullptr;
  cudaStream_t stream = nullptr;
  float* buffer = nullptr;
  size_t capacity = 0;

  ~State() {
    if (comm != nullptr) ncclCommDestroy(comm);
    if (buffer != nullptr) cudaFree(buffer);
    if (stream != nullptr) cudaStreamDestroy(stream);
  }
};

NcclAllReducer::NcclAllReducer(std::unique_ptr<State> state, int rank,
                               int world)
    : state_(std::move(state)), rank_(rank), world_(world) {}

NcclAllReducer::~NcclAllReducer() = default;

absl::StatusOr<std::unique_ptr<NcclAllReducer>> NcclAllReducer::Connect(
    rpc::SchedulerClient* scheduler, absl::string_view scope, int rank,
    int world, int device, absl::Duration timeout) {
  if (scheduler == nullptr || world < 1 || rank < 0 || rank >= world) {
    return absl::InvalidArgumentError(
        absl::StrCat("nccl: need a scheduler and 0 <= rank < world; got rank ",
                     rank, " of ", world));
  }
  const int devices = CudaDeviceCount();
  if (devices == 0) {
    return absl::FailedPreconditionError(
        "nccl: no CUDA device found (use --dense_backend=gloo on CPU)");
  }
  auto state = std::make_unique<State>();
  state->device = device >= 0 ? device : rank % devices;
  PSDB_RETURN_IF_ERROR(Cuda(cudaSetDevice(state->device), "cudaSetDevice"));
  PSDB_RETURN_IF_ERROR(Cuda(cudaStreamCreate(&state->stream), "stream"));
  const std::string key = absl::StrCat(scope, "/nccl/id");
  ncclUniqueId id;
  if (rank == 0) {
    PSDB_RETURN_IF_ERROR(Nccl(ncclGetUniqueId(&id), "ncclGetUniqueId"));
    PSDB_RETURN_IF_ERROR(scheduler->RendezvousSet(
        key, absl::string_view(id.internal, sizeof(id.internal))));
  } else {
    PSDB_ASSIGN_OR_RETURN(std::vector<std::string> values,
                          scheduler->RendezvousGet({key}, timeout));
    if (values[0].size() != sizeof(id.internal)) {
      return absl::DataLossError(
          absl::StrCat("nccl: the unique id under '", key, "' has ",
                       values[0].size(), " bytes, not ", sizeof(id.internal)));
    }
    std::memcpy(id.internal, values[0].data(), sizeof(id.internal));
  }
  PSDB_RETURN_IF_ERROR(Nccl(ncclCommInitRank(&state->comm, world, id, rank),
                            "ncclCommInitRank"));
  return std::unique_ptr<NcclAllReducer>(
      new NcclAllReducer(std::move(state), rank, world));
}

absl::Status NcclAllReducer::AllReduceSum(absl::Span<float> data) {
  if (data.empty()) return absl::OkStatus();
  State& s = *state_;
  PSDB_RETURN_IF_ERROR(Cuda(cudaSetDevice(s.device), "cudaSetDevice"));
  if (s.capacity < data.size()) {
    if (s.buffer != nullptr) cudaFree(s.buffer);
    s.buffer = nullptr;
    s.capacity = 0;
    PSDB_RETURN_IF_ERROR(
        Cuda(cudaMalloc(reinterpret_cast<void**>(&s.buffer), data.size() * 4),
             "cudaMalloc"));
    s.capacity = data.size();
  }
  const size_t bytes = data.size() * sizeof(float);
  PSDB_RETURN_IF_ERROR(Cuda(cudaMemcpyAsync(s.buffer, data.data(), bytes,
                                            cudaMemcpyHostToDevice, s.stream),
                            "copy to device"));
  PSDB_RETURN_IF_ERROR(Nccl(ncclAllReduce(s.buffer, s.buffer, data.size(),
                                          ncclFloat, ncclSum, s.comm, s.stream),
                            "ncclAllReduce"));
  PSDB_RETURN_IF_ERROR(Cuda(cudaMemcpyAsync(data.data(), s.buffer, bytes,
                                            cudaMemcpyDeviceToHost, s.stream),
                            "copy to host"));
  return Cuda(cudaStreamSynchronize(s.stream), "synchronize");
}

std::string NcclAllReducer::Describe() const {
  return absl::StrCat("nccl (cuda device ", state_->device, ", ", world_,
                      " ranks)");
}

}  // namespace psdb::collective
