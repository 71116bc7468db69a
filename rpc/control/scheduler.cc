#include "rpc/control/scheduler.h"

#include <algorithm>
#include <climits>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <thread>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "grpcpp/grpcpp.h"
#include "rpc/control/etcd_scheduler.h"
#include "rpc/control/migration_coordinator.h"
#include "rpc/control/node_config.h"
#include "rpc/control/scheduler_metrics.h"
#include "rpc/wire/address.h"
#include "rpc/wire/convert.h"
#include "rpc/wire/metrics_http.h"
#include "rpc/wire/psdb.grpc.pb.h"
#include "util/file_io.h"
#include "util/status_macros.h"

namespace psdb::rpc {
namespace scheduler_internal {

absl::string_view RoleWord(v1::NodeRole role) {
  return role == v1::NODE_ROLE_SERVER ? "server" : "worker";
}

std::string Plural(int n, absl::string_view word) {
  return absl::StrCat(n, " ", word, n == 1 ? "" : "s");
}

void LogLine(const SchedulerOptions& options, absl::string_view line) {
  if (options.log) {
    options.log(line);
    return;
  }
  std::fprintf(stderr, "ps-scheduler: %.*s\n", static_cast<int>(line.size()),
               line.data());
  std::fflush(stderr);
}

absl::Status ValidateRegistration(const SchedulerOptions& options,
                                  const v1::RegisterRequest& req) {
  PSDB_RETURN_IF_ERROR(ValidateNodeId(req.node_id()));
  if (req.role() != v1::NODE_ROLE_SERVER &&
      req.role() != v1::NODE_ROLE_WORKER) {
    return absl::InvalidArgumentError(absl::StrCat(
        "node id:", req.node_id(), ": role must be server or worker"));
  }
  const absl::string_view role = RoleWord(req.role());
  if (req.join() && req.role() != v1::NODE_ROLE_SERVER) {
    return absl::InvalidArgumentError(absl::StrCat(
        "node id:", req.node_id(), ": only a server joins (join=true)"));
  }
  if (req.role() == v1::NODE_ROLE_SERVER && req.address().empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "server node id:", req.node_id(), " registered without an address"));
  }
  if (req.has_server_num() && req.server_num() != options.server_num) {
    return absl::InvalidArgumentError(absl::StrCat(
        role, " node id:", req.node_id(), " has PS_SERVER_NUM=",
        req.server_num(), " but the scheduler has ", options.server_num));
  }
  if (req.has_worker_num() && req.worker_num() != options.worker_num) {
    return absl::InvalidArgumentError(absl::StrCat(
        role, " node id:", req.node_id(), " has PS_WORKER_NUM=",
        req.worker_num(), " but the scheduler has ", options.worker_num));
  }
  return absl::OkStatus();
}

absl::Status ValidateBarrierName(absl::string_view name) {
  if (name.empty() || name.size() > 256) {
    return absl::InvalidArgumentError("barrier name must be 1..256 bytes");
  }
  return absl::OkStatus();
}

absl::Status ValidateStepClock(int64_t finished_step, int staleness) {
  if (finished_step < 0 || staleness < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("step clock: finished_step (", finished_step,
                     ") and staleness (", staleness, ") must be >= 0"));
  }
  return absl::OkStatus();
}

absl::StatusOr<v1::ClusterMap> MapAfterChange(const v1::ClusterMap& now,
                                              const MembershipChange& change) {
  const absl::string_view verb = change.kind == MembershipChange::Kind::kAdd
                                     ? "add-server"
                                     : "drain-server";
  if (!now.ready() || now.epoch() == 0) {
    return absl::FailedPreconditionError(absl::StrCat(
        verb, " node id:", change.node_id, ": the cluster is not ready"));
  }
  int found = -1;
  int on_ring = 0;
  for (int i = 0; i < now.servers_size(); ++i) {
    const v1::NodeEntry& e = now.servers(i);
    if (e.node_id() == change.node_id) found = i;
    if (e.state() == v1::NODE_STATE_JOINING) continue;
    ++on_ring;
    if (e.state() == v1::NODE_STATE_DEAD) {
      return absl::FailedPreconditionError(absl::StrCat(
          verb, " node id:", change.node_id, ": server node id:", e.node_id(),
          " addr:", e.address(), " rank ", e.rank(),
          " is dead; its rows cannot move (bring it back first)"));
    }
  }
  if (found < 0) {
    return absl::NotFoundError(absl::StrCat(verb, ": node id:", change.node_id,
                                            " is not a server of the map"));
  }
  const v1::NodeEntry& node = now.servers(found);
  v1::ClusterMap after = now;
  after.set_epoch(0);
  if (change.kind == MembershipChange::Kind::kAdd) {
    if (node.state() != v1::NODE_STATE_JOINING) {
      return absl::FailedPreconditionError(
          absl::StrCat(verb, ": server node id:", node.node_id(), " rank ",
                       node.rank(), " is already on the ring"));
    }
    after.mutable_servers(found)->set_state(v1::NODE_STATE_ALIVE);
    after.set_server_num(on_ring + 1);
  } else {
    if (node.state() != v1::NODE_STATE_ALIVE) {
      return absl::FailedPreconditionError(
          absl::StrCat(verb, ": server node id:", node.node_id(), " rank ",
                       node.rank(), " is joining, not on the ring"));
    }
    if (on_ring == 1) {
      return absl::FailedPreconditionError(absl::StrCat(
          verb, ": server node id:", node.node_id(),
          " is the last server on the ring; its rows have nowhere to go"));
    }
    after.mutable_servers()->DeleteSubrange(found, 1);
    after.set_server_num(on_ring - 1);
  }
  return after;
}

}  // namespace scheduler_internal

