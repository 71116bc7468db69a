// SchedulerStore: gloo's rendezvous store (gloo::rendezvous::Store:
// set / get / wait) over psdb's scheduler (SchedulerClient::RendezvousSet /
// RendezvousGet, rpc/control/rendezvous.h), so a gloo group forms through
// the cluster's own control plane, in-process or on etcd: no MPI, no Redis,
// no shared file system. Every key gloo uses is put under `scope`
// ("<job>/<attempt>/gloo/"), so a restarted job reads no stale entry.
//
// gloo reports store failures by exception: a failed call throws
// gloo::IoException carrying the scheduler's status message (the callers in
// collective/ catch it and return a Status).
//
// Thread-safety: thread-safe (SchedulerClient is); the client must outlive
// the store.
#ifndef PSDB_COLLECTIVE_SCHEDULER_STORE_H_
#define PSDB_COLLECTIVE_SCHEDULER_STORE_H_

#include <chrono>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "gloo/rendezvous/store.h"
#include "rpc/control/scheduler_client.h"

namespace psdb::collective {

class SchedulerStore final : public gloo::rendezvous::Store {
 public:
  // `scope` is prefixed to every key (a '/' is added when missing);
  // `timeout` bounds get() and wait() without their own timeout.
  SchedulerStore(rpc::SchedulerClient* scheduler, std::string scope,
                 absl::Duration timeout);

  void set(const std::string& key, const std::vector<char>& data) override;
  std::vector<char> get(const std::string& key) override;
  void wait(const std::vector<std::string>& keys) override;
  void wait(const std::vector<std::string>& keys,
            const std::chrono::milliseconds& timeout) override;

  const std::string& scope() const { return scope_; }

 private:
  std::vector<std::string> Scoped(const std::vector<std::string>& keys) const;

  rpc::SchedulerClient* const scheduler_;
  std::string scope_;
  const absl::Duration timeout_;
};

}  // namespace psdb::collective

#endif  // PSDB_COLLECTIVE_SCHEDULER_STORE_H_
