#include "rpc/control/etcd_scheduler.h"

#include <algorithm>
#include <map>
#include <optional>
#include <set>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "util/status_macros.h"

namespace psdb::rpc {
namespace {

using scheduler_internal::Plural;
using scheduler_internal::RoleWord;

std::string RoleKey(v1::NodeRole role) { return std::string(RoleWord(role)); }

// A registration transaction whose compare failed because its own first
// attempt, whose answer was lost, had committed (EtcdClient re-sends): the
// alive key its failure branch read is bound to this very lease.
bool OursCommitted(const EtcdTxnResult& r, int64_t lease) {
  return r.gets.size() == 1 && r.gets[0].has_value() &&
         r.gets[0]->lease == lease;
}

}  // namespace

EtcdScheduler::EtcdScheduler(const SchedulerOptions& options,
                             std::unique_ptr<EtcdClient> etcd)
    : options_(options),
      prefix_(absl::StrCat("/psdb/", options.cluster, "/")),
      etcd_(std::move(etcd)) {}

EtcdScheduler::~EtcdScheduler() { Close(); }

absl::StatusOr<std::unique_ptr<EtcdScheduler>> EtcdScheduler::Open(
    const SchedulerOptions& options) {
  EtcdOptions etcd_options;
  etcd_options.endpoints = options.etcd_endpoints;
  etcd_options.tls = options.etcd_tls;
  PSDB_ASSIGN_OR_RETURN(std::unique_ptr<EtcdClient> etcd,
                        EtcdClient::Open(etcd_options));
  std::unique_ptr<EtcdScheduler> s(new EtcdScheduler(options, std::move(etcd)));
  const std::string config = absl::StrCat("server_num=", options.server_num,
                                          " worker_num=", options.worker_num);
  PSDB_ASSIGN_OR_RETURN(EtcdTxnResult r,
                        s->etcd_->Txn({EtcdCompare::Absent(s->Key("config"))},
                                      {EtcdOp::Put(s->Key("config"), config)},
                                      {EtcdOp::Get(s->Key("config"))}));
  if (!r.succeeded && r.gets.size() == 1 && r.gets[0].has_value() &&
      r.gets[0]->value != config) {
    return absl::InvalidArgumentError(
        absl::StrCat("cluster '", options.cluster, "' in etcd was formed with ",
                     r.gets[0]->value, "; this scheduler has PS_SERVER_NUM=",
                     options.server_num, " PS_WORKER_NUM=", options.worker_num,
                     " (another --cluster name starts a new cluster)"));
  }
  s->Log(absl::StrCat(r.succeeded ? "created" : "joined", " cluster '",
                      options.cluster, "' in etcd (",
                      absl::StrJoin(options.etcd_endpoints, ","), ")"));
  return s;
}

std::string EtcdScheduler::Key(absl::string_view suffix) const {
  return absl::StrCat(prefix_, suffix);
}

void EtcdScheduler::Log(absl::string_view line) const {
  scheduler_internal::LogLine(options_, line);
}

bool EtcdScheduler::closed() const {
  absl::MutexLock lock(&mu_);
  return closed_;
}

bool EtcdScheduler::leader() const {
  absl::MutexLock lock(&mu_);
  return leader_;
}

absl::Duration EtcdScheduler::ReleasedBarrierTtl() const {
  return std::max(absl::Minutes(1), 6 * options_.lease_ttl);
}

absl::Status EtcdScheduler::AwaitChange(absl::string_view key, bool prefix,
                                        int64_t revision, absl::Time deadline) {
  while (!closed() && absl::Now() < deadline) {
    // In slices of at most a second, so Close() ends the wait promptly;
    // a slice that ends quietly goes on from the same revision.
    absl::StatusOr<std::vector<EtcdEvent>> events = etcd_->WaitForEvents(
        key, prefix, revision + 1,
        std::min(deadline, absl::Now() + absl::Seconds(1)));
    if (events.ok() || absl::IsOutOfRange(events.status())) {
      return absl::OkStatus();  // changed (or compacted: read again)
    }
    if (!absl::IsDeadlineExceeded(events.status())) return events.status();
  }
  return absl::OkStatus();
}

absl::StatusOr<v1::RegisterResponse> EtcdScheduler::Register(
    const v1::RegisterRequest& req, absl::Time) {
  PSDB_RETURN_IF_ERROR(scheduler_internal::ValidateRegistration(options_, req));
  if (closed()) return absl::UnavailableError("scheduler is shutting down");
  const absl::string_view role = RoleWord(req.role());
  const std::string node_key =
      Key(absl::StrCat("members/nodes/", req.node_id()));
  const std::string alive_key = Key(absl::StrCat("alive/", req.node_id()));
  const std::string incarnation = absl::StrCat(req.incarnation());
  const int limit = req.role() == v1::NODE_ROLE_SERVER ? options_.server_num
                                                       : options_.worker_num;
  v1::RegisterResponse resp;
  bool done = false;
  for (int attempt = 0; attempt < kMaxCasAttempts && !done; ++attempt) {
    PSDB_ASSIGN_OR_RETURN(EtcdRange nodes,
                          etcd_->GetPrefix(Key("members/nodes/")));
    std::optional<EtcdKeyValue> existing_kv;
    v1::NodeEntry existing;
    for (const EtcdKeyValue& kv : nodes.kvs) {
      v1::NodeEntry e;
      if (!e.ParseFromString(kv.value)) continue;
      if (e.node_id() == req.node_id()) {
        existing_kv = kv;
        existing = e;
      } else if (req.role() == v1::NODE_ROLE_SERVER &&
                 e.role() == v1::NODE_ROLE_SERVER &&
                 e.address() == req.address()) {
        return absl::InvalidArgumentError(absl::StrCat(
            "server node id:", req.node_id(), " addr:", req.address(),
            ": address already used by server node id:", e.node_id(), " (rank ",
            e.rank(), ")"));
      }
    }
    // A server's address is claimed in the same transaction as its rank
    // (addresses/<addr> = node id), so two servers registering one address
    // through two schedulers cannot both win.
    std::vector<EtcdCompare> claim;
    std::vector<EtcdOp> claim_ops;
    if (req.role() == v1::NODE_ROLE_SERVER) {
      const std::string addr_key =
          Key(absl::StrCat("addresses/", req.address()));
      PSDB_ASSIGN_OR_RETURN(std::optional<EtcdKeyValue> holder,
                            etcd_->Get(addr_key));
      if (holder.has_value() && holder->value != req.node_id()) {
        return absl::InvalidArgumentError(absl::StrCat(
            "server node id:", req.node_id(), " addr:", req.address(),
            ": address already used by server node id:", holder->value));
      }
      claim.push_back(holder.has_value()
                          ? EtcdCompare::ValueIs(addr_key, req.node_id())
                          : EtcdCompare::Absent(addr_key));
      claim_ops.push_back(EtcdOp::Put(addr_key, req.node_id()));
      if (existing_kv.has_value() && existing.address() != req.address()) {
        claim_ops.push_back(EtcdOp::Delete(
            Key(absl::StrCat("addresses/", existing.address()))));
      }
    }
    auto add_claim = [&](std::vector<EtcdCompare>* compares,
                         std::vector<EtcdOp>* ops) {
      compares->insert(compares->end(), claim.begin(), claim.end());
      ops->insert(ops->end(), claim_ops.begin(), claim_ops.end());
    };
    v1::NodeEntry entry;
    entry.set_node_id(req.node_id());
    entry.set_role(req.role());
    entry.set_address(req.address());
    entry.set_state(v1::NODE_STATE_ALIVE);
    if (existing_kv.has_value()) {
      if (existing.role() != req.role()) {
        return absl::InvalidArgumentError(
            absl::StrCat("node id:", req.node_id(), " is registered as a ",
                         RoleWord(existing.role()), ", not a ", role));
      }
      PSDB_ASSIGN_OR_RETURN(std::optional<EtcdKeyValue> alive,
                            etcd_->Get(alive_key));
      if (alive.has_value()) {
        if (req.incarnation() != 0 && alive->value == incarnation) {
          // The same process again (its answer was lost, or its scheduler
          // failed over): the same answer.
          resp.set_rank(existing.rank());
          done = true;
          break;
        }
        return absl::AlreadyExistsError(absl::StrFormat(
            "refused: %s node id:%s is alive (rank %d, addr:%s, etcd lease "
            "%x); a node id may be registered once while it lives",
            role, req.node_id(), existing.rank(), existing.address(),
            alive->lease));
      }
      PSDB_ASSIGN_OR_RETURN(int64_t lease,
                            etcd_->LeaseGrant(options_.lease_ttl));
      entry.set_rank(existing.rank());
      std::vector<EtcdCompare> compares = {
          EtcdCompare::ModRevisionIs(node_key, existing_kv->mod_revision),
          EtcdCompare::Absent(alive_key)};
      std::vector<EtcdOp> ops = {
          EtcdOp::Put(node_key, entry.SerializeAsString()),
          EtcdOp::Put(alive_key, incarnation, lease)};
      add_claim(&compares, &ops);
      PSDB_ASSIGN_OR_RETURN(
          EtcdTxnResult r, etcd_->Txn(compares, ops, {EtcdOp::Get(alive_key)}));
      if (!r.succeeded && !OursCommitted(r, lease)) {
        (void)etcd_->LeaseRevoke(lease);
        continue;
      }
      resp.set_rank(entry.rank());
      resp.set_recovered(true);
      Log(absl::StrCat(role, " node id:", req.node_id(),
                       req.address().empty() ? "" : " addr:", req.address(),
                       " took back rank ", entry.rank(), " (recovered)"));
      done = true;
      break;
    }
    // A joining server needs a formed cluster, and the transaction checks
    // the ring did not change meanwhile.
    std::optional<EtcdKeyValue> ring_kv;
    if (req.join()) {
      PSDB_ASSIGN_OR_RETURN(ring_kv, etcd_->Get(Key("members/map")));
      if (!ring_kv.has_value()) {
        return absl::FailedPreconditionError(absl::StrCat(
            "refused server node id:", req.node_id(),
            ": a server joins a running cluster, and this one is not ready "
            "yet; start it without --join (PS_JOIN)"));
      }
    }
    // A new node: the lowest free rank of its role (rank keys are never
    // deleted, so a drained server's rank is never given again).
    PSDB_ASSIGN_OR_RETURN(EtcdRange ranks,
                          etcd_->GetPrefix(Key(absl::StrCat(
                              "ranks/", RoleKey(req.role()), "/"))));
    std::set<int> taken;
    for (const EtcdKeyValue& kv : ranks.kvs) {
      int rank = 0;
      if (absl::SimpleAtoi(kv.key.substr(kv.key.rfind('/') + 1), &rank)) {
        taken.insert(rank);
      }
    }
    int rank = 0;
    while (taken.count(rank) > 0) ++rank;
    if (rank >= limit && !req.join()) {
      return absl::ResourceExhaustedError(
          absl::StrCat("refused ", role, " node id:", req.node_id(), ": all ",
                       limit, " ", role, " ranks are taken",
                       req.role() == v1::NODE_ROLE_SERVER
                           ? "; a server joins the running cluster with --join "
                             "(PS_JOIN=1), then add-server"
                           : ""));
    }
    PSDB_ASSIGN_OR_RETURN(int64_t lease, etcd_->LeaseGrant(options_.lease_ttl));
    entry.set_rank(rank);
    const std::string rank_key =
        Key(absl::StrCat("ranks/", RoleKey(req.role()), "/", rank));
    std::vector<EtcdCompare> compares = {EtcdCompare::Absent(rank_key),
                                         EtcdCompare::Absent(node_key)};
    if (ring_kv.has_value()) {
      compares.push_back(
          EtcdCompare::ModRevisionIs(ring_kv->key, ring_kv->mod_revision));
    }
    std::vector<EtcdOp> ops = {EtcdOp::Put(rank_key, req.node_id()),
                               EtcdOp::Put(node_key, entry.SerializeAsString()),
                               EtcdOp::Put(alive_key, incarnation, lease)};
    add_claim(&compares, &ops);
    PSDB_ASSIGN_OR_RETURN(EtcdTxnResult r,
                          etcd_->Txn(compares, ops, {EtcdOp::Get(alive_key)}));
    // Lost to another scheduler (that rank or this id), unless the compare
    // failed on this very transaction's own earlier, re-sent commit.
    if (!r.succeeded && !OursCommitted(r, lease)) {
      (void)etcd_->LeaseRevoke(lease);
      continue;
    }
    resp.set_rank(rank);
    Log(absl::StrCat(role, " node id:", req.node_id(),
                     req.address().empty() ? "" : " addr:", req.address(),
                     req.join() ? " joining as rank " : " assigned rank ",
                     rank));
    done = true;
  }
  if (!done) {
    return absl::AbortedError(
        absl::StrCat("registration of node id:", req.node_id(), " lost ",
                     kMaxCasAttempts, " compare-and-set races in etcd; retry"));
  }
  PSDB_RETURN_IF_ERROR(PublishMapIfComplete());
  PSDB_ASSIGN_OR_RETURN(MapRead read, ReadMap());
  *resp.mutable_map() = std::move(read.map);
  resp.set_heartbeat_interval_ms(
      absl::ToInt64Milliseconds(options_.heartbeat_interval));
  resp.set_heartbeat_timeout_ms(absl::ToInt64Milliseconds(options_.lease_ttl));
  return resp;
}

absl::StatusOr<uint64_t> EtcdScheduler::Heartbeat(absl::string_view node_id,
                                                  absl::Time) {
  if (closed()) return absl::UnavailableError("scheduler is shutting down");
  PSDB_ASSIGN_OR_RETURN(std::optional<EtcdKeyValue> alive,
                        etcd_->Get(Key(absl::StrCat("alive/", node_id))));
  absl::Status dead = absl::FailedPreconditionError(
      absl::StrCat("node id:", node_id,
                   " was marked dead (its etcd lease expired); "
                   "register again"));
  if (!alive.has_value()) {
    PSDB_ASSIGN_OR_RETURN(
        std::optional<EtcdKeyValue> node,
        etcd_->Get(Key(absl::StrCat("members/nodes/", node_id))));
    if (!node.has_value()) {
      return absl::NotFoundError(
          absl::StrCat("node id:", node_id, " is not registered"));
    }
    return dead;
  }
  absl::StatusOr<absl::Duration> ttl = etcd_->LeaseKeepAlive(alive->lease);
  if (absl::IsNotFound(ttl.status())) return dead;
  PSDB_RETURN_IF_ERROR(ttl.status());
  // The map's version (ReadMap's), without reading every node.
  PSDB_ASSIGN_OR_RETURN(int64_t version,
                        etcd_->NewestModRevision(Key("members/")));
  return static_cast<uint64_t>(version);
}

absl::StatusOr<v1::ClusterMap> EtcdScheduler::CurrentMap() {
  PSDB_ASSIGN_OR_RETURN(MapRead read, ReadMap());
  return std::move(read.map);
}

absl::StatusOr<v1::ClusterMap> EtcdScheduler::WaitReady(absl::Time deadline) {
  while (true) {
    PSDB_ASSIGN_OR_RETURN(MapRead read, ReadMap());
    if (read.map.ready()) return std::move(read.map);
    if (closed()) return absl::UnavailableError("scheduler is shutting down");
    if (absl::Now() >= deadline) {
      return absl::DeadlineExceededError(absl::StrFormat(
          "cluster not ready: %d of %d servers and %d of %d workers "
          "registered",
          read.map.servers_size(), options_.server_num, read.map.workers_size(),
          options_.worker_num));
    }
    PSDB_RETURN_IF_ERROR(
        AwaitChange(Key("members/map"), false, read.revision, deadline));
  }
}

absl::StatusOr<v1::ClusterMap> EtcdScheduler::WaitForMapAfter(
    uint64_t after_version, absl::Time deadline) {
  while (true) {
    PSDB_ASSIGN_OR_RETURN(MapRead read, ReadMap());
    if (read.map.version() > after_version) return std::move(read.map);
    if (closed()) return absl::UnavailableError("scheduler is shutting down");
    if (absl::Now() >= deadline) {
      return absl::DeadlineExceededError(
          absl::StrCat("map still at version ", read.map.version()));
    }
    PSDB_RETURN_IF_ERROR(
        AwaitChange(Key("members/"), true, read.revision, deadline));
  }
}

absl::StatusOr<v1::NodeEntry> EtcdScheduler::RegisteredWorker(
    absl::string_view node_id, absl::string_view what) {
  PSDB_ASSIGN_OR_RETURN(
      std::optional<EtcdKeyValue> node,
      etcd_->Get(Key(absl::StrCat("members/nodes/", node_id))));
  v1::NodeEntry entry;
  if (!node.has_value() || !entry.ParseFromString(node->value)) {
    return absl::NotFoundError(
        absl::StrCat(what, ": node id:", node_id, " is not registered"));
  }
  if (entry.role() != v1::NODE_ROLE_WORKER) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": node id:", node_id, " is not a worker"));
  }
  return entry;
}