absl::string_view MembershipKindName(MembershipChange::Kind kind) {
  return kind == MembershipChange::Kind::kAdd ? "add" : "drain";
}

using scheduler_internal::Plural;
using scheduler_internal::RoleWord;

absl::Status ValidateSchedulerOptions(const SchedulerOptions& options) {
  if (options.server_num < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("server_num must be >= 1, got ", options.server_num));
  }
  if (options.worker_num < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("worker_num must be >= 0, got ", options.worker_num));
  }
  if (options.port < 0 || options.port > 65535) {
    return absl::InvalidArgumentError(
        absl::StrCat("port out of range: ", options.port));
  }
  if (options.metrics_port < -1 || options.metrics_port > 65535) {
    return absl::InvalidArgumentError(
        absl::StrCat("metrics_port out of range: ", options.metrics_port));
  }
  if (!options.etcd_endpoints.empty()) {
    if (options.lease_ttl < absl::Seconds(2) ||
        options.lease_ttl <= 2 * options.heartbeat_interval) {
      return absl::InvalidArgumentError(
          absl::StrCat("lease_ttl must be >= 2s and > 2 * heartbeat_interval (",
                       absl::FormatDuration(options.heartbeat_interval),
                       "), got ", absl::FormatDuration(options.lease_ttl)));
    }
    if (!options.recovery_path.empty()) {
      return absl::InvalidArgumentError(
          "recovery_path (PS_ENABLE_RECOVERY) and etcd are exclusive: with "
          "etcd the membership already survives a scheduler restart");
    }
  }
  if (options.cluster.empty() || options.cluster.size() > 64 ||
      options.cluster.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKL"
                                        "MNOPQRSTUVWXYZ0123456789_.-") !=
          std::string::npos) {
    return absl::InvalidArgumentError(
        absl::StrCat("cluster name must match [A-Za-z0-9_.-]{1,64}, got '",
                     options.cluster, "'"));
  }
  if (options.heartbeat_interval <= absl::ZeroDuration() ||
      options.heartbeat_timeout <= options.heartbeat_interval) {
    return absl::InvalidArgumentError(
        absl::StrCat("need 0 < heartbeat_interval < heartbeat_timeout, got ",
                     absl::FormatDuration(options.heartbeat_interval), " and ",
                     absl::FormatDuration(options.heartbeat_timeout)));
  }
  return absl::OkStatus();
}

Scheduler::Scheduler(const SchedulerOptions& options)
    : options_(options), server_num_(options.server_num) {}

void Scheduler::Log(absl::string_view line) const {
  scheduler_internal::LogLine(options_, line);
}

bool Scheduler::ReadyLocked() const {
  return static_cast<int>(servers_.size()) == options_.server_num &&
         static_cast<int>(workers_.size()) == options_.worker_num;
}

v1::ClusterMap Scheduler::MapLocked() const {
  v1::ClusterMap map;
  map.set_epoch(epoch_);
  map.set_version(version_);
  map.set_ready(epoch_ > 0);
  map.set_server_num(server_num_);
  map.set_worker_num(options_.worker_num);
  map.set_next_server_rank(next_server_rank_);
  auto add = [&](const std::string& id, v1::NodeEntry* e) {
    const Node& n = nodes_.at(id);
    e->set_node_id(n.id);
    e->set_role(n.role);
    e->set_rank(n.rank);
    e->set_address(n.address);
    // A joining server stays off the ring dead or alive.
    e->set_state(n.joining ? v1::NODE_STATE_JOINING
                 : n.alive ? v1::NODE_STATE_ALIVE
                           : v1::NODE_STATE_DEAD);
  };
  for (const std::string& id : servers_) add(id, map.add_servers());
  for (const std::string& id : workers_) add(id, map.add_workers());
  return map;
}

std::string Scheduler::MissingLocked() const {
  return absl::StrFormat("%d of %d servers and %d of %d workers registered",
                         servers_.size(), options_.server_num, workers_.size(),
                         options_.worker_num);
}

std::string Scheduler::RecoveryFile() const {
  return absl::StrCat(options_.recovery_path, "/scheduler_membership.pb");
}

absl::Status Scheduler::PersistLocked() const {
  if (options_.recovery_path.empty()) return absl::OkStatus();
  // Synced file and directory: a restarted scheduler recovers the
  // membership it acknowledged, even after a power cut.
  const FileIo& io = LocalFileIo();
  PSDB_RETURN_IF_ERROR(io.CreateDirs(options_.recovery_path));
  return io.WriteFileAtomically(RecoveryFile(),
                                MapLocked().SerializeAsString());
}

