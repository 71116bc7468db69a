// PullConsistent: RemoteClient's read of several tables over every shard
// involved at one version (psdb/parameter_client.h). Internal to
// psdb_client.
//
// Each round sends every server involved its keys of every table in
// PullTables requests (one per server, more when the keys pass
// max_batch_keys), all naming the same version: options.version, or none
// (each replica's newest) in a first round. When the answers name
// different versions, the newest version that every answer's
// held_versions holds, and that is not older than the floor (the newest
// version this client returned), is asked of the requests that answered
// another. A request that then finds its version gone (NOT_FOUND: the
// replica dropped it, or another replica of the shard answered) starts a
// new round, as does a round with no common version, after a backoff
// (RemoteOptions' initial_backoff doubling to max_backoff), until the
// deadline: then FAILED_PRECONDITION naming each server's versions.
// Answers from servers without versions (training) are one "version".
//
// Thread-safety: PullConsistent is thread-safe; the floor is shared by
// a client's calls.
#ifndef PSDB_RPC_CLIENT_CONSISTENT_READ_H_
#define PSDB_RPC_CLIENT_CONSISTENT_READ_H_

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "psdb/parameter_client.h"
#include "rpc/client/fan_out.h"

namespace psdb::rpc::internal {

// The newest version a client has returned; what it returns without a
// named version never goes below it.
class VersionFloor {
 public:
  ReadVersion Get() const {
    absl::MutexLock lock(&mu_);
    return newest_;
  }
  // Raises the floor to `v` if it is newer (by seq).
  void Raise(const ReadVersion& v) {
    absl::MutexLock lock(&mu_);
    if (!v.checkpoint_id.empty() &&
        (newest_.checkpoint_id.empty() || v.seq > newest_.seq)) {
      newest_ = v;
    }
  }

 private:
  mutable absl::Mutex mu_;
  ReadVersion newest_ ABSL_GUARDED_BY(mu_);
};

// The rows of `reads` at one version, returned (see above). dims[i] is
// reads[i].table's dim. REQUIRES: reads[i].out.size() == keys * dims[i].
absl::StatusOr<ReadVersion> PullConsistent(FanOut& fan_out,
                                           absl::Span<const TableRead> reads,
                                           absl::Span<const int> dims,
                                           const ConsistentReadOptions& options,
                                           absl::Time deadline,
                                           VersionFloor* floor);

}  // namespace psdb::rpc::internal

#endif  // PSDB_RPC_CLIENT_CONSISTENT_READ_H_
