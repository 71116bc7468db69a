#include "shard/cluster_map.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "util/status_macros.h"

namespace psdb {
namespace {

absl::Status ValidateAddress(absl::string_view address) {
  const size_t colon = address.rfind(':');
  uint32_t port = 0;
  if (address.empty() || colon == absl::string_view::npos || colon == 0 ||
      !absl::SimpleAtoi(address.substr(colon + 1), &port) || port == 0 ||
      port > 65535 || std::any_of(address.begin(), address.end(), [](char c) {
        return absl::ascii_isspace(static_cast<unsigned char>(c)) || c == ',' ||
               c == '|';
      })) {
    return absl::InvalidArgumentError(absl::StrCat(
        "address \"", address, "\" is not host:port with a port in 1..65535"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::string_view ServerStateName(ServerState state) {
  switch (state) {
    case ServerState::kJoining:
      return "joining";
    case ServerState::kAlive:
      return "alive";
    case ServerState::kDead:
      return "dead";
  }
  return "unknown";
}

std::optional<ServerState> ParseServerState(absl::string_view name) {
  for (ServerState s :
       {ServerState::kJoining, ServerState::kAlive, ServerState::kDead}) {
    if (name == ServerStateName(s)) return s;
  }
  return std::nullopt;
}

ClusterMap::ClusterMap() : ring_(std::make_shared<const Ring>()) {}

absl::StatusOr<ClusterMap> ClusterMap::Create(ClusterMapSpec spec) {
  std::sort(
      spec.servers.begin(), spec.servers.end(),
      [](const ServerInfo& a, const ServerInfo& b) { return a.id < b.id; });
  std::vector<RingMember> members;
  std::vector<uint32_t> ring_to_server;
  // Address -> the server naming it, to refuse an address named twice.
  absl::flat_hash_map<absl::string_view, ServerId> address_owner;
  for (size_t i = 0; i < spec.servers.size(); ++i) {
    const ServerInfo& s = spec.servers[i];
    if (s.id < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("cluster map: server id must be >= 0, got ", s.id));
    }
    if (i > 0 && spec.servers[i - 1].id == s.id) {
      return absl::InvalidArgumentError(
          absl::StrCat("cluster map: duplicate server id ", s.id));
    }
    for (size_t r = 0; r < s.num_replicas(); ++r) {
      const std::string& address = s.replica_address(r);
      if (absl::Status st = ValidateAddress(address); !st.ok()) {
        return Annotate(st, absl::StrCat("cluster map: server ", s.id));
      }
      auto [it, inserted] = address_owner.try_emplace(address, s.id);
      if (!inserted) {
        return absl::InvalidArgumentError(absl::StrCat(
            "cluster map: address ", address, " is named twice (servers ",
            it->second, " and ", s.id, ")"));
      }
    }
    if (!std::isfinite(s.weight) || s.weight <= 0.0f) {
      return absl::InvalidArgumentError(
          absl::StrCat("cluster map: server ", s.id, " has weight ", s.weight,
                       "; weights must be finite and > 0"));
    }
    if (s.state != ServerState::kJoining && s.state != ServerState::kAlive &&
        s.state != ServerState::kDead) {
      return absl::InvalidArgumentError(
          absl::StrCat("cluster map: server ", s.id, " has unknown state ",
                       static_cast<int>(s.state)));
    }
    if (OnRing(s.state)) {
      members.push_back({s.id, s.weight});
      ring_to_server.push_back(static_cast<uint32_t>(i));
    }
  }
  PSDB_ASSIGN_OR_RETURN(Ring ring, Ring::Create(spec.ring, members));
  ClusterMap map;
  map.spec_ = std::move(spec);
  map.ring_ = std::make_shared<const Ring>(std::move(ring));
  map.ring_to_server_ = std::move(ring_to_server);
  return map;
}

absl::StatusOr<std::vector<std::vector<std::string>>> ParseReplicatedServerList(
    absl::string_view list) {
  if (absl::StripAsciiWhitespace(list).empty()) {
    return absl::InvalidArgumentError("server list is empty");
  }
  std::vector<std::vector<std::string>> shards;
  for (absl::string_view entry : absl::StrSplit(list, ',')) {
    std::vector<std::string>& replicas = shards.emplace_back();
    for (absl::string_view address : absl::StrSplit(entry, '|')) {
      address = absl::StripAsciiWhitespace(address);
      if (absl::Status st = ValidateAddress(address); !st.ok()) {
        return Annotate(st, absl::StrCat("server list \"", list, "\""));
      }
      replicas.emplace_back(address);
    }
  }
  return shards;
}

absl::StatusOr<std::vector<std::string>> ParseServerList(
    absl::string_view list) {
  PSDB_ASSIGN_OR_RETURN(std::vector<std::vector<std::string>> shards,
                        ParseReplicatedServerList(list));
  std::vector<std::string> addresses;
  for (size_t i = 0; i < shards.size(); ++i) {
    if (shards[i].size() > 1) {
      return absl::InvalidArgumentError(absl::StrCat(
          "server list \"", list, "\": shard ", i, " names ", shards[i].size(),
          " replicas ('|'); this list takes one address per server"));
    }
    addresses.push_back(std::move(shards[i][0]));
  }
  return addresses;
}

absl::StatusOr<ClusterMap> ClusterMap::FromAddresses(
    absl::Span<const std::string> addresses, uint64_t epoch,
    const RingOptions& ring_options) {
  std::vector<std::vector<std::string>> shards;
  for (const std::string& address : addresses) shards.push_back({address});
  return FromReplicatedAddresses(shards, epoch, ring_options);
}

absl::StatusOr<ClusterMap> ClusterMap::FromReplicatedAddresses(
    absl::Span<const std::vector<std::string>> shards, uint64_t epoch,
    const RingOptions& ring_options) {
  if (shards.empty()) {
    return absl::InvalidArgumentError("server list is empty");
  }
  ClusterMapSpec spec;
  spec.epoch = epoch;
  spec.ring = ring_options;
  for (const std::vector<std::string>& replicas : shards) {
    ServerInfo server;
    server.id = static_cast<ServerId>(spec.servers.size());
    if (replicas.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("server list: shard ", server.id, " has no address"));
    }
    server.address = replicas[0];
    server.replicas.assign(replicas.begin() + 1, replicas.end());
    spec.servers.push_back(std::move(server));
  }
  return Create(std::move(spec));
}

absl::StatusOr<ClusterMap> ClusterMap::FromServerList(
    absl::string_view list, const RingOptions& ring_options) {
  PSDB_ASSIGN_OR_RETURN(std::vector<std::vector<std::string>> shards,
                        ParseReplicatedServerList(list));
  return FromReplicatedAddresses(shards, 1, ring_options);
}

ClusterMap ClusterMap::Empty(uint64_t epoch) {
  ClusterMap map;
  map.spec_.epoch = epoch;
  return map;
}

const ServerInfo* ClusterMap::Find(ServerId id) const {
  auto it = std::lower_bound(
      spec_.servers.begin(), spec_.servers.end(), id,
      [](const ServerInfo& s, ServerId target) { return s.id < target; });
  if (it == spec_.servers.end() || it->id != id) return nullptr;
  return &*it;
}

absl::StatusOr<ClusterMap> ClusterMap::WithServer(
    const ServerInfo& server) const {
  ClusterMapSpec spec = spec_;
  ++spec.epoch;
  auto it =
      std::find_if(spec.servers.begin(), spec.servers.end(),
                   [&](const ServerInfo& s) { return s.id == server.id; });
  if (it != spec.servers.end()) {
    *it = server;
  } else {
    spec.servers.push_back(server);
  }
  return Create(std::move(spec));
}

absl::StatusOr<ClusterMap> ClusterMap::WithoutServer(ServerId id) const {
  if (Find(id) == nullptr) {
    return absl::NotFoundError(
        absl::StrCat("cluster map epoch ", epoch(), " has no server ", id));
  }
  ClusterMapSpec spec = spec_;
  ++spec.epoch;
  std::erase_if(spec.servers, [id](const ServerInfo& s) { return s.id == id; });
  return Create(std::move(spec));
}

absl::StatusOr<ClusterMap> ClusterMap::WithState(ServerId id,
                                                 ServerState state) const {
  const ServerInfo* found = Find(id);
  if (found == nullptr) {
    return absl::NotFoundError(
        absl::StrCat("cluster map epoch ", epoch(), " has no server ", id));
  }
  ServerInfo server = *found;
  server.state = state;
  return WithServer(server);
}

bool ClusterMap::has_replicas() const {
  return std::any_of(spec_.servers.begin(), spec_.servers.end(),
                     [](const ServerInfo& s) { return !s.replicas.empty(); });
}

std::string ClusterMap::DebugString() const {
  return absl::StrCat(
      "epoch ", spec_.epoch, ": ",
      absl::StrJoin(spec_.servers, ", ",
                    [](std::string* out, const ServerInfo& s) {
                      absl::StrAppend(out, s.id, "@", s.address);
                      for (const std::string& r : s.replicas) {
                        absl::StrAppend(out, "|", r);
                      }
                      absl::StrAppend(out, " ", ServerStateName(s.state),
                                      " w=", s.weight);
                    }));
}

}  // namespace psdb
