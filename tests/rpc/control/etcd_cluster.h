// EtcdCluster: real etcd members (Debian's /usr/bin/etcd) on loopback for
// the control-plane tests, each with its data in a scratch directory, its
// client and peer ports picked free, started and stopped by the test.
//
//   ASSERT_OK_AND_ASSIGN(auto etcd, EtcdCluster::Start(3));
//   etcd->endpoints();   // "127.0.0.1:p1,127.0.0.1:p2,127.0.0.1:p3"
//   etcd->Kill(0);       // SIGKILL one member; the other two keep quorum
//
// Thread-safety: one thread.
#ifndef PSDB_TESTS_RPC_CONTROL_ETCD_CLUSTER_H_
#define PSDB_TESTS_RPC_CONTROL_ETCD_CLUSTER_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "tests/testing/child_process.h"
#include "tests/testing/test_util.h"

namespace psdb::testing {

class EtcdCluster {
 public:
  // Starts `members` members forming one cluster and waits (up to
  // `timeout`) until a client reaches one that knows a leader.
  static absl::StatusOr<std::unique_ptr<EtcdCluster>> Start(
      int members = 1, absl::Duration timeout = absl::Seconds(60));
  ~EtcdCluster();  // SIGKILLs what still runs.

  // "127.0.0.1:port,..." of every member (PS_ETCD_ENDPOINTS, --etcd).
  std::string endpoints() const;
  std::vector<std::string> endpoint_list() const { return clients_; }
  int size() const { return static_cast<int>(clients_.size()); }
  // SIGKILLs member i and reaps it.
  void Kill(int i);

 private:
  EtcdCluster() = default;
  ScratchDir dir_;
  std::vector<std::string> clients_;  // host:port per member
  std::vector<std::unique_ptr<ChildProcess>> members_;
};

}  // namespace psdb::testing

#endif  // PSDB_TESTS_RPC_CONTROL_ETCD_CLUSTER_H_
