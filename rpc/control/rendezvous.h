// Rendezvous: the scheduler's small key-value store through which workers
// exchange a collective library's connection info (gloo's addresses,
// NCCL's unique id) before a dense AllReduce (collective/), as MindSpore's
// PS mode reuses its scheduler instead of MPI (seed 003). SchedulerService's
// RendezvousSet / RendezvousGet (rpc/wire/psdb.proto) serve it from either
// backend: MemoryRendezvous (below) in the in-process Scheduler, etcd keys
// under /psdb/<cluster>/rendezvous/ in EtcdScheduler.
//
// Rules both backends keep:
//  - Keys are [A-Za-z0-9_.:/-]{1,256}, '/'-separated segments none of which
//    is empty, "." or ".."; callers scope them by job and attempt
//    ("<job>/<attempt>/gloo/0") so a restarted job reads no stale entry.
//  - Values are at most kMaxRendezvousValueBytes.
//  - A key is written once: writing the same value again is OK (a call
//    re-sent after a fail-over), another value is ALREADY_EXISTS.
//  - Get waits until every key exists and returns the values in order;
//    DEADLINE_EXCEEDED names the keys still missing.
//
// Thread-safety: MemoryRendezvous is thread-safe; Get blocks its caller.
#ifndef PSDB_RPC_CONTROL_RENDEZVOUS_H_
#define PSDB_RPC_CONTROL_RENDEZVOUS_H_

#include <cstddef>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "absl/types/span.h"

namespace psdb::rpc {

inline constexpr size_t kMaxRendezvousKeyBytes = 256;
inline constexpr size_t kMaxRendezvousValueBytes = 1 << 20;
// Keys one Get may ask for.
inline constexpr size_t kMaxRendezvousGetKeys = 1024;
// Keys the in-process scheduler holds (etcd has its own quota).
inline constexpr size_t kMaxRendezvousEntries = 65536;

// InvalidArgument naming the key and what is wrong with it.
absl::Status ValidateRendezvousKey(absl::string_view key);
// Key, then value size.
absl::Status ValidateRendezvousSet(absl::string_view key,
                                   absl::string_view value);
// 1..kMaxRendezvousGetKeys valid keys.
absl::Status ValidateRendezvousGet(absl::Span<const std::string> keys);
// DEADLINE_EXCEEDED "rendezvous: timed out waiting for key(s) a, b".
absl::Status RendezvousTimeout(absl::Span<const std::string> missing);

// The in-process scheduler's rendezvous store.
class MemoryRendezvous {
 public:
  MemoryRendezvous() = default;
  MemoryRendezvous(const MemoryRendezvous&) = delete;
  MemoryRendezvous& operator=(const MemoryRendezvous&) = delete;

  // RESOURCE_EXHAUSTED once kMaxRendezvousEntries keys are held.
  absl::Status Set(absl::string_view key, absl::string_view value);
  // UNAVAILABLE once closed.
  absl::StatusOr<std::vector<std::string>> Get(
      absl::Span<const std::string> keys, absl::Time deadline);
  // Wakes every Get with UNAVAILABLE; later calls fail at once.
  void Close();

 private:
  absl::Mutex mu_;
  absl::flat_hash_map<std::string, std::string> entries_ ABSL_GUARDED_BY(mu_);
  bool closed_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace psdb::rpc

#endif  // PSDB_RPC_CONTROL_RENDEZVOUS_H_