absl::StatusOr<std::string> EtcdScheduler::DescribeWorkers(
    const std::function<std::optional<std::string>(const std::string&)>&
        behind) {
  PSDB_ASSIGN_OR_RETURN(MapRead read, ReadMap());
  std::map<int, const v1::NodeEntry*> by_rank;
  for (const v1::NodeEntry& w : read.map.workers()) by_rank[w.rank()] = &w;
  std::vector<std::string> out;
  for (int rank = 0; rank < options_.worker_num; ++rank) {
    auto it = by_rank.find(rank);
    if (it == by_rank.end()) {
      out.push_back(absl::StrCat("worker rank ", rank, " (not registered)"));
      continue;
    }
    const std::optional<std::string> detail = behind(it->second->node_id());
    if (detail.has_value()) {
      out.push_back(absl::StrCat(
          "worker rank ", rank, " (node id:", it->second->node_id(), *detail,
          it->second->state() == v1::NODE_STATE_DEAD ? ", dead" : "", ")"));
    }
  }
  return absl::StrJoin(out, ", ");
}

v1::SchedulerStatus EtcdScheduler::Status() {
  v1::SchedulerStatus status;
  status.set_backend("etcd");
  status.set_cluster(options_.cluster);
  status.set_leader(leader());
  if (closed()) {
    status.set_reason("scheduler is shutting down");
    return status;
  }
  absl::Status health = etcd_->Health();
  if (!health.ok()) {
    status.set_reason(std::string(health.message()));
    return status;
  }
  absl::StatusOr<std::optional<EtcdKeyValue>> leader =
      etcd_->Get(Key("leader"));
  if (!leader.ok()) {
    status.set_reason(std::string(leader.status().message()));
    return status;
  }
  if (leader->has_value()) status.set_leader_address((*leader)->value);
  status.set_healthy(true);
  return status;
}

