// Forming a dense AllReduce group through psdb's scheduler (seed 003:
// "train without OpenMPI by reusing the scheduler"): the workers of a
// cluster agree on a fresh rendezvous scope, then the chosen library (gloo
// over TCP on CPU, NCCL on GPU) exchanges its connection info through the
// scheduler's rendezvous store (rpc/control/rendezvous.h): gloo's full-mesh
// addresses, or NCCL's unique id from ncclGetUniqueId on rank 0.
//
//   PSDB_ASSIGN_OR_RETURN(std::unique_ptr<AllReducer> reducer,
//                         OpenAllReducer({.scheduler = sched, .rank = r,
//                                         .world = w}));
//   PSDB_RETURN_IF_ERROR(reducer->AllReduceSum(absl::MakeSpan(grads)));
//
// Scope: keys live under "<job>/<attempt>/". AgreeOnScope picks the
// attempt: every worker meets at a barrier, rank 0 claims the first free
// attempt number (rendezvous keys are written once), every worker meets
// again and the others read the highest claimed number, so a restarted job
// never reads the previous attempt's addresses.
//
// Thread-safety: OpenAllReducer blocks until every rank has joined (or the
// timeout); the reducer it returns is thread-compatible (all_reducer.h).
#ifndef PSDB_COLLECTIVE_GROUP_H_
#define PSDB_COLLECTIVE_GROUP_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "collective/all_reducer.h"
#include "rpc/control/scheduler_client.h"

namespace psdb::collective {

enum class Backend { kGloo, kNccl };

// "gloo" or "nccl"; InvalidArgument otherwise.
absl::StatusOr<Backend> ParseBackend(absl::string_view name);
// Whether this build has the NCCL path (CUDA and NCCL found at configure).
bool NcclCompiledIn();

struct AllReducerOptions {
  // Default: kGloo
  Backend backend = Backend::kGloo;
  // The worker's scheduler client, registered as a worker (AgreeOnScope
  // meets at barriers). REQUIRED; must outlive the reducer's creation.
  rpc::SchedulerClient* scheduler = nullptr;
  // This worker's rank and the number of workers. REQUIRED: 0 <= rank <
  // world.
  int rank = 0;
  int world = 1;
  // Names the job's keys ([A-Za-z0-9_.:-]+). Default: "ps-train"
  std::string job = "ps-train";
  // gloo: the address this worker's TCP transport binds and gives its
  // peers; empty = this machine's hostname as it resolves. Default: ""
  std::string host;
  // How long to wait for the other workers (rendezvous, each collective).
  // Default: 5 min
  absl::Duration timeout = absl::Minutes(5);
  // NCCL: the CUDA device; -1 = rank modulo the devices found. Default: -1
  int cuda_device = -1;
};

// "<job>/<attempt>" agreed by every worker (see the header).
absl::StatusOr<std::string> AgreeOnScope(rpc::SchedulerClient* scheduler,
                                         absl::string_view job, int rank,
                                         absl::Duration timeout);

// Agrees on a scope, then forms the group. FAILED_PRECONDITION for NCCL
// when the build has no NCCL or the machine no CUDA device (saying which).
absl::StatusOr<std::unique_ptr<AllReducer>> OpenAllReducer(
    const AllReducerOptions& options);

}  // namespace psdb::collective

#endif  // PSDB_COLLECTIVE_GROUP_H_
