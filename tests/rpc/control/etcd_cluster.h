// EtcdCluster: the control-plane tests' etcd, tools/common/local_etcd.h's
// LocalEtcd with its data in a scratch directory removed afterwards.
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
#include "tests/testing/test_util.h"
#include "tools/common/local_etcd.h"

namespace psdb::testing {

class EtcdCluster {
 public:
  static absl::StatusOr<std::unique_ptr<EtcdCluster>> Start(int members = 1);

  std::string endpoints() const { return etcd_->endpoints(); }
  std::vector<std::string> endpoint_list() const {
    return etcd_->endpoint_list();
  }
  int size() const { return etcd_->size(); }
  void Kill(int i) { etcd_->Kill(i); }

 private:
  EtcdCluster() = default;
  ScratchDir dir_;  // outlives etcd_ (declared first)
  std::unique_ptr<tools::LocalEtcd> etcd_;
};

}  // namespace psdb::testing

#endif  // PSDB_TESTS_RPC_CONTROL_ETCD_CLUSTER_H_
