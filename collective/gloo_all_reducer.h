// GlooAllReducer: AllReducer over gloo's TCP transport (Debian
// libgloo-dev), its group formed through SchedulerStore. The reduction is
// gloo's ring allreduce with gloo::sum<float>; every rank ends with the
// same bits (each chunk's sum is computed once and passed on).
//
// Thread-safety: thread-compatible (all_reducer.h).
#ifndef PSDB_COLLECTIVE_GLOO_ALL_REDUCER_H_
#define PSDB_COLLECTIVE_GLOO_ALL_REDUCER_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "collective/all_reducer.h"
#include "rpc/control/scheduler_client.h"

namespace gloo {
class Context;
}

namespace psdb::collective {

class GlooAllReducer final : public AllReducer {
 public:
  // Connects the full mesh of `world` ranks through the scheduler's
  // rendezvous under `scope` ("<job>/<attempt>"), binding `host` ("" = the
  // hostname). Errors (a peer that never came, a bad address) name gloo's
  // reason.
  static absl::StatusOr<std::unique_ptr<GlooAllReducer>> Connect(
      rpc::SchedulerClient* scheduler, absl::string_view scope, int rank,
      int world, const std::string& host, absl::Duration timeout);
  ~GlooAllReducer() override;

  int rank() const override { return rank_; }
  int world() const override { return world_; }
  absl::Status AllReduceSum(absl::Span<float> data) override;
  std::string Describe() const override;

 private:
  GlooAllReducer(std::shared_ptr<gloo::Context> context, int rank, int world);

  std::shared_ptr<gloo::Context> context_;
  const int rank_;
  const int world_;
  uint32_t tag_ = 0;
};

}  // namespace psdb::collective

#endif  // PSDB_COLLECTIVE_GLOO_ALL_REDUCER_H_