absl::StatusOr<int64_t> EtcdScheduler::MarkExpiredDead() {
  PSDB_ASSIGN_OR_RETURN(EtcdRange nodes,
                        etcd_->GetPrefix(Key("members/nodes/")));
  PSDB_ASSIGN_OR_RETURN(EtcdRange alive, etcd_->GetPrefix(Key("alive/")));
  absl::flat_hash_set<std::string> live;
  for (const EtcdKeyValue& kv : alive.kvs) {
    live.insert(kv.key.substr(Key("alive/").size()));
  }
  for (const EtcdKeyValue& kv : nodes.kvs) {
    v1::NodeEntry entry;
    if (!entry.ParseFromString(kv.value) ||
        entry.state() != v1::NODE_STATE_ALIVE ||
        live.contains(entry.node_id())) {
      continue;
    }
    entry.set_state(v1::NODE_STATE_DEAD);
    PSDB_ASSIGN_OR_RETURN(
        EtcdTxnResult r,
        etcd_->Txn(
            {EtcdCompare::ModRevisionIs(kv.key, kv.mod_revision),
             EtcdCompare::Absent(Key(absl::StrCat("alive/", entry.node_id())))},
            {EtcdOp::Put(kv.key, entry.SerializeAsString())}, {}));
    if (r.succeeded) {
      Log(absl::StrCat(RoleWord(entry.role()), " node id:", entry.node_id(),
                       entry.address().empty() ? "" : " addr:", entry.address(),
                       " rank ", entry.rank(),
                       " marked dead: its etcd lease expired (no heartbeat "
                       "for ",
                       absl::FormatDuration(options_.lease_ttl), ")"));
    }
  }
  return alive.revision;
}