absl::Status Scheduler::Recover(absl::Time now) {
  if (options_.recovery_path.empty()) return absl::OkStatus();
  const std::string path = RecoveryFile();
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    Log(absl::StrCat("recovery: no membership saved at ", path,
                     "; starting empty"));
    return absl::OkStatus();
  }
  v1::ClusterMap saved;
  if (!saved.ParseFromIstream(&in)) {
    return absl::DataLossError(
        absl::StrCat(path, " is not a saved membership"));
  }
  // After a membership change (epoch > 1) the saved server count follows
  // the changes, and the options' is the count the cluster was formed with.
  if ((saved.epoch() <= 1 && saved.server_num() != options_.server_num) ||
      saved.worker_num() != options_.worker_num) {
    return absl::InvalidArgumentError(absl::StrCat(
        path, " holds a cluster of ", saved.server_num(), " servers and ",
        saved.worker_num(), " workers; PS_SERVER_NUM=", options_.server_num,
        " PS_WORKER_NUM=", options_.worker_num));
  }
  absl::MutexLock lock(&mu_);
  auto load = [&](const v1::NodeEntry& e, std::vector<std::string>* ranks) {
    Node node;
    node.id = e.node_id();
    node.role = e.role();
    node.rank = e.rank();
    node.address = e.address();
    node.joining = e.state() == v1::NODE_STATE_JOINING;
    node.last_beat = now;
    ranks->push_back(node.id);
    nodes_.emplace(node.id, std::move(node));
  };
  for (const v1::NodeEntry& e : saved.servers()) load(e, &servers_);
  for (const v1::NodeEntry& e : saved.workers()) load(e, &workers_);
  epoch_ = saved.epoch();
  version_ = saved.version() + 1;
  if (saved.epoch() > 1) server_num_ = saved.server_num();
  next_server_rank_ =
      std::max<int>(saved.next_server_rank(), saved.servers_size());
  for (const v1::NodeEntry& e : saved.servers()) {
    next_server_rank_ = std::max(next_server_rank_, e.rank() + 1);
  }
  Log(absl::StrCat("recovery: reloaded ", servers_.size(), " servers and ",
                   workers_.size(), " workers from ", path, ", epoch ",
                   epoch_));
  return absl::OkStatus();
}

v1::ClusterMap Scheduler::Map() const {
  absl::MutexLock lock(&mu_);
  return MapLocked();
}

absl::StatusOr<v1::RegisterResponse> Scheduler::Register(
    const v1::RegisterRequest& req, absl::Time now) {
  PSDB_RETURN_IF_ERROR(scheduler_internal::ValidateRegistration(options_, req));
  const absl::string_view role = RoleWord(req.role());

  absl::MutexLock lock(&mu_);
  if (closed_) return absl::UnavailableError("scheduler is shutting down");
  if (req.join() && epoch_ == 0) {
    return absl::FailedPreconditionError(absl::StrCat(
        "refused server node id:", req.node_id(),
        ": a server joins a running cluster, and this one is not ready yet (",
        MissingLocked(), "); start it without --join (PS_JOIN)"));
  }
  std::vector<std::string>& ranks =
      req.role() == v1::NODE_ROLE_SERVER ? servers_ : workers_;
  const int limit = req.role() == v1::NODE_ROLE_SERVER ? options_.server_num
                                                       : options_.worker_num;
  if (req.role() == v1::NODE_ROLE_SERVER) {
    for (const std::string& id : servers_) {
      const Node& other = nodes_.at(id);
      if (other.id != req.node_id() && other.address == req.address()) {
        return absl::InvalidArgumentError(absl::StrCat(
            "server node id:", req.node_id(), " addr:", req.address(),
            ": address already used by server node id:", other.id, " (rank ",
            other.rank, ")"));
      }
    }
  }

  v1::RegisterResponse resp;
  auto it = nodes_.find(req.node_id());
  if (it != nodes_.end()) {
    Node& node = it->second;
    if (node.role != req.role()) {
      return absl::InvalidArgumentError(
          absl::StrCat("node id:", node.id, " is registered as a ",
                       RoleWord(node.role), ", not a ", role));
    }
    if (node.alive && req.incarnation() != 0 &&
        req.incarnation() == node.incarnation) {
      // The same process again (its answer was lost): the same answer.
      node.last_beat = std::max(node.last_beat, now);
      resp.set_rank(node.rank);
      *resp.mutable_map() = MapLocked();
      resp.set_heartbeat_interval_ms(
          absl::ToInt64Milliseconds(options_.heartbeat_interval));
      resp.set_heartbeat_timeout_ms(
          absl::ToInt64Milliseconds(options_.heartbeat_timeout));
      return resp;
    }
    if (node.alive) {
      return absl::AlreadyExistsError(absl::StrFormat(
          "refused: %s node id:%s is alive (rank %d, addr:%s, last heartbeat "
          "%s ago); a node id may be registered once while it lives",
          role, node.id, node.rank, node.address,
          absl::FormatDuration(
              absl::Trunc(now - node.last_beat, absl::Milliseconds(1)))));
    }
    node.alive = true;
    node.address = req.address();
    node.last_beat = now;
    node.incarnation = req.incarnation();
    ++version_;
    resp.set_rank(node.rank);
    resp.set_recovered(true);
    Log(absl::StrCat(role, " node id:", node.id, " addr:", node.address,
                     " took back rank ", node.rank, " (recovered)"));
  } else {
    const bool server = req.role() == v1::NODE_ROLE_SERVER;
    if (!req.join() &&
        (static_cast<int>(ranks.size()) >= limit || (server && epoch_ > 0))) {
      return absl::ResourceExhaustedError(absl::StrCat(
          "refused ", role, " node id:", req.node_id(), ": all ", limit, " ",
          role, " ranks are taken (", MissingLocked(), ")",
          server ? "; a server joins the running cluster with --join "
                   "(PS_JOIN=1), then add-server"
                 : ""));
    }
    Node node;
    node.id = req.node_id();
    node.role = req.role();
    node.rank = server ? next_server_rank_++ : static_cast<int>(ranks.size());
    node.joining = req.join();
    node.address = req.address();
    node.last_beat = now;
    node.incarnation = req.incarnation();
    ranks.push_back(node.id);
    resp.set_rank(node.rank);
    ++version_;
    drained_.erase(node.id);
    Log(absl::StrCat(role, " node id:", node.id,
                     node.address.empty() ? "" : " addr:", node.address,
                     node.joining ? " joining as rank " : " assigned rank ",
                     node.rank));
    nodes_.emplace(node.id, std::move(node));
    if (epoch_ == 0 && ReadyLocked()) {
      epoch_ = 1;
      Log(absl::StrCat("cluster ready: ", Plural(options_.server_num, "server"),
                       ", ", Plural(options_.worker_num, "worker"), ", epoch ",
                       epoch_));
    }
  }
  if (absl::Status p = PersistLocked(); !p.ok()) {
    Log(absl::StrCat("recovery: ", p.message()));
  }
  *resp.mutable_map() = MapLocked();
  resp.set_heartbeat_interval_ms(
      absl::ToInt64Milliseconds(options_.heartbeat_interval));
  resp.set_heartbeat_timeout_ms(
      absl::ToInt64Milliseconds(options_.heartbeat_timeout));
  return resp;
}

