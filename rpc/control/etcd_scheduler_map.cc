// EtcdScheduler (etcd_scheduler.h): reading and publishing the cluster map,
// and planning and publishing membership changes.
#include <algorithm>
#include <map>
#include <optional>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "rpc/control/etcd_scheduler.h"
#include "util/status_macros.h"

namespace psdb::rpc {

using scheduler_internal::Plural;

absl::StatusOr<EtcdScheduler::MapRead> EtcdScheduler::ReadMap() {
  PSDB_ASSIGN_OR_RETURN(EtcdRange range, etcd_->GetPrefix(Key("members/")));
  const std::string map_key = Key("members/map");
  const std::string node_prefix = Key("members/nodes/");
  std::optional<EtcdKeyValue> ring_kv;
  absl::flat_hash_map<std::string, v1::NodeEntry> nodes;
  int64_t version = 0;
  for (const EtcdKeyValue& kv : range.kvs) {
    version = std::max(version, kv.mod_revision);
    if (kv.key == map_key) {
      ring_kv = kv;
    } else if (absl::StartsWith(kv.key, node_prefix)) {
      v1::NodeEntry entry;
      if (!entry.ParseFromString(kv.value)) {
        return absl::DataLossError(
            absl::StrCat("etcd key ", kv.key, " is not a node entry"));
      }
      nodes[entry.node_id()] = std::move(entry);
    }
  }
  MapRead out;
  out.revision = range.revision;
  v1::ClusterMap& map = out.map;
  map.set_server_num(options_.server_num);
  map.set_worker_num(options_.worker_num);
  map.set_version(static_cast<uint64_t>(version));
  auto add = [&](const v1::NodeEntry& ring_entry, v1::NodeEntry* out_entry) {
    auto it = nodes.find(ring_entry.node_id());
    *out_entry = it != nodes.end() ? it->second : ring_entry;
  };
  if (ring_kv.has_value()) {
    v1::ClusterMap ring;
    if (!ring.ParseFromString(ring_kv->value)) {
      return absl::DataLossError(
          absl::StrCat("etcd key ", map_key, " is not a cluster map"));
    }
    map.set_ready(true);
    map.set_epoch(static_cast<uint64_t>(ring_kv->mod_revision));
    map.set_server_num(ring.server_num());
    absl::flat_hash_set<std::string> on_ring;
    for (const v1::NodeEntry& e : ring.servers()) {
      add(e, map.add_servers());
      on_ring.insert(e.node_id());
    }
    for (const v1::NodeEntry& e : ring.workers()) add(e, map.add_workers());
    // Servers registered to join: JOINING (alive or not) until a
    // published add puts them in the ring.
    for (const auto& [id, entry] : nodes) {
      if (entry.role() != v1::NODE_ROLE_SERVER || on_ring.contains(id)) {
        continue;
      }
      v1::NodeEntry* joining = map.add_servers();
      *joining = entry;
      joining->set_state(v1::NODE_STATE_JOINING);
    }
    std::sort(map.mutable_servers()->begin(), map.mutable_servers()->end(),
              [](const v1::NodeEntry& a, const v1::NodeEntry& b) {
                return a.rank() < b.rank();
              });
    return out;
  }
  // Not ready: the nodes registered so far, in rank order.
  std::vector<const v1::NodeEntry*> sorted;
  for (const auto& [id, entry] : nodes) sorted.push_back(&entry);
  std::sort(sorted.begin(), sorted.end(), [](auto* a, auto* b) {
    return std::make_pair(a->role(), a->rank()) <
           std::make_pair(b->role(), b->rank());
  });
  for (const v1::NodeEntry* e : sorted) {
    *(e->role() == v1::NODE_ROLE_SERVER ? map.add_servers()
                                        : map.add_workers()) = *e;
  }
  return out;
}

absl::Status EtcdScheduler::PublishMapIfComplete() {
  PSDB_ASSIGN_OR_RETURN(EtcdRange ranks, etcd_->GetPrefix(Key("ranks/")));
  std::map<int, std::string> servers, workers;
  const std::string server_prefix = Key("ranks/server/");
  const std::string worker_prefix = Key("ranks/worker/");
  for (const EtcdKeyValue& kv : ranks.kvs) {
    int rank = 0;
    if (absl::StartsWith(kv.key, server_prefix) &&
        absl::SimpleAtoi(kv.key.substr(server_prefix.size()), &rank)) {
      servers[rank] = kv.value;
    } else if (absl::StartsWith(kv.key, worker_prefix) &&
               absl::SimpleAtoi(kv.key.substr(worker_prefix.size()), &rank)) {
      workers[rank] = kv.value;
    }
  }
  if (static_cast<int>(servers.size()) != options_.server_num ||
      static_cast<int>(workers.size()) != options_.worker_num) {
    return absl::OkStatus();
  }
  v1::ClusterMap ring;
  ring.set_ready(true);
  ring.set_server_num(options_.server_num);
  ring.set_worker_num(options_.worker_num);
  auto add = [](int rank, const std::string& id, v1::NodeRole role,
                v1::NodeEntry* e) {
    e->set_node_id(id);
    e->set_role(role);
    e->set_rank(rank);
  };
  for (const auto& [rank, id] : servers) {
    add(rank, id, v1::NODE_ROLE_SERVER, ring.add_servers());
  }
  for (const auto& [rank, id] : workers) {
    add(rank, id, v1::NODE_ROLE_WORKER, ring.add_workers());
  }
  PSDB_ASSIGN_OR_RETURN(
      EtcdTxnResult r,
      etcd_->Txn({EtcdCompare::Absent(Key("members/map"))},
                 {EtcdOp::Put(Key("members/map"), ring.SerializeAsString())},
                 {}));
  if (r.succeeded) {
    Log(absl::StrCat("cluster ready: ", Plural(options_.server_num, "server"),
                     ", ", Plural(options_.worker_num, "worker"), ", epoch ",
                     r.revision));
  }
  return absl::OkStatus();
}

absl::StatusOr<MembershipPlan> EtcdScheduler::PlanMembershipChange(
    const MembershipChange& change) {
  if (closed()) return absl::UnavailableError("scheduler is shutting down");
  MembershipPlan plan;
  PSDB_ASSIGN_OR_RETURN(MapRead read, ReadMap());
  plan.current = std::move(read.map);
  PSDB_ASSIGN_OR_RETURN(
      plan.target, scheduler_internal::MapAfterChange(plan.current, change));
  if (change.kind == MembershipChange::Kind::kAdd) {
    PSDB_ASSIGN_OR_RETURN(
        std::optional<EtcdKeyValue> alive,
        etcd_->Get(Key(absl::StrCat("alive/", change.node_id))));
    if (!alive.has_value()) {
      return absl::FailedPreconditionError(
          absl::StrCat("add-server: joining server node id:", change.node_id,
                       " missed its heartbeats; it must register again first"));
    }
  }
  return plan;
}

absl::StatusOr<v1::ClusterMap> EtcdScheduler::PublishMembershipChange(
    const MembershipChange& change, uint64_t expected_epoch) {
  if (closed()) return absl::UnavailableError("scheduler is shutting down");
  const std::string map_key = Key("members/map");
  const std::string node_key =
      Key(absl::StrCat("members/nodes/", change.node_id));
  const bool add = change.kind == MembershipChange::Kind::kAdd;
  PSDB_ASSIGN_OR_RETURN(MapRead read, ReadMap());
  PSDB_ASSIGN_OR_RETURN(std::optional<EtcdKeyValue> ring_kv,
                        etcd_->Get(map_key));
  PSDB_ASSIGN_OR_RETURN(std::optional<EtcdKeyValue> node_kv,
                        etcd_->Get(node_key));
  if (!ring_kv.has_value() ||
      static_cast<uint64_t>(ring_kv->mod_revision) != expected_epoch ||
      read.map.epoch() != expected_epoch) {
    return absl::FailedPreconditionError(
        absl::StrCat("publish ", MembershipKindName(change.kind),
                     " node id:", change.node_id, ": the map moved to epoch ",
                     ring_kv.has_value() ? ring_kv->mod_revision : 0,
                     " (expected ", expected_epoch, ")"));
  }
  PSDB_RETURN_IF_ERROR(
      scheduler_internal::MapAfterChange(read.map, change).status());
  v1::ClusterMap ring;
  v1::NodeEntry node;
  if (!ring.ParseFromString(ring_kv->value) || !node_kv.has_value() ||
      !node.ParseFromString(node_kv->value)) {
    return absl::DataLossError(
        absl::StrCat("etcd keys ", map_key, " / ", node_key, " unreadable"));
  }
  std::vector<EtcdCompare> compares = {
      EtcdCompare::ModRevisionIs(map_key, ring_kv->mod_revision),
      EtcdCompare::ModRevisionIs(node_key, node_kv->mod_revision)};
  std::vector<EtcdOp> ops;
  if (add) {
    v1::NodeEntry* e = ring.add_servers();
    e->set_node_id(node.node_id());
    e->set_role(v1::NODE_ROLE_SERVER);
    e->set_rank(node.rank());
    std::sort(ring.mutable_servers()->begin(), ring.mutable_servers()->end(),
              [](const v1::NodeEntry& a, const v1::NodeEntry& b) {
                return a.rank() < b.rank();
              });
  } else {
    auto* servers = ring.mutable_servers();
    for (int i = 0; i < servers->size(); ++i) {
      if (servers->Get(i).node_id() == change.node_id) {
        servers->DeleteSubrange(i, 1);
        break;
      }
    }
    ops.push_back(EtcdOp::Delete(node_key));
    ops.push_back(EtcdOp::Delete(Key(absl::StrCat("alive/", change.node_id))));
    ops.push_back(
        EtcdOp::Delete(Key(absl::StrCat("addresses/", node.address()))));
  }
  ring.set_server_num(ring.servers_size());
  ops.push_back(EtcdOp::Put(map_key, ring.SerializeAsString()));
  PSDB_ASSIGN_OR_RETURN(EtcdTxnResult r, etcd_->Txn(compares, ops, {}));
  if (!r.succeeded) {
    // The client may have sent it twice (etcd_client.h): if the map now
    // shows this very change, it was ours.
    PSDB_ASSIGN_OR_RETURN(MapRead now, ReadMap());
    const bool in_map =
        std::any_of(now.map.servers().begin(), now.map.servers().end(),
                    [&](const v1::NodeEntry& e) {
                      return e.node_id() == change.node_id &&
                             e.state() != v1::NODE_STATE_JOINING;
                    });
    if (add != in_map || now.map.epoch() <= expected_epoch) {
      return absl::FailedPreconditionError(absl::StrCat(
          "publish ", MembershipKindName(change.kind),
          " node id:", change.node_id, ": the map changed under it (epoch ",
          now.map.epoch(), ")"));
    }
    return std::move(now.map);
  }
  Log(absl::StrCat("server node id:", node.node_id(), " addr:", node.address(),
                   " rank ", node.rank(),
                   add ? " added to the ring" : " drained (rank retired)",
                   ": epoch ", expected_epoch, " -> ", r.revision, ", ",
                   Plural(ring.server_num(), "server")));
  PSDB_ASSIGN_OR_RETURN(MapRead published, ReadMap());
  return std::move(published.map);
}

}  // namespace psdb::rpc
