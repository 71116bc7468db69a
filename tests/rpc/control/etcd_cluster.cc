#include "tests/rpc/control/etcd_cluster.h"

#include "util/status_macros.h"

namespace psdb::testing {

absl::StatusOr<std::unique_ptr<EtcdCluster>> EtcdCluster::Start(int members) {
  std::unique_ptr<EtcdCluster> cluster(new EtcdCluster());
  tools::LocalEtcdOptions options;
  options.dir = cluster->dir_.path();
  options.members = members;
  PSDB_ASSIGN_OR_RETURN(cluster->etcd_, tools::LocalEtcd::Start(options));
  return cluster;
}

}  // namespace psdb::testing
