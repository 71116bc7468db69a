#include "rpc/control/migration_coordinator.h"

#include <algorithm>
#include <cstdio>
#include <memory>
#include <random>
#include <thread>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "grpcpp/grpcpp.h"
#include "rpc/wire/convert.h"
#include "rpc/wire/psdb.grpc.pb.h"
#include "util/status_macros.h"

namespace psdb::rpc {
namespace {

uint64_t RandomMigrationId() {
  std::random_device rd;
  std::mt19937_64 gen((static_cast<uint64_t>(rd()) << 32) ^ rd());
  uint64_t v = 0;
  while (v == 0) v = gen();
  return v;
}

bool OnRing(v1::NodeState state) {
  return state == v1::NODE_STATE_ALIVE || state == v1::NODE_STATE_DEAD;
}

absl::string_view PhaseWord(v1::ReshardPhase phase) {
  switch (phase) {
    case v1::RESHARD_PHASE_PREPARE:
      return "PREPARE";
    case v1::RESHARD_PHASE_COPY:
      return "COPY";
    case v1::RESHARD_PHASE_HANDOFF:
      return "HANDOFF";
    case v1::RESHARD_PHASE_COMMIT:
      return "COMMIT";
    case v1::RESHARD_PHASE_ABORT:
      return "ABORT";
    case v1::RESHARD_PHASE_STATUS:
      return "STATUS";
    case v1::RESHARD_PHASE_CLOSE:
      return "CLOSE";
    default:
      return "UNSPECIFIED";
  }
}

}  // namespace

MigrationCoordinator::MigrationCoordinator(const MigrationOptions& options,
                                           const MembershipChange& change,
                                           MembershipPlan plan)
    : options_(options),
      change_(change),
      plan_(std::move(plan)),
      id_(RandomMigrationId()) {
  // Participants: on the ring now or after (a node of both maps once).
  absl::flat_hash_map<std::string, size_t> index;
  auto add = [&](const v1::NodeEntry& e, bool loses_keys, bool old_ring) {
    auto [it, inserted] = index.try_emplace(e.node_id(), servers_.size());
    if (inserted) {
      servers_.push_back(
          {e.node_id(), e.address(), e.rank(), false, false, nullptr});
    }
    servers_[it->second].source |= loses_keys;
    servers_[it->second].old_ring |= old_ring;
  };
  for (const v1::NodeEntry& e : plan_.current.servers()) {
    if (!OnRing(e.state())) continue;
    add(e,
        change_.kind == MembershipChange::Kind::kAdd ||
            e.node_id() == change_.node_id,
        true);
  }
  for (const v1::NodeEntry& e : plan_.target.servers()) {
    if (OnRing(e.state())) add(e, false, false);
  }
  status_.set_migration_id(id_);
  status_.set_kind(std::string(MembershipKindName(change_.kind)));
  status_.set_node_id(change_.node_id);
  status_.set_phase("prepare");
  status_.set_from_epoch(plan_.current.epoch());
}

void MigrationCoordinator::Log(absl::string_view line) const {
  if (options_.log) {
    options_.log(line);
    return;
  }
  std::fprintf(stderr, "ps-scheduler: %.*s\n", static_cast<int>(line.size()),
               line.data());
  std::fflush(stderr);
}

v1::MigrationStatus MigrationCoordinator::status() const {
  absl::MutexLock lock(&mu_);
  return status_;
}

void MigrationCoordinator::SetPhase(absl::string_view phase) {
  absl::MutexLock lock(&mu_);
  const absl::Time now = absl::Now();
  const double seconds =
      phase_start_ < now ? absl::ToDoubleSeconds(now - phase_start_) : 0;
  const std::string& ended = status_.phase();
  if (ended == "prepare") {
    status_.set_prepare_seconds(seconds);
  } else if (ended == "copy") {
    status_.set_copy_seconds(seconds);
  } else if (ended == "handoff") {
    status_.set_handoff_seconds(seconds);
  } else if (ended == "commit") {
    status_.set_commit_seconds(seconds);
  }
  phase_start_ = now;
  status_.set_phase(std::string(phase));
}

void MigrationCoordinator::Cancel() {
  absl::MutexLock lock(&mu_);
  cancelled_ = true;
  for (grpc::ClientContext* ctx : in_flight_) ctx->TryCancel();
}

std::vector<const MigrationCoordinator::Server*> MigrationCoordinator::Sources()
    const {
  std::vector<const Server*> out;
  for (const Server& s : servers_) {
    if (s.source) out.push_back(&s);
  }
  return out;
}

std::vector<const MigrationCoordinator::Server*> MigrationCoordinator::OldRing()
    const {
  std::vector<const Server*> out;
  for (const Server& s : servers_) {
    if (s.old_ring) out.push_back(&s);
  }
  return out;
}

std::vector<const MigrationCoordinator::Server*>
MigrationCoordinator::Participants() const {
  std::vector<const Server*> out;
  for (const Server& s : servers_) out.push_back(&s);
  return out;
}

absl::Status MigrationCoordinator::Call(const Server& server,
                                        const v1::ReshardRequest& req,
                                        absl::Duration timeout,
                                        v1::ReshardResponse* resp) {
  if (server.stub == nullptr) {
    return absl::FailedPreconditionError("no channel to the server");
  }
  grpc::ClientContext ctx;
  ctx.set_deadline(absl::ToChronoTime(absl::Now() + timeout));
  {
    absl::MutexLock lock(&mu_);
    if (cancelled_) return absl::CancelledError("migration cancelled");
    in_flight_.push_back(&ctx);
  }
  v1::ReshardResponse ignored;
  const absl::Status s = FromGrpcStatus(
      server.stub->Reshard(&ctx, req, resp != nullptr ? resp : &ignored));
  absl::MutexLock lock(&mu_);
  std::erase(in_flight_, &ctx);
  return s;
}

absl::Status MigrationCoordinator::CallAll(
    const std::vector<const Server*>& servers, const v1::ReshardRequest& req,
    absl::Duration timeout, std::vector<v1::ReshardResponse>* resps) {
  std::vector<absl::Status> status(servers.size());
  if (resps != nullptr) resps->assign(servers.size(), {});
  std::vector<std::thread> threads;
  for (size_t i = 0; i < servers.size(); ++i) {
    threads.emplace_back([&, i] {
      status[i] = Call(*servers[i], req, timeout,
                       resps != nullptr ? &(*resps)[i] : nullptr);
    });
  }
  for (std::thread& t : threads) t.join();
  for (size_t i = 0; i < servers.size(); ++i) {
    if (status[i].ok()) continue;
    return absl::Status(
        status[i].code(),
        absl::StrCat(PhaseWord(req.phase()), " on server node id:",
                     servers[i]->node_id, " addr:", servers[i]->address,
                     " rank ", servers[i]->rank, ": ", status[i].message()));
  }
  return absl::OkStatus();
}

void MigrationCoordinator::RecordProgress(
    const std::vector<v1::ReshardResponse>& sources) {
  uint64_t to_move = 0, moved = 0;
  for (const v1::ReshardResponse& r : sources) {
    to_move += r.rows_to_move();
    moved += r.rows_moved();
  }
  absl::MutexLock lock(&mu_);
  // Counters never go back (a poll answered before a later one).
  status_.set_rows_to_move(std::max(status_.rows_to_move(), to_move));
  status_.set_rows_moved(std::max(status_.rows_moved(), moved));
}

absl::Status MigrationCoordinator::Abort(const absl::Status& why) {
  v1::ReshardRequest req;
  req.set_phase(v1::RESHARD_PHASE_ABORT);
  req.set_migration_id(id_);
  std::vector<const Server*> all = Participants();
  std::vector<absl::Status> status(all.size());
  std::vector<std::thread> threads;
  {
    // ABORT goes out even after Cancel(): the servers must let go.
    absl::MutexLock lock(&mu_);
    cancelled_ = false;
  }
  for (size_t i = 0; i < all.size(); ++i) {
    threads.emplace_back([&, i] {
      status[i] = Call(*all[i], req, options_.call_timeout, nullptr);
    });
  }
  for (std::thread& t : threads) t.join();
  std::vector<std::string> unanswered;
  for (size_t i = 0; i < all.size(); ++i) {
    if (!status[i].ok()) {
      unanswered.push_back(absl::StrCat("node id:", all[i]->node_id, " (",
                                        status[i].message(), ")"));
    }
  }
  SetPhase("aborted");
  {
    absl::MutexLock lock(&mu_);
    status_.set_error(std::string(why.message()));
  }
  Log(absl::StrCat("migration ", id_, " (", MembershipKindName(change_.kind),
                   "-server node id:", change_.node_id,
                   ") aborted, the map is unchanged: ", why.message(),
                   unanswered.empty()
                       ? std::string()
                       : absl::StrCat("; ABORT not acknowledged by ",
                                      absl::StrJoin(unanswered, ", "))));
  return why;
}

absl::StatusOr<v1::MigrationStatus> MigrationCoordinator::Run(
    const Publish& publish) {
  const std::string name =
      absl::StrCat("migration ", id_, " (", MembershipKindName(change_.kind),
                   "-server node id:", change_.node_id, ")");
  const std::vector<const Server*> sources = Sources();
  const std::vector<const Server*> all = Participants();
  Log(absl::StrCat(name, ": ", sources.size(), " source(s), ", all.size(),
                   " server(s), from epoch ", plan_.current.epoch()));
  {
    absl::MutexLock lock(&mu_);
    phase_start_ = absl::Now();
  }

  for (Server& server : servers_) {
    absl::StatusOr<std::shared_ptr<grpc::Channel>> channel =
        MakeChannel(options_.tls, server.address);
    if (!channel.ok()) {
      return Abort(Annotate(channel.status(),
                            absl::StrCat("server node id:", server.node_id,
                                         " addr:", server.address)));
    }
    server.stub = v1::ParameterService::NewStub(*std::move(channel));
  }

  v1::ReshardRequest req;
  req.set_migration_id(id_);
  req.set_batch_rows(options_.batch_rows);
  req.set_max_rows_per_second(options_.max_rows_per_second);

  // 1. PREPARE everywhere.
  req.set_phase(v1::RESHARD_PHASE_PREPARE);
  *req.mutable_target() = plan_.target;
  req.mutable_target()->set_epoch(0);
  if (absl::Status s = CallAll(all, req, options_.call_timeout, nullptr);
      !s.ok()) {
    return Abort(s);
  }
  req.clear_target();

  // 2. COPY on the sources, STATUS polled meanwhile.
  SetPhase("copy");
  {
    absl::Mutex done_mu;
    bool done = false;
    std::thread poller([&] {
      v1::ReshardRequest poll;
      poll.set_phase(v1::RESHARD_PHASE_STATUS);
      poll.set_migration_id(id_);
      absl::MutexLock lock(&done_mu);
      while (!done) {
        done_mu.AwaitWithTimeout(absl::Condition(&done),
                                 options_.poll_interval);
        if (done) break;
        done_mu.Unlock();
        std::vector<v1::ReshardResponse> resps;
        if (CallAll(sources, poll, options_.call_timeout, &resps).ok()) {
          RecordProgress(resps);
        }
        done_mu.Lock();
      }
    });
    req.set_phase(v1::RESHARD_PHASE_COPY);
    std::vector<v1::ReshardResponse> copied;
    const absl::Status s =
        CallAll(sources, req, options_.phase_timeout, &copied);
    {
      absl::MutexLock lock(&done_mu);
      done = true;
    }
    poller.join();
    if (!s.ok()) return Abort(s);
    RecordProgress(copied);
  }

  // 3. CLOSE on every server of the old ring: no synchronous step is
  // split between the maps (a no-op in async mode). Reported as
  // "handoff" (MigrationStatus.phase has no word for it).
  SetPhase("handoff");
  req.set_phase(v1::RESHARD_PHASE_CLOSE);
  if (absl::Status s = CallAll(OldRing(), req, options_.phase_timeout, nullptr);
      !s.ok()) {
    return Abort(s);
  }

  // 4. HANDOFF on the sources.
  req.set_phase(v1::RESHARD_PHASE_HANDOFF);
  {
    std::vector<v1::ReshardResponse> handed;
    if (absl::Status s = CallAll(sources, req, options_.phase_timeout, &handed);
        !s.ok()) {
      return Abort(s);
    }
    RecordProgress(handed);
  }
  bool cancelled = false;
  {
    absl::MutexLock lock(&mu_);
    cancelled = cancelled_;
  }
  if (cancelled) {
    return Abort(absl::CancelledError(
        absl::StrCat(name, " cancelled before its map was published")));
  }

  // 5. The commit point.
  absl::StatusOr<v1::ClusterMap> published = publish();
  if (!published.ok()) return Abort(published.status());
  SetPhase("commit");
  {
    absl::MutexLock lock(&mu_);
    status_.set_to_epoch(published->epoch());
  }
  Log(absl::StrCat(name, ": map published at epoch ", published->epoch(),
                   " (from ", plan_.current.epoch(),
                   "); committing, there is no going back"));

  // 6. COMMIT everywhere, retried per server until its deadline.
  req.set_phase(v1::RESHARD_PHASE_COMMIT);
  *req.mutable_target() = *published;
  std::vector<absl::Status> committed(all.size());
  {
    std::vector<std::thread> threads;
    const absl::Time give_up = absl::Now() + options_.commit_timeout;
    for (size_t i = 0; i < all.size(); ++i) {
      threads.emplace_back([&, i] {
        absl::Duration backoff = absl::Milliseconds(50);
        while (true) {
          committed[i] = Call(
              *all[i], req,
              std::min(options_.call_timeout,
                       std::max(give_up - absl::Now(), absl::Milliseconds(1))),
              nullptr);
          if (committed[i].ok() || absl::IsCancelled(committed[i]) ||
              absl::Now() + backoff >= give_up) {
            return;
          }
          absl::SleepFor(backoff);
          backoff = std::min(backoff * 2, absl::Seconds(2));
        }
      });
    }
    for (std::thread& t : threads) t.join();
  }
  std::vector<std::string> missing;
  for (size_t i = 0; i < all.size(); ++i) {
    if (!committed[i].ok()) {
      missing.push_back(absl::StrCat("server node id:", all[i]->node_id,
                                     " addr:", all[i]->address, " (",
                                     committed[i].message(), ")"));
    }
  }
  v1::MigrationStatus final_status;
  SetPhase("done");
  {
    absl::MutexLock lock(&mu_);
    if (!missing.empty()) {
      status_.set_error(absl::StrCat("the map is published at epoch ",
                                     published->epoch(),
                                     " but COMMIT was not acknowledged by ",
                                     absl::StrJoin(missing, ", ")));
    }
    final_status = status_;
  }
  if (!missing.empty()) {
    Log(absl::StrCat(name, ": ", final_status.error()));
    return absl::DeadlineExceededError(
        absl::StrCat(name, ": ", final_status.error()));
  }
  Log(absl::StrCat(name, ": done, epoch ", plan_.current.epoch(), " -> ",
                   published->epoch(), ", ", final_status.rows_moved(),
                   " rows moved"));
  return final_status;
}

}  // namespace psdb::rpc
