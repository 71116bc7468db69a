#include "rpc/wire/cluster_map_proto.h"

#include <utility>

#include "absl/strings/str_cat.h"

namespace psdb::rpc {

absl::StatusOr<ClusterMap> ClusterMapFromProto(const v1::ClusterMap& map) {
  if (!map.ready()) {
    return absl::FailedPreconditionError(
        absl::StrCat("cluster map not ready (", map.servers_size(), " of ",
                     map.server_num(), " servers registered)"));
  }
  ClusterMapSpec spec;
  spec.epoch = map.epoch();
  for (const v1::NodeEntry& entry : map.servers()) {
    ServerInfo server;
    server.id = entry.rank();
    server.address = entry.address();
    server.node_id = entry.node_id();
    switch (entry.state()) {
      case v1::NODE_STATE_DEAD:
        server.state = ServerState::kDead;
        break;
      case v1::NODE_STATE_JOINING:
        server.state = ServerState::kJoining;
        break;
      default:
        server.state = ServerState::kAlive;
    }
    spec.servers.push_back(std::move(server));
  }
  return ClusterMap::Create(std::move(spec));
}

}  // namespace psdb::rpc
