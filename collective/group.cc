#include "collective/group.h"

#include <random>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "collective/gloo_all_reducer.h"
#include "rpc/control/rendezvous.h"
#include "util/status_macros.h"
#ifdef PSDB_HAVE_NCCL
#include "collective/nccl_all_reducer.h"
#endif

namespace psdb::collective {
namespace {

// Attempts a job may start before its scheduler is restarted.
constexpr int kMaxAttempts = 100000;

std::string AttemptKey(absl::string_view job, int attempt) {
  return absl::StrCat(job, "/attempts/", attempt);
}

}  // namespace

absl::StatusOr<Backend> ParseBackend(absl::string_view name) {
  if (name == "gloo") return Backend::kGloo;
  if (name == "nccl") return Backend::kNccl;
  return absl::InvalidArgumentError(
      absl::StrCat("dense backend must be gloo or nccl, not '", name, "'"));
}

bool NcclCompiledIn() {
#ifdef PSDB_HAVE_NCCL
  return true;
#else
  return false;
#endif
}

absl::StatusOr<std::string> AgreeOnScope(rpc::SchedulerClient* scheduler,
                                         absl::string_view job, int rank,
                                         absl::Duration timeout) {
  if (job.empty() || job.find('/') != absl::string_view::npos) {
    return absl::InvalidArgumentError(
        absl::StrCat("collective job name '", job, "' must be one segment"));
  }
  PSDB_RETURN_IF_ERROR(rpc::ValidateRendezvousKey(AttemptKey(job, 1)));
  const std::string barrier = absl::StrCat(job, "/dense-rendezvous");
  // 1. Everyone of this attempt is here: no one reads before rank 0 wrote.
  PSDB_RETURN_IF_ERROR(scheduler->Barrier(barrier, timeout));
  int attempt = 0;
  if (rank == 0) {
    // 2. Rank 0 claims the first free attempt number (write-once keys).
    const std::string nonce =
        absl::StrFormat("%016x", std::random_device()() * 0x100000000ULL +
                                     std::random_device()());
    for (int a = 1; a <= kMaxAttempts && attempt == 0; ++a) {
      absl::Status s = scheduler->RendezvousSet(AttemptKey(job, a), nonce);
      if (s.ok()) {
        attempt = a;
      } else if (!absl::IsAlreadyExists(s)) {
        return s;
      }
    }
    if (attempt == 0) {
      return absl::ResourceExhaustedError(absl::StrCat(
          "collective job '", job, "' used all ", kMaxAttempts, " attempts"));
    }
  }
  // 3. The claim is in place; the others take the highest claimed number.
  PSDB_RETURN_IF_ERROR(scheduler->Barrier(barrier, timeout));
  if (rank != 0) {
    for (int a = 1; a <= kMaxAttempts; ++a) {
      absl::StatusOr<std::vector<std::string>> got =
          scheduler->RendezvousGet({AttemptKey(job, a)}, absl::Milliseconds(1));
      if (absl::IsDeadlineExceeded(got.status())) break;
      PSDB_RETURN_IF_ERROR(got.status());
      attempt = a;
    }
    if (attempt == 0) {
      return absl::InternalError(absl::StrCat("collective job '", job,
                                              "': rank 0 claimed no attempt"));
    }
  }
  return absl::StrCat(job, "/", attempt);
}

absl::StatusOr<std::unique_ptr<AllReducer>> OpenAllReducer(
    const AllReducerOptions& options) {
  if (options.scheduler == nullptr || options.world < 1 || options.rank < 0 ||
      options.rank >= options.world) {
    return absl::InvalidArgumentError(absl::StrCat(
        "dense AllReduce needs a scheduler and 0 <= rank < world; got rank ",
        options.rank, " of ", options.world));
  }
#ifndef PSDB_HAVE_NCCL
  if (options.backend == Backend::kNccl) {
    return absl::FailedPreconditionError(
        "dense backend nccl: this build has no NCCL (CUDA and NCCL were not "
        "found at configure time); use gloo");
  }
#endif
  PSDB_ASSIGN_OR_RETURN(std::string scope,
                        AgreeOnScope(options.scheduler, options.job,
                                     options.rank, options.timeout));
  if (options.backend == Backend::kGloo) {
    PSDB_ASSIGN_OR_RETURN(
        std::unique_ptr<GlooAllReducer> gloo,
        GlooAllReducer::Connect(options.scheduler, scope, options.rank,
                                options.world, options.host, options.timeout));
    return std::unique_ptr<AllReducer>(std::move(gloo));
  }
#ifdef PSDB_HAVE_NCCL
  PSDB_ASSIGN_OR_RETURN(
      std::unique_ptr<NcclAllReducer> nccl,
      NcclAllReducer::Connect(options.scheduler, scope, options.rank,
                              options.world, options.cuda_device,
                              options.timeout));
  return std::unique_ptr<AllReducer>(std::move(nccl));
#else
  return absl::InternalError("unreachable");
#endif
}

}  // namespace psdb::collective