absl::StatusOr<uint64_t> Scheduler::Heartbeat(absl::string_view node_id,
                                              absl::Time now) {
  absl::MutexLock lock(&mu_);
  auto it = nodes_.find(node_id);
  if (it == nodes_.end()) {
    if (auto d = drained_.find(node_id); d != drained_.end()) {
      return absl::NotFoundError(d->second);
    }
    return absl::NotFoundError(
        absl::StrCat("node id:", node_id, " is not registered"));
  }
  if (!it->second.alive) {
    return absl::FailedPreconditionError(
        absl::StrCat("node id:", node_id, " was marked dead; register again"));
  }
  it->second.last_beat = std::max(it->second.last_beat, now);
  return version_;
}

std::vector<std::string> Scheduler::CheckHeartbeats(absl::Time now) {
  std::vector<std::string> dead;
  absl::MutexLock lock(&mu_);
  for (auto& [id, node] : nodes_) {
    if (node.alive && now - node.last_beat > options_.heartbeat_timeout) {
      node.alive = false;
      dead.push_back(id);
      Log(absl::StrCat(RoleWord(node.role), " node id:", id,
                       node.address.empty() ? "" : " addr:", node.address,
                       " rank ", node.rank, " marked dead: no heartbeat for ",
                       absl::FormatDuration(absl::Trunc(
                           now - node.last_beat, absl::Milliseconds(1)))));
    }
  }
  if (!dead.empty()) ++version_;
  std::sort(dead.begin(), dead.end());
  return dead;
}

absl::StatusOr<v1::ClusterMap> Scheduler::WaitReady(absl::Time deadline) {
  absl::MutexLock lock(&mu_);
  auto ready = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return epoch_ > 0 || closed_;
  };
  mu_.AwaitWithDeadline(absl::Condition(&ready), deadline);
  if (closed_) return absl::UnavailableError("scheduler is shutting down");
  if (epoch_ == 0) {
    return absl::DeadlineExceededError(
        absl::StrCat("cluster not ready: ", MissingLocked()));
  }
  return MapLocked();
}

absl::StatusOr<v1::ClusterMap> Scheduler::WaitForMapAfter(
    uint64_t after_version, absl::Time deadline) {
  absl::MutexLock lock(&mu_);
  auto changed = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return version_ > after_version || closed_;
  };
  mu_.AwaitWithDeadline(absl::Condition(&changed), deadline);
  if (closed_) return absl::UnavailableError("scheduler is shutting down");
  if (version_ <= after_version) {
    return absl::DeadlineExceededError(
        absl::StrCat("map still at version ", version_));
  }
  return MapLocked();
}

v1::SchedulerStatus Scheduler::Status() {
  v1::SchedulerStatus status;
  status.set_backend("memory");
  status.set_leader(true);
  absl::MutexLock lock(&mu_);
  status.set_healthy(!closed_);
  if (closed_) status.set_reason("scheduler is shutting down");
  return status;
}

