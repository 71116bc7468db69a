// ClusterMap: the cluster's membership at one epoch (servers with id,
// address, weight and state) and the Ring built from it; psdb's one cluster
// map. RemoteClient routes with it (through shard::Partitioner), ps-server
// checks ownership with it, cluster checkpoints record its ring, and the
// scheduler's wire message (psdb.v1.ClusterMap) is converted to it in one
// place (rpc/wire/cluster_map_proto.h). Every client and server that holds
// the same map computes the same owner for every key. A server that gets a
// request for a key it does not own under its epoch answers
// FAILED_PRECONDITION with its epoch; the client refreshes its map and
// retries (DESIGN.md, shard/).
//
// Epochs: a static list (--servers, FromAddresses) is epoch 1 unless given
// another; ps-scheduler's map is epoch 1 until a membership change
// (add-server, drain-server: rpc/control/README.md) is published, each
// moving it (neither death nor recovery moves keys). The successor maps
// below (WithServer, WithoutServer, WithState) are such changes built
// locally; the scheduler builds its own from its wire map.
//
// Which servers own keys (are on the ring):
//   kAlive   - serving; on the ring.
//   kDead    - stopped answering heartbeats; STILL on the ring. psdb does
//              not replicate, so re-homing a dead server's keys would
//              silently re-create its rows with initial values elsewhere.
//              Its keys fail with UNAVAILABLE until it comes back (a
//              replacement with its node id takes its rank back).
//   kJoining - registered to join a running cluster (ps-server --join),
//              owning no key until add-server puts it on the ring.
//
// Replicas: a shard (one ServerInfo, one id on the ring) may be served by
// several read-only replicas, servers that hold the same rows: `address`
// and then `replicas`. They are a property of the shard, not ring members:
// the ring, and so the owner of every key, is the same with or without
// them. Clients spread a shard's reads over its replicas and fail over
// between them; writes to a shard with replicas are refused
// (rpc/client/remote_client.h). Only a static list names replicas
// ("h1:p1|h2:p2,h3:p3" in ParseReplicatedServerList); the scheduler's map
// has none.
//
// Wire form: ClusterMapSpec is a plain struct for rpc/ to map to and from
// its proto field by field; Create(spec) validates and rebuilds the ring.
// Two maps compare equal iff their canonical specs (servers sorted by id)
// are equal.
//
// Thread-safety: immutable after Create; const methods may be called
// concurrently. Copying is cheap (the ring is shared, never mutated); hold
// a std::shared_ptr<const ClusterMap> and swap it on refresh.
#ifndef PSDB_SHARD_CLUSTER_MAP_H_
#define PSDB_SHARD_CLUSTER_MAP_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "shard/ring.h"

namespace psdb {

enum class ServerState : uint8_t {
  kJoining = 0,
  kAlive = 1,
  kDead = 2,
};

// "joining", "alive", "dead".
absl::string_view ServerStateName(ServerState state);
// Inverse of ServerStateName; nullopt for anything else.
std::optional<ServerState> ParseServerState(absl::string_view name);
// Whether a server in `state` is on the ring (owns keys): kAlive and kDead.
constexpr bool OnRing(ServerState state) {
  return state == ServerState::kAlive || state == ServerState::kDead;
}

struct ServerInfo {
  // Node id / rank. REQUIRES: >= 0, unique in a map.
  ServerId id = kNoServer;
  // "host:port" (IPv6 as "[addr]:port"). REQUIRES: non-empty.
  std::string address;
  // Relative capacity (see RingMember). Default: 1.0
  float weight = 1.0f;
  // Default: kAlive
  ServerState state = ServerState::kAlive;
  // The node id it registered with (PS_NODE_ID), for messages; empty for
  // a static server list. Default: ""
  std::string node_id;
  // The shard's other replicas, besides `address`, in list order (see
  // Replicas above). REQUIRES: each host:port; every address in a map is
  // distinct. Default: none
  std::vector<std::string> replicas;

  // 1 + replicas.size().
  size_t num_replicas() const { return 1 + replicas.size(); }
  // Replica `r` of the shard: `address` for 0, else replicas[r - 1].
  // REQUIRES: r < num_replicas().
  const std::string& replica_address(size_t r) const {
    return r == 0 ? address : replicas[r - 1];
  }

  friend bool operator==(const ServerInfo&, const ServerInfo&) = default;
};

// The plain-data form of a ClusterMap.
struct ClusterMapSpec {
  // Increases with every membership change. Default: 0
  uint64_t epoch = 0;
  RingOptions ring;
  std::vector<ServerInfo> servers;