void EtcdScheduler::StartCampaign(std::string advertise) {
  {
    absl::MutexLock lock(&mu_);
    advertise_ = std::move(advertise);
  }
  campaign_ = std::thread([this] { Campaign(); });
}

void EtcdScheduler::Campaign() {
  const absl::Duration renew_every = options_.lease_ttl / 3;
  absl::Time next_renewal = absl::InfinitePast();
  absl::Time last_renewed = absl::InfinitePast();
  std::string last_leader;
  std::string advertise;
  {
    absl::MutexLock lock(&mu_);
    advertise = advertise_;
  }
  // Waits `d` unless Close() comes first; false once closed.
  auto pause = [this](absl::Duration d) {
    absl::MutexLock lock(&mu_);
    mu_.AwaitWithTimeout(absl::Condition(&closed_), d);
    return !closed_;
  };
  while (!closed()) {
    int64_t lease = 0;
    bool leading = false;
    {
      absl::MutexLock lock(&mu_);
      lease = lease_;
      leading = leader_;
    }
    if (lease == 0) {
      absl::StatusOr<int64_t> granted = etcd_->LeaseGrant(options_.lease_ttl);
      if (!granted.ok()) {
        if (!pause(absl::Milliseconds(500))) break;
        continue;
      }
      absl::MutexLock lock(&mu_);
      lease_ = lease = *granted;
      last_renewed = absl::Now();
      next_renewal = last_renewed + renew_every;
    } else if (absl::Now() >= next_renewal) {
      absl::StatusOr<absl::Duration> ttl = etcd_->LeaseKeepAlive(lease);
      if (ttl.ok()) {
        last_renewed = absl::Now();
        next_renewal = last_renewed + renew_every;
      } else if (absl::IsNotFound(ttl.status()) ||
                 absl::Now() - last_renewed >= options_.lease_ttl) {
        // Our lease expired, or may have: etcd was out of reach for the
        // TTL. Whatever we led, another scheduler may lead now.
        absl::MutexLock lock(&mu_);
        if (leader_) {
          Log(absl::StrCat("lost the lead: this scheduler's etcd lease ",
                           absl::IsNotFound(ttl.status())
                               ? "expired"
                               : "could not be renewed for the TTL"));
        }
        leader_ = false;
        lease_ = 0;
        continue;
      }
    }
    if (!leading) {
      absl::StatusOr<EtcdTxnResult> r =
          etcd_->Txn({EtcdCompare::Absent(Key("leader"))},
                     {EtcdOp::Put(Key("leader"), advertise, lease)},
                     {EtcdOp::Get(Key("leader"))});
      if (!r.ok()) {
        if (!pause(absl::Milliseconds(200))) break;
        continue;
      }
      // A failed compare on our own key: the first attempt of this
      // transaction committed and its answer was lost (EtcdClient re-sends).
      const bool ours = !r->succeeded && !r->gets.empty() &&
                        r->gets[0].has_value() && r->gets[0]->lease == lease;
      if (r->succeeded || ours) {
        {
          absl::MutexLock lock(&mu_);
          leader_ = true;
        }
        Log(absl::StrCat("leading cluster '", options_.cluster, "' as ",
                         advertise));
        (void)PublishMapIfComplete();
        continue;
      }
      const std::string holder =
          !r->gets.empty() && r->gets[0].has_value() ? r->gets[0]->value : "";
      if (holder != last_leader) {
        Log(absl::StrCat("standing by: cluster '", options_.cluster,
                         "' is led by ", holder));
        last_leader = holder;
      }
      // Until the leader key changes (its lease ends) or the next renewal.
      (void)etcd_->WaitForEvents(
          Key("leader"), false, r->revision + 1,
          std::min(next_renewal, absl::Now() + absl::Seconds(1)));
      continue;
    }
    // Leading: mark the nodes whose lease ended, then wait for the next end.
    absl::StatusOr<int64_t> read = MarkExpiredDead();
    if (!read.ok()) {
      if (!pause(absl::Milliseconds(200))) break;
      continue;
    }
    (void)PublishMapIfComplete();
    (void)etcd_->WaitForEvents(
        Key("alive/"), true, *read + 1,
        std::min(next_renewal, absl::Now() + absl::Seconds(1)));
  }
}