absl::StatusOr<MembershipPlan> Scheduler::PlanMembershipChange(
    const MembershipChange& change) {
  absl::MutexLock lock(&mu_);
  if (closed_) return absl::UnavailableError("scheduler is shutting down");
  MembershipPlan plan;
  plan.current = MapLocked();
  PSDB_ASSIGN_OR_RETURN(
      plan.target, scheduler_internal::MapAfterChange(plan.current, change));
  auto it = nodes_.find(change.node_id);
  if (change.kind == MembershipChange::Kind::kAdd && !it->second.alive) {
    return absl::FailedPreconditionError(
        absl::StrCat("add-server: joining server node id:", change.node_id,
                     " missed its heartbeats; it must register again first"));
  }
  return plan;
}

absl::StatusOr<v1::ClusterMap> Scheduler::PublishMembershipChange(
    const MembershipChange& change, uint64_t expected_epoch) {
  absl::MutexLock lock(&mu_);
  if (closed_) return absl::UnavailableError("scheduler is shutting down");
  if (epoch_ != expected_epoch) {
    return absl::FailedPreconditionError(
        absl::StrCat("publish ", MembershipKindName(change.kind),
                     " node id:", change.node_id, ": the map moved to epoch ",
                     epoch_, " (expected ", expected_epoch, ")"));
  }
  PSDB_RETURN_IF_ERROR(
      scheduler_internal::MapAfterChange(MapLocked(), change).status());
  const uint64_t from = epoch_;
  Node& node = nodes_.at(change.node_id);
  const std::string what = absl::StrCat(
      "server node id:", node.id, " addr:", node.address, " rank ", node.rank);
  if (change.kind == MembershipChange::Kind::kAdd) {
    node.joining = false;
    ++server_num_;
  } else {
    drained_[node.id] = absl::StrCat("node id:", node.id, " was drained (rank ",
                                     node.rank, " retired at epoch ", from + 1,
                                     "); it owns no keys and may be stopped");
    std::erase(servers_, node.id);
    nodes_.erase(node.id);
    --server_num_;
  }
  ++epoch_;
  ++version_;
  Log(absl::StrCat(
      what,
      change.kind == MembershipChange::Kind::kAdd ? " added to the ring"
                                                  : " drained (rank retired)",
      ": epoch ", from, " -> ", epoch_, ", ", Plural(server_num_, "server")));
  if (absl::Status p = PersistLocked(); !p.ok()) {
    Log(absl::StrCat("recovery: ", p.message()));
  }
  return MapLocked();
}

absl::Status Scheduler::Barrier(absl::string_view name,
                                absl::string_view node_id, int64_t sequence,
                                absl::Time deadline) {
  PSDB_RETURN_IF_ERROR(scheduler_internal::ValidateBarrierName(name));
  absl::MutexLock lock(&mu_);
  auto it = nodes_.find(node_id);
  if (it == nodes_.end()) {
    return absl::NotFoundError(absl::StrCat(
        "barrier '", name, "': node id:", node_id, " is not registered"));
  }
  if (it->second.role != v1::NODE_ROLE_WORKER) {
    return absl::InvalidArgumentError(absl::StrCat(
        "barrier '", name, "': node id:", node_id, " is not a worker"));
  }
  BarrierState& b = barriers_[std::string(name)];
  if (std::find(b.arrived.begin(), b.arrived.end(), node_id) !=
      b.arrived.end()) {
    return absl::FailedPreconditionError(
        absl::StrCat("barrier '", name, "': node id:", node_id,
                     " is already waiting in it"));
  }
  const uint64_t generation = b.generation;
  b.arrived.emplace_back(node_id);
  if (static_cast<int>(b.arrived.size()) == options_.worker_num) {
    b.arrived.clear();
    ++b.generation;
    return absl::OkStatus();
  }
  auto released = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return closed_ || barriers_[std::string(name)].generation != generation;
  };
  mu_.AwaitWithDeadline(absl::Condition(&released), deadline);
  BarrierState& now = barriers_[std::string(name)];
  if (now.generation != generation) return absl::OkStatus();
  now.arrived.erase(std::find(now.arrived.begin(), now.arrived.end(), node_id));
  if (closed_) return absl::UnavailableError("scheduler is shutting down");
  // Name every worker rank that had not arrived (in rank order).
  std::vector<std::string> missing;
  for (int rank = 0; rank < options_.worker_num; ++rank) {
    if (rank < static_cast<int>(workers_.size())) {
      const Node& w = nodes_.at(workers_[rank]);
      if (w.id == node_id || std::find(now.arrived.begin(), now.arrived.end(),
                                       w.id) != now.arrived.end()) {
        continue;
      }
      missing.push_back(absl::StrCat("worker rank ", rank, " (node id:", w.id,
                                     w.alive ? "" : ", dead", ")"));
    } else {
      missing.push_back(
          absl::StrCat("worker rank ", rank, " (not registered)"));
    }
  }
  return absl::DeadlineExceededError(
      absl::StrCat("barrier '", name, "' timed out for node id:", node_id,
                   "; not arrived: ", absl::StrJoin(missing, ", ")));
}

int64_t Scheduler::SlowestLocked() const {
  int64_t slowest = INT64_MAX;
  for (int rank = 0; rank < options_.worker_num; ++rank) {
    int64_t finished = 0;
    if (rank < static_cast<int>(workers_.size())) {
      auto it = clocks_.find(workers_[rank]);
      if (it != clocks_.end()) finished = it->second;
    }
    slowest = std::min(slowest, finished);
  }
  return slowest == INT64_MAX ? 0 : slowest;
}

