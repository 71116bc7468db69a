// Scheduler (scheduler.h): the membership state machine in this process:
// registration and ranks, heartbeats and deaths, the map, recovery from
// recovery_path, membership changes, barriers and the step clock. The rules
// it shares with the etcd backend are in scheduler_rules.cc; its gRPC face
// is scheduler_service.cc.
#include "rpc/control/scheduler.h"

#include <algorithm>
#include <climits>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "util/file_io.h"
#include "util/status_macros.h"

namespace psdb::rpc {

using scheduler_internal::Plural;
using scheduler_internal::RoleWord;

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
  // Reads no member: the guarded nodes_ are looked up here, under mu_,
  // where -Wthread-safety sees the lock (a lambda's body is analysed as a
  // function of its own, which holds nothing).
  auto fill = [](const Node& n, v1::NodeEntry* e) {
    e->set_node_id(n.id);
    e->set_role(n.role);
    e->set_rank(n.rank);
    e->set_address(n.address);
    // A joining server stays off the ring dead or alive.
    e->set_state(n.joining ? v1::NODE_STATE_JOINING
                 : n.alive ? v1::NODE_STATE_ALIVE
                           : v1::NODE_STATE_DEAD);
  };
  for (const std::string& id : servers_) {
    fill(nodes_.at(id), map.add_servers());
  }
  for (const std::string& id : workers_) {
    fill(nodes_.at(id), map.add_workers());
  }
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
  // As in MapLocked: the lambda touches no member, the loops below (under
  // the lock) do.
  auto node_of = [now](const v1::NodeEntry& e) {
    Node node;
    node.id = e.node_id();
    node.role = e.role();
    node.rank = e.rank();
    node.address = e.address();
    node.joining = e.state() == v1::NODE_STATE_JOINING;
    node.last_beat = now;
    return node;
  };
  absl::MutexLock lock(&mu_);
  for (const v1::NodeEntry& e : saved.servers()) {
    servers_.push_back(e.node_id());
    nodes_.emplace(e.node_id(), node_of(e));
  }
  for (const v1::NodeEntry& e : saved.workers()) {
    workers_.push_back(e.node_id());
    nodes_.emplace(e.node_id(), node_of(e));
  }
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

}  // namespace psdb::rpc