  friend bool operator==(const ClusterMapSpec&,
                         const ClusterMapSpec&) = default;
};

class ClusterMap {
 public:
  // Validates `spec` (ids; addresses, replicas included, each host:port and
  // named once in the map; weights; ring options) and builds the
  // ring of its kAlive and kDead servers. InvalidArgument names the server
  // at fault.
  static absl::StatusOr<ClusterMap> Create(ClusterMapSpec spec);

  // A static list of addresses in rank order: server ids 0, 1, ... in list
  // order, weight 1, kAlive. InvalidArgument on an empty list or an address
  // that is not host:port.
  static absl::StatusOr<ClusterMap> FromAddresses(
      absl::Span<const std::string> addresses, uint64_t epoch = 1,
      const RingOptions& ring_options = {});
  // The same with replicas: shards[i] are the replicas of server id i (the
  // first its `address`). The ring equals FromAddresses' for as many
  // shards. InvalidArgument also on a shard with no address or an address
  // named twice.
  static absl::StatusOr<ClusterMap> FromReplicatedAddresses(
      absl::Span<const std::vector<std::string>> shards, uint64_t epoch = 1,
      const RingOptions& ring_options = {});
  // FromReplicatedAddresses(ParseReplicatedServerList(list), 1,
  // ring_options): the "h1:p1,h2:p2" (or "h1:p1|h1b:p1,h2:p2") of
  // "servers:" URLs.
  static absl::StatusOr<ClusterMap> FromServerList(
      absl::string_view list, const RingOptions& ring_options = {});
  // A map with no servers at `epoch` (what a ps-server that is alone routes
  // under: it owns every key).
  static ClusterMap Empty(uint64_t epoch);

  // The empty map: epoch 0, no servers, an empty ring.
  ClusterMap();

  uint64_t epoch() const { return spec_.epoch; }
  // Canonical: servers sorted by id.
  const ClusterMapSpec& spec() const { return spec_; }
  absl::Span<const ServerInfo> servers() const { return spec_.servers; }
  // The server with `id`, or nullptr.
  const ServerInfo* Find(ServerId id) const;

  const Ring& ring() const { return *ring_; }
  // The server at `ring_index` (a Partitioner part, a Ring owner index),
  // and its index in servers().
  const ServerInfo& RingServer(size_t ring_index) const {
    return spec_.servers[ring_to_server_[ring_index]];
  }
  size_t RingServerIndex(size_t ring_index) const {
    return ring_to_server_[ring_index];
  }
  // Owner of `key`; kNoServer when no server is on the ring.
  ServerId Owner(uint64_t key) const { return ring_->Owner(key); }
  // Whether `server` owns `key` under this map.
  bool Owns(ServerId server, uint64_t key) const {
    return server != kNoServer && ring_->Owner(key) == server;
  }

  // Successor maps, epoch + 1 (see Epochs above). WithServer adds `server` or
  // replaces the one with its id; WithoutServer and WithState fail with
  // NotFound for an unknown id.
  absl::StatusOr<ClusterMap> WithServer(const ServerInfo& server) const;
  absl::StatusOr<ClusterMap> WithoutServer(ServerId id) const;
  absl::StatusOr<ClusterMap> WithState(ServerId id, ServerState state) const;

  // Whether any server has more than one replica (the map is read-only
  // for clients).
  bool has_replicas() const;

  // One line, e.g. "epoch 3: 0@h:1 alive w=1, 1@h:2|h:3 dead w=2" (a
  // shard's replicas joined by '|').
  std::string DebugString() const;

  friend bool operator==(const ClusterMap& a, const ClusterMap& b) {
    return a.spec_ == b.spec_;
  }

 private:
  ClusterMapSpec spec_;
  std::shared_ptr<const Ring> ring_;
  // Ring index -> index into spec_.servers.
  std::vector<uint32_t> ring_to_server_;
};

// Splits "h1:p1|h1b:p1,h2:p2" into shards (split at ',', in rank order)
// and each shard into its replicas (split at '|'); whitespace around
// addresses is ignored. InvalidArgument naming the list on an empty list,
// an empty shard or replica (",,", "h:1|", "|h:1") or an address that is
// not host:port with a port in 1..65535. (An address named twice is
// refused by ClusterMap::Create.)
absl::StatusOr<std::vector<std::vector<std::string>>> ParseReplicatedServerList(
    absl::string_view list);

// The same for a list without replicas ("h1:p1,h2:p2", as ps-server
// --servers takes): one address per shard; InvalidArgument also on '|'.
absl::StatusOr<std::vector<std::string>> ParseServerList(
    absl::string_view list);

}  // namespace psdb

#endif  // PSDB_SHARD_CLUSTER_MAP_H_