absl::StatusOr<int64_t> Scheduler::StepClock(absl::string_view node_id,
                                             int64_t finished_step,
                                             int staleness,
                                             absl::Time deadline) {
  PSDB_RETURN_IF_ERROR(
      scheduler_internal::ValidateStepClock(finished_step, staleness));
  absl::MutexLock lock(&mu_);
  auto node = nodes_.find(node_id);
  if (node == nodes_.end() || node->second.role != v1::NODE_ROLE_WORKER) {
    return absl::NotFoundError(absl::StrCat("step clock: node id:", node_id,
                                            " is not a registered worker"));
  }
  int64_t& clock = clocks_[std::string(node_id)];
  if (finished_step < clock) {
    return absl::InvalidArgumentError(
        absl::StrCat("step clock: node id:", node_id, " reported step ",
                     finished_step, " after step ", clock));
  }
  clock = finished_step;
  const int64_t need = finished_step - staleness;
  auto caught_up = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return closed_ || SlowestLocked() >= need;
  };
  mu_.AwaitWithDeadline(absl::Condition(&caught_up), deadline);
  if (closed_) return absl::UnavailableError("scheduler is shutting down");
  const int64_t slowest = SlowestLocked();
  if (slowest >= need) return slowest;
  std::vector<std::string> behind;
  for (int rank = 0; rank < options_.worker_num; ++rank) {
    if (rank >= static_cast<int>(workers_.size())) {
      behind.push_back(absl::StrCat("worker rank ", rank, " (not registered)"));
      continue;
    }
    const std::string& id = workers_[rank];
    auto it = clocks_.find(id);
    const int64_t finished = it == clocks_.end() ? 0 : it->second;
    if (finished < need) {
      behind.push_back(absl::StrCat("worker rank ", rank, " (node id:", id,
                                    ", finished ", finished,
                                    nodes_.at(id).alive ? "" : ", dead", ")"));
    }
  }
  return absl::DeadlineExceededError(absl::StrCat(
      "step clock: node id:", node_id, " finished step ", finished_step,
      " and may run at most ", staleness, " steps ahead; waiting for step ",
      need, " of: ", absl::StrJoin(behind, ", ")));
}

void Scheduler::Close() {
  rendezvous_.Close();
  absl::MutexLock lock(&mu_);
  closed_ = true;
}

// ---------------------------------------------------------------------------

class SchedulerServer::Impl final : public v1::SchedulerService::Service {
 public:
  explicit Impl(const SchedulerOptions& options) : options(options) {}

  grpc::Status Register(grpc::ServerContext*, const v1::RegisterRequest* req,
                        v1::RegisterResponse* resp) override {
    auto r = backend->Register(*req, absl::Now());
    if (!r.ok()) return ToGrpcStatus(r.status());
    *resp = *std::move(r);
    return grpc::Status::OK;
  }
  grpc::Status Heartbeat(grpc::ServerContext*, const v1::HeartbeatRequest* req,
                         v1::HeartbeatResponse* resp) override {
    auto r = backend->Heartbeat(req->node_id(), absl::Now());
    if (!r.ok()) return ToGrpcStatus(r.status());
    resp->set_map_version(*r);
    return grpc::Status::OK;
  }
  grpc::Status GetClusterMap(grpc::ServerContext* ctx,
                             const v1::GetClusterMapRequest* req,
                             v1::GetClusterMapResponse* resp) override {
    absl::StatusOr<v1::ClusterMap> r =
        req->wait_ready_ms() <= 0
            ? backend->CurrentMap()
            : backend->WaitReady(Deadline(ctx, req->wait_ready_ms()));
    if (!r.ok()) return ToGrpcStatus(r.status());
    *resp->mutable_map() = *std::move(r);
    return grpc::Status::OK;
  }
  grpc::Status Barrier(grpc::ServerContext* ctx, const v1::BarrierRequest* req,
                       v1::BarrierResponse*) override {
    const int64_t ms = req->timeout_ms() > 0 ? req->timeout_ms() : 60000;
    return ToGrpcStatus(backend->Barrier(req->name(), req->node_id(),
                                         req->sequence(), Deadline(ctx, ms)));
  }

  grpc::Status StepClock(grpc::ServerContext* ctx,
                         const v1::StepClockRequest* req,
                         v1::StepClockResponse* resp) override {
    const int64_t ms = req->timeout_ms() > 0 ? req->timeout_ms() : 60000;
    auto r = backend->StepClock(req->node_id(), req->finished_step(),
                                req->staleness(), Deadline(ctx, ms));
    if (!r.ok()) return ToGrpcStatus(r.status());
    resp->set_slowest_finished_step(*r);
    return grpc::Status::OK;
  }

  grpc::Status WatchClusterMap(
      grpc::ServerContext* ctx, const v1::WatchClusterMapRequest* req,
      grpc::ServerWriter<v1::ClusterMap>* writer) override {
    uint64_t after = req->after_version();
    // Waits in slices so a cancelled call ends the stream (a shutdown ends
    // the wait at once). Each slice reads the map once (etcd: one range
    // read per stream every 5 s, and one per change).
    while (!ctx->IsCancelled()) {
      absl::StatusOr<v1::ClusterMap> map =
          backend->WaitForMapAfter(after, Deadline(ctx, 5000));
      if (absl::IsDeadlineExceeded(map.status())) continue;
      if (!map.ok()) return ToGrpcStatus(map.status());
      after = map->version();
      if (!writer->Write(*map)) break;
    }
    return grpc::Status::OK;
  }

