// NcclAllReducer: AllReducer over NCCL on a CUDA device, built only when
// CUDA and NCCL are found (PSDB_NCCL_ENABLED; the machine image ships NCCL
// with the CUDA toolkit). Rank 0 calls ncclGetUniqueId and publishes it
// through the scheduler's rendezvous under "<scope>/nccl/id"; every rank
// reads it and calls ncclCommInitRank. AllReduceSum copies the host span to
// a device buffer, runs ncclAllReduce(ncclSum, ncclFloat) on the reducer's
// stream and copies the result back (the trainer's MLP lives on the host).
//
// Thread-safety: thread-compatible (all_reducer.h).
#ifndef PSDB_COLLECTIVE_NCCL_ALL_REDUCER_H_
#define PSDB_COLLECTIVE_NCCL_ALL_REDUCER_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "collective/all_reducer.h"
#include "rpc/control/scheduler_client.h"

namespace psdb::collective {

// CUDA devices this process sees; 0 when none (or the driver fails).
int CudaDeviceCount();

class NcclAllReducer final : public AllReducer {
 public:
  // FAILED_PRECONDITION when no CUDA device is present; `device` -1 = rank
  // modulo the device count.
  static absl::StatusOr<std::unique_ptr<NcclAllReducer>> Connect(
      rpc::SchedulerClient* scheduler, absl::string_view scope, int rank,
      int world, int device, absl::Duration timeout);
  ~NcclAllReducer() override;

  int rank() const override { return rank_; }
  int world() const override { return world_; }
  absl::Status AllReduceSum(absl::Span<float> data) override;
  std::string Describe() const override;

 private:
  struct State;
  NcclAllReducer(std::unique_ptr<State> state, int rank, int world);

  std::unique_ptr<State> state_;
  const int rank_;
  const int world_;
};

}  // namespace psdb::collective

#endif  // PSDB_COLLECTIVE_NCCL_ALL_REDUCER_H_