void EtcdScheduler::Close() {
  int64_t lease = 0;
  {
    absl::MutexLock lock(&mu_);
    if (closed_) return;
    closed_ = true;
    lease = lease_;
    lease_ = 0;
    leader_ = false;
  }
  if (campaign_.joinable()) campaign_.join();
  int64_t late = 0;  // granted by the campaign while Close began
  {
    absl::MutexLock lock(&mu_);
    late = lease_;
  }
  // Revoking deletes the leader key at once: a standby leads now rather
  // than after the TTL.
  if (lease != 0) (void)etcd_->LeaseRevoke(lease);
  if (late != 0 && late != lease) (void)etcd_->LeaseRevoke(late);
}

}  // namespace psdb::rpc

// ---------------------------------------------------------------------------
// Rendezvous (rendezvous.h).

namespace psdb::rpc {

absl::Status EtcdScheduler::RendezvousSet(absl::string_view key,
                                          absl::string_view value) {
  PSDB_RETURN_IF_ERROR(ValidateRendezvousSet(key, value));
  if (closed()) return absl::UnavailableError("scheduler is shutting down");
  const std::string etcd_key = Key(absl::StrCat("rendezvous/", key));
  PSDB_ASSIGN_OR_RETURN(EtcdTxnResult r,
                        etcd_->Txn({EtcdCompare::Absent(etcd_key)},
                                   {EtcdOp::Put(etcd_key, std::string(value))},
                                   {EtcdOp::Get(etcd_key)}));
  if (r.succeeded) return absl::OkStatus();
  // Present: the same value (this call's own earlier commit, or a re-send)
  // is OK.
  if (!r.gets.empty() && r.gets[0].has_value() && r.gets[0]->value == value) {
    return absl::OkStatus();
  }
  return absl::AlreadyExistsError(
      absl::StrCat("rendezvous key '", key,
                   "' already holds another value (keys are written once; "
                   "scope them by job and attempt)"));
}

absl::StatusOr<std::vector<std::string>> EtcdScheduler::RendezvousGet(
    absl::Span<const std::string> keys, absl::Time deadline) {
  PSDB_RETURN_IF_ERROR(ValidateRendezvousGet(keys));
  std::vector<EtcdOp> reads;
  for (const std::string& key : keys) {
    reads.push_back(EtcdOp::Get(Key(absl::StrCat("rendezvous/", key))));
  }
  while (true) {
    if (closed()) return absl::UnavailableError("scheduler is shutting down");
    // One transaction: every key read at one revision, so a key written
    // after it is seen by the watch from revision + 1.
    PSDB_ASSIGN_OR_RETURN(EtcdTxnResult r, etcd_->Txn({}, reads, {}));
    std::vector<std::string> values, missing;
    for (size_t i = 0; i < keys.size(); ++i) {
      if (i < r.gets.size() && r.gets[i].has_value()) {
        values.push_back(r.gets[i]->value);
      } else {
        missing.push_back(keys[i]);
      }
    }
    if (missing.empty()) return values;
    if (absl::Now() >= deadline) return RendezvousTimeout(missing);
    PSDB_RETURN_IF_ERROR(
        AwaitChange(Key("rendezvous/"), true, r.revision, deadline));
  }
}

}  // namespace psdb::rpc