  grpc::Status GetStatus(grpc::ServerContext*,
                         const v1::GetSchedulerStatusRequest*,
                         v1::SchedulerStatus* resp) override {
    *resp = backend->Status();
    absl::MutexLock lock(&mu);
    if (migration != nullptr) *resp->mutable_migration() = migration->status();
    return grpc::Status::OK;
  }

  grpc::Status AddServer(grpc::ServerContext*, const v1::AddServerRequest* req,
                         v1::MembershipChangeResponse* resp) override {
    return ToGrpcStatus(
        ChangeMembership({MembershipChange::Kind::kAdd, req->node_id()},
                         req->batch_rows(), req->max_rows_per_second(), resp));
  }
  grpc::Status DrainServer(grpc::ServerContext*,
                           const v1::DrainServerRequest* req,
                           v1::MembershipChangeResponse* resp) override {
    return ToGrpcStatus(
        ChangeMembership({MembershipChange::Kind::kDrain, req->node_id()},
                         req->batch_rows(), req->max_rows_per_second(), resp));
  }

  absl::Status ChangeMembership(const MembershipChange& change,
                                int32_t batch_rows, int64_t max_rows_per_second,
                                v1::MembershipChangeResponse* resp) {
    const std::string verb =
        absl::StrCat(MembershipKindName(change.kind), "-server");
    PSDB_RETURN_IF_ERROR(ValidateNodeId(change.node_id));
    if (batch_rows < 0 || max_rows_per_second < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat(verb, " node id:", change.node_id,
                       ": batch_rows and max_rows_per_second must be >= 0"));
    }
    std::shared_ptr<MigrationCoordinator> coordinator;
    {
      absl::MutexLock lock(&mu);
      if (closing) return absl::UnavailableError("scheduler is shutting down");
      if (etcd != nullptr && !etcd->leader()) {
        const v1::SchedulerStatus status = backend->Status();
        return absl::FailedPreconditionError(absl::StrCat(
            "refused ", verb, " node id:", change.node_id,
            ": this scheduler is a standby; send it to the leader (",
            status.leader_address().empty() ? std::string("none yet")
                                            : status.leader_address(),
            ")"));
      }
      if (migrating) {
        const v1::MigrationStatus running = migration->status();
        return absl::FailedPreconditionError(absl::StrCat(
            "refused ", verb, " node id:", change.node_id, ": migration ",
            running.migration_id(), " (", running.kind(), "-server node id:",
            running.node_id(), ") is running: ", running.phase(), ", ",
            running.rows_moved(), "/", running.rows_to_move(), " rows moved"));
      }
      PSDB_ASSIGN_OR_RETURN(MembershipPlan plan,
                            backend->PlanMembershipChange(change));
      MigrationOptions mo;
      mo.batch_rows = batch_rows;
      mo.max_rows_per_second = max_rows_per_second;
      mo.tls = options.server_tls;
      const SchedulerOptions* o = &options;
      mo.log = [o](absl::string_view line) {
        scheduler_internal::LogLine(*o, line);
      };
      coordinator =
          std::make_shared<MigrationCoordinator>(mo, change, std::move(plan));
      migration = coordinator;
      migrating = true;
    }
    const uint64_t from = coordinator->status().from_epoch();
    absl::StatusOr<v1::MigrationStatus> result = coordinator->Run(
        [&] { return backend->PublishMembershipChange(change, from); });
    {
      absl::MutexLock lock(&mu);
      migrating = false;
    }
    *resp->mutable_migration() = coordinator->status();
    return result.status();
  }

  grpc::Status RendezvousSet(grpc::ServerContext*,
                             const v1::RendezvousSetRequest* req,
                             v1::RendezvousSetResponse*) override {
    return ToGrpcStatus(backend->RendezvousSet(req->key(), req->value()));
  }

  grpc::Status RendezvousGet(grpc::ServerContext* ctx,
                             const v1::RendezvousGetRequest* req,
                             v1::RendezvousGetResponse* resp) override {
    const int64_t ms = req->timeout_ms() > 0 ? req->timeout_ms() : 60000;
    const std::vector<std::string> keys(req->keys().begin(), req->keys().end());
    auto r = backend->RendezvousGet(keys, Deadline(ctx, ms));
    if (!r.ok()) return ToGrpcStatus(r.status());
    for (std::string& value : *r) resp->add_values(std::move(value));
    return grpc::Status::OK;
  }

  // now + ms, but no later than the call's own deadline.
  static absl::Time Deadline(grpc::ServerContext* ctx, int64_t ms) {
    const absl::Time wanted = absl::Now() + absl::Milliseconds(ms);
    if (ctx->deadline() == std::chrono::system_clock::time_point::max()) {
      return wanted;
    }
    return std::min(wanted, absl::FromChrono(ctx->deadline()));
  }

  void Monitor() {
    const absl::Duration period = options.heartbeat_interval / 4;
    absl::MutexLock lock(&mu);
    while (!stopping) {
      mu.AwaitWithTimeout(absl::Condition(&stopping), period);
      if (stopping) break;
      mu.Unlock();
      backend->Tick(absl::Now());
      mu.Lock();
    }
  }

  const SchedulerOptions options;
  std::unique_ptr<SchedulerBackend> backend;
  // The same object as backend when it is one (etcd), else null.
  EtcdScheduler* etcd = nullptr;
  std::unique_ptr<grpc::Server> server;
  int port = 0;
  std::string address;
  absl::Mutex mu;
  bool stopping ABSL_GUARDED_BY(mu) = false;
  // The running or last migration; `migrating` while one runs.
  std::shared_ptr<MigrationCoordinator> migration ABSL_GUARDED_BY(mu);
  bool migrating ABSL_GUARDED_BY(mu) = false;
  bool closing ABSL_GUARDED_BY(mu) = false;
  std::thread monitor;
  bool shut_down = false;
  // Metrics (null when off); the endpoint stops before the scheduler goes.
  std::shared_ptr<prometheus::Collectable> collector;
  std::unique_ptr<MetricsHttpServer> metrics;
};

SchedulerServer::SchedulerServer(std::unique_ptr<Impl> impl)
    : impl_(std::move(impl)) {}
SchedulerServer::~SchedulerServer() { Shutdown(); }

absl::StatusOr<std::unique_ptr<SchedulerServer>> SchedulerServer::Start(
    const SchedulerOptions& options) {
  PSDB_RETURN_IF_ERROR(ValidateSchedulerOptions(options));
  PSDB_ASSIGN_OR_RETURN(std::shared_ptr<grpc::ServerCredentials> creds,
                        MakeServerCredentials(options.tls, options.host));
  auto impl = std::make_unique<Impl>(options);
  if (options.etcd_endpoints.empty()) {
    auto scheduler = std::make_unique<Scheduler>(options);
    PSDB_RETURN_IF_ERROR(scheduler->Recover(absl::Now()));
    impl->backend = std::move(scheduler);
  } else {
    PSDB_ASSIGN_OR_RETURN(std::unique_ptr<EtcdScheduler> etcd,
                          EtcdScheduler::Open(options));
    impl->etcd = etcd.get();
    impl->backend = std::move(etcd);
  }
  // Metrics first: a bad metrics address fails Start before anything serves.
  if (options.metrics_port >= 0) {
    PSDB_ASSIGN_OR_RETURN(
        impl->metrics,
        MetricsHttpServer::Start(
            options.metrics_host.empty() ? options.host : options.metrics_host,
            options.metrics_port));
    impl->collector = NewSchedulerCollector(impl->backend.get());
    impl->metrics->Register(impl->collector);
  }
  grpc::ServerBuilder builder;
  // Nodes ping every 10 s to notice a dead scheduler host
  // (scheduler_client.cc); allow it, with or without a call open.
  builder.AddChannelArgument(
      GRPC_ARG_HTTP2_MIN_RECV_PING_INTERVAL_WITHOUT_DATA_MS, 5000);
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
  ListenExclusively(options.host, options.port, creds, &builder, &impl->port);
  builder.RegisterService(impl.get());
  impl->server = builder.BuildAndStart();
  if (impl->server == nullptr || impl->port == 0) {
    return absl::UnavailableError(
        absl::StrCat("ps-scheduler: cannot listen on ",
                     JoinHostPort(options.host, options.port),
                     " (address in use or not local?)"));
  }
  impl->address = JoinHostPort(options.host, impl->port);
  if (impl->etcd != nullptr) {
    impl->etcd->StartCampaign(options.advertise_address.empty()
                                  ? impl->address
                                  : options.advertise_address);
  }
  Impl* raw = impl.get();
  impl->monitor = std::thread([raw] { raw->Monitor(); });
  return std::unique_ptr<SchedulerServer>(new SchedulerServer(std::move(impl)));
}

int SchedulerServer::port() const { return impl_->port; }
std::string SchedulerServer::address() const { return impl_->address; }
int SchedulerServer::metrics_port() const {
  return impl_->metrics != nullptr ? impl_->metrics->port() : -1;
}
std::string SchedulerServer::metrics_address() const {
  return impl_->metrics != nullptr ? impl_->metrics->address() : "";
}
SchedulerBackend* SchedulerServer::backend() { return impl_->backend.get(); }
std::shared_ptr<grpc::Channel> SchedulerServer::InProcessChannel() const {
  return impl_->server->InProcessChannel(grpc::ChannelArguments());
}

void SchedulerServer::Shutdown() {
  if (impl_->shut_down) return;
  impl_->shut_down = true;
  {
    absl::MutexLock lock(&impl_->mu);
    impl_->closing = true;
    if (impl_->migrating) impl_->migration->Cancel();
  }
  impl_->metrics.reset();  // waits for a running scrape
  impl_->backend->Close();
  {
    absl::MutexLock lock(&impl_->mu);
    impl_->stopping = true;
  }
  impl_->monitor.join();
  impl_->server->Shutdown(std::chrono::system_clock::now() +
                          std::chrono::seconds(5));
  impl_->server->Wait();
}

}  // namespace psdb::rpc
