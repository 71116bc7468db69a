#include "rpc/server/resharder.h"

#include <algorithm>
#include <chrono>
#include <optional>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "grpcpp/grpcpp.h"
#include "manifest/manifest.h"
#include "rpc/wire/cluster_map_proto.h"
#include "rpc/wire/convert.h"
#include "shard/ring.h"
#include "util/status_macros.h"

namespace psdb::rpc::internal {

namespace {

constexpr int32_t kDefaultBatchRows = 1024;
// Keys per ScanKeys batch when counting and deleting.
constexpr size_t kScanBatch = 4096;

absl::Span<const uint64_t> KeySpan(
    const google::protobuf::RepeatedField<uint64_t>& keys) {
  return absl::MakeConstSpan(keys.data(), static_cast<size_t>(keys.size()));
}

// Whether `key` moves off server `self` from `current` to `target`.
bool LeavesUnder(const ClusterMap& current, const ClusterMap& target,
                 ServerId self, uint64_t key) {
  return current.Owner(key) == self && target.Owner(key) != self;
}

// Scratch space of AppendLeaving, reused batch to batch.
struct LeavingScratch {
  std::vector<uint64_t> hashes;
  std::vector<uint32_t> next_owner;
  std::vector<uint32_t> now_owner;
  std::vector<uint64_t> moving;
};

// Appends to (*out)[o] each key of `keys` that LeavesUnder(current, target,
// self, key) and whose owner under `target` is target.ring().server_id(o):
// the same test a batch at a time, so the ring lookups' memory accesses
// overlap (Ring::OwnerIndicesOfHashes), and the keys grouped by where they
// go, so sending them looks nothing up again. The target ring is asked
// first, since few keys leave: the current ring only for those, each key
// hashed once when both rings hash alike (they do unless the ring options
// changed). REQUIRES: out->size() == target.ring().num_servers().
void AppendLeaving(const ClusterMap& current, const ClusterMap& target,
                   ServerId self, absl::Span<const uint64_t> keys,
                   LeavingScratch* sc,
                   std::vector<std::vector<uint64_t>>* out) {
  const Ring& now = current.ring();
  const Ring& next = target.ring();
  const std::optional<size_t> self_now = now.IndexOf(self);
  if (now.empty() || next.empty() || !self_now.has_value()) return;
  const std::optional<size_t> self_next = next.IndexOf(self);
  const size_t n = keys.size();
  sc->hashes.resize(n);
  sc->next_owner.resize(n);
  for (size_t i = 0; i < n; ++i) sc->hashes[i] = next.KeyHash(keys[i]);
  next.OwnerIndicesOfHashes(sc->hashes, absl::MakeSpan(sc->next_owner));
  // Keys (their hashes, their owners under the target) that are not self's
  // under the target, moved to the front.
  sc->moving.clear();
  size_t n_moving = 0;
  for (size_t i = 0; i < n; ++i) {
    if (self_next.has_value() && sc->next_owner[i] == *self_next) continue;
    sc->moving.push_back(keys[i]);
    sc->hashes[n_moving] = sc->hashes[i];
    sc->next_owner[n_moving++] = sc->next_owner[i];
  }
  sc->now_owner.resize(n_moving);
  if (now.options().hash_seed == next.options().hash_seed) {
    now.OwnerIndicesOfHashes(absl::MakeConstSpan(sc->hashes.data(), n_moving),
                             absl::MakeSpan(sc->now_owner));
  } else {
    now.OwnerIndices(sc->moving, absl::MakeSpan(sc->now_owner));
  }
  for (size_t i = 0; i < n_moving; ++i) {
    if (sc->now_owner[i] == *self_now) {
      (*out)[sc->next_owner[i]].push_back(sc->moving[i]);
    }
  }
}

// Same servers (ids, addresses, weights, ring states) and ring options.
bool SameRing(const ClusterMap& a, const ClusterMap& b) {
  ClusterMapSpec sa = a.spec(), sb = b.spec();
  sa.epoch = sb.epoch = 0;
  return sa == sb;
}

}  // namespace

struct Resharder::Peer {
  std::unique_ptr<v1::ParameterService::Stub> stub;
};

Resharder::Pass::~Pass() {
  if (owner_ == nullptr) return;
  if (generation_ != 0) {
    owner_->Leave(generation_, sync_, leaving_);
  } else {
    owner_->LeaveUnprepared();
  }
}

Resharder::Resharder(ClusterMap map, ServerId self, Store* store,
                     const SyncAggregator* sync, ClientTlsOptions peer_tls,
                     size_t max_batch_keys)
    : self_(self),
      store_(store),
      sync_(sync),
      peer_tls_(std::move(peer_tls)),
      max_batch_keys_(max_batch_keys),
      map_(std::make_shared<const ClusterMap>(std::move(map))) {}

Resharder::~Resharder() = default;

std::shared_ptr<const ClusterMap> Resharder::map() const {
  absl::MutexLock lock(&mu_);
  return map_;
}

bool Resharder::Leaves(const ClusterMap& current, uint64_t key) const {
  mu_.AssertReaderHeld();
  return LeavesUnder(current, *target_, self_, key);
}

void Resharder::Leave(uint64_t generation, bool sync, bool leaving) {
  absl::MutexLock lock(&mu_);
  if (generation != generation_) {
    --running_stale_;
    drained_cv_.SignalAll();
    return;
  }
  --running_tracked_;
  if (sync) --running_sync_;
  if (leaving) --running_leaving_;
}

void Resharder::LeaveUnprepared() {
  // Sequentially consistent with PREPARE's store of active_ and its read
  // of the count: either PREPARE sees this request gone, or this sees
  // active_ and wakes it. Under mu_, so the signal cannot fall between
  // PREPARE's check and its wait.
  if (running_unprepared_.fetch_sub(1) == 1 && active_.load()) {
    absl::MutexLock lock(&mu_);
    drained_cv_.SignalAll();
  }
}

absl::StatusOr<std::optional<Resharder::Pass>> Resharder::TryEnter(
    const GateRequest& req, std::function<void()> resume) {
  if (!active()) {
    // Counted before active_ is checked again, so PREPARE, which sets
    // active_ before it reads the count, either waits for this request or
    // is seen by it.
    running_unprepared_.fetch_add(1);
    if (!active_.load()) return Pass(this, 0, false, false);
    running_unprepared_.fetch_sub(1);  // PREPARE re-reads it under mu_
  }
  absl::MutexLock lock(&mu_);
  if (phase_ == Phase::kNone) {
    running_unprepared_.fetch_add(1);
    return Pass(this, 0, false, false);
  }
  if (shut_down_) {
    return absl::UnavailableError("server shutting down during resharding");
  }
  const ClusterMap& current = *map_;
  // Routed with a map newer than ours: wait for our COMMIT.
  bool hold = req.client_epoch > current.epoch();
  bool leaving = false;
  // Routed with an older map: CheckKeys refuses it, nothing to track.
  if (!hold && (req.client_epoch == 0 || req.client_epoch == current.epoch())) {
    if (source_) {
      ForEachRead(req, [&](absl::string_view, absl::Span<const uint64_t> keys) {
        for (uint64_t key : keys) leaving = leaving || Leaves(current, key);
      });
    }
    if (req.sync_step.has_value() && closed_ &&
        !started_steps_.contains(*req.sync_step)) {
      hold = true;
    } else if (leaving && holding_) {
      hold = true;
    }
  }
  if (hold) {
    parked_.push_back(std::move(resume));
    return std::nullopt;
  }
  ++running_tracked_;
  const bool sync = req.sync_step.has_value();
  if (sync) {
    if (!closed_) started_steps_.insert(*req.sync_step);
    ++running_sync_;
  }
  if (leaving) {
    ++running_leaving_;
    ForEachRead(req,
                [&](absl::string_view table, absl::Span<const uint64_t> keys) {
                  absl::flat_hash_set<uint64_t>& touched = touched_[table];
                  for (uint64_t key : keys) {
                    if (Leaves(current, key)) touched.insert(key);
                  }
                });
  }
  return Pass(this, generation_, sync, leaving);
}

void Resharder::Shutdown() {
  std::vector<std::function<void()>> resume;
  {
    absl::MutexLock lock(&mu_);
    shut_down_ = true;
    resume.swap(parked_);
  }
  for (auto& fn : resume) fn();
}

std::vector<std::function<void()>> Resharder::EndLocked() {
  // Requests still running were tracked by this migration only: the next
  // PREPARE waits for them.
  running_stale_ += running_tracked_;
  running_tracked_ = running_sync_ = running_leaving_ = 0;
  ++generation_;
  id_ = 0;
  drained_cv_.SignalAll();  // a waiting PREPARE of this migration ends
  phase_ = Phase::kNone;
  target_.reset();
  source_ = closed_ = holding_ = false;
  started_steps_.clear();
  touched_.clear();
  handed_over_.clear();
  active_.store(false, std::memory_order_release);
  std::vector<std::function<void()>> parked;
  parked.swap(parked_);
  return parked;
}

absl::Status Resharder::Reshard(const v1::ReshardRequest& req,
                                v1::ReshardResponse* resp,
                                absl::Time deadline) {
  if (req.migration_id() == 0) {
    return absl::InvalidArgumentError("Reshard: migration_id is 0");
  }
  absl::Status status;
  switch (req.phase()) {
    case v1::RESHARD_PHASE_PREPARE: {
      // The last migration's handed-over rows are gone before this one
      // scans keys or receives rows (a key may come back). A failed
      // background delete left rows behind: scan for them instead.
      if (!store_->WaitForDeletes().ok()) {
        PSDB_RETURN_IF_ERROR(DropForeignRows());
      }
      absl::MutexLock lock(&mu_);
      status = Prepare(req, deadline);
      break;
    }
    case v1::RESHARD_PHASE_COPY:
      status = Copy(req, deadline);
      break;
    case v1::RESHARD_PHASE_CLOSE:
      status = Close(deadline);
      break;
    case v1::RESHARD_PHASE_HANDOFF:
      status = Handoff(req, deadline);
      break;
    case v1::RESHARD_PHASE_COMMIT:
      status = Commit(req);
      break;
    case v1::RESHARD_PHASE_ABORT:
      status = Abort();
      break;
    case v1::RESHARD_PHASE_STATUS:
      break;
    default:
      return absl::InvalidArgumentError(
          absl::StrCat("Reshard: unknown phase ", req.phase()));
  }
  if (!status.ok()) return status;
  absl::MutexLock lock(&mu_);
  if (req.phase() != v1::RESHARD_PHASE_COMMIT &&
      req.phase() != v1::RESHARD_PHASE_ABORT && id_ != req.migration_id()) {
    return absl::FailedPreconditionError(
        absl::StrCat("Reshard: migration ", req.migration_id(),
                     " is not the one prepared here (",
                     id_ == 0 ? std::string("none") : absl::StrCat(id_), ")"));
  }
  Fill(resp);
  return absl::OkStatus();
}

void Resharder::Fill(v1::ReshardResponse* resp) const {
  v1::ReshardPhase phase = v1::RESHARD_PHASE_UNSPECIFIED;
  switch (phase_) {
    case Phase::kNone:
      break;
    case Phase::kPrepared:
      phase = v1::RESHARD_PHASE_PREPARE;
      break;
    case Phase::kCopied:
      phase = v1::RESHARD_PHASE_COPY;
      break;
    case Phase::kClosed:
      phase = v1::RESHARD_PHASE_CLOSE;
      break;
    case Phase::kHandedOff:
      phase = v1::RESHARD_PHASE_HANDOFF;
      break;
  }
  resp->set_phase(phase);
  resp->set_migration_id(id_);
  resp->set_rows_to_move(rows_to_move_);
  resp->set_rows_moved(rows_moved_.load());
  resp->set_rows_received(rows_received_.load());
}

absl::Status Resharder::Prepare(const v1::ReshardRequest& req,
                                absl::Time deadline) {
  if (phase_ != Phase::kNone && id_ != req.migration_id()) {
    return absl::FailedPreconditionError(
        absl::StrCat("Reshard PREPARE ", req.migration_id(), ": migration ",
                     id_, " is already prepared here"));
  }
  if (phase_ == Phase::kNone) {  // else re-sent: wait as the first did
    PSDB_ASSIGN_OR_RETURN(ClusterMap target, ClusterMapFromProto(req.target()));
    if (target.ring().num_servers() == 0) {
      return absl::InvalidArgumentError(
          "Reshard PREPARE: the target map has no server on the ring");
    }
    id_ = req.migration_id();
    phase_ = Phase::kPrepared;
    target_ = std::make_shared<const ClusterMap>(std::move(target));
    source_ = map_->Find(self_) != nullptr && OnRing(map_->Find(self_)->state);
    closed_ = holding_ = false;
    started_steps_.clear();
    touched_.clear();
    handed_over_.clear();
    rows_to_move_ = 0;
    rows_moved_ = 0;
    rows_received_ = 0;
    active_.store(true);
  }
  // Requests admitted before now are not tracked by this migration: wait
  // until they are answered, so no write COPY misses is still running when
  // it reads. (An ABORT meanwhile ends the wait.)
  // A condition variable, not an absl::Condition: the count is an atomic,
  // not state mu_ guards, which a Condition may read.
  auto drained =
      [this, id = req.migration_id()]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
        return (running_unprepared_.load() == 0 && running_stale_ == 0) ||
               id_ != id;
      };
  bool timed_out = false;
  while (!drained() && !timed_out) {
    timed_out = drained_cv_.WaitWithDeadline(&mu_, deadline);
  }
  const bool done = drained();
  if (id_ != req.migration_id()) {
    return absl::AbortedError(absl::StrCat(
        "Reshard PREPARE ", req.migration_id(), ": aborted meanwhile"));
  }
  if (!done) {  // the coordinator aborts
    return absl::DeadlineExceededError(absl::StrCat(
        "Reshard PREPARE: ", running_unprepared_.load() + running_stale_,
        " requests admitted before it still running"));
  }
  // A round still waiting for workers holds pushes of requests that
  // entered before PREPARE; its apply (at the last worker's push) writes
  // their keys too. Leaving ones count as touched (HANDOFF sends them
  // again), and their steps as started (CLOSE lets their last pushes in).
  if (sync_ != nullptr) {
    // Runs here, under mu_ (-Wthread-safety checks a lambda as a function
    // of its own: the annotation tells it).
    auto record = [&](absl::string_view table, int64_t step,
                      absl::Span<const uint64_t> keys)
                      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
                        started_steps_.insert(step);
                        if (!source_) return;
                        for (uint64_t key : keys) {
                          if (Leaves(*map_, key)) touched_[table].insert(key);
                        }
                      };
    sync_->ForEachPendingPush(record);
  }
  return absl::OkStatus();
}

absl::Status Resharder::Copy(const v1::ReshardRequest& req,
                             absl::Time deadline) {
  std::shared_ptr<const ClusterMap> current, target;
  {
    absl::MutexLock lock(&mu_);
    if (phase_ == Phase::kNone || id_ != req.migration_id()) {
      return absl::FailedPreconditionError(absl::StrCat(
          "Reshard COPY: migration ", req.migration_id(), " is not prepared"));
    }
    if (!source_ || phase_ != Phase::kPrepared) return absl::OkStatus();
    current = map_;
    target = target_;
  }
  const size_t batch_rows = std::min<size_t>(
      req.batch_rows() > 0 ? req.batch_rows() : kDefaultBatchRows,
      max_batch_keys_);
  // One pass over the keys (memory, then disk; nothing is flushed): the
  // leaving ones, which also give progress its denominator.
  // leaving[t][o]: the keys of table t that go to the target ring's
  // server o.
  const std::vector<TableSpec> tables = store_->ListTables();
  std::vector<std::vector<std::vector<uint64_t>>> leaving(
      tables.size(),
      std::vector<std::vector<uint64_t>>(target->ring().num_servers()));
  LeavingScratch scratch;
  uint64_t to_move = 0;
  for (size_t t = 0; t < tables.size(); ++t) {
    PSDB_RETURN_IF_ERROR(store_->ScanKeys(
        tables[t].name, kScanBatch, [&](absl::Span<const uint64_t> keys) {
          AppendLeaving(*current, *target, self_, keys, &scratch, &leaving[t]);
          return absl::OkStatus();
        }));
    for (const std::vector<uint64_t>& keys : leaving[t]) to_move += keys.size();
  }
  {
    absl::MutexLock lock(&mu_);
    rows_to_move_ = to_move;
  }
  for (size_t t = 0; t < tables.size(); ++t) {
    PSDB_RETURN_IF_ERROR(SendGrouped(tables[t], target, leaving[t], batch_rows,
                                     req.max_rows_per_second(), deadline));
  }
  absl::MutexLock lock(&mu_);
  if (id_ == req.migration_id() && phase_ == Phase::kPrepared) {
    phase_ = Phase::kCopied;
  }
  return absl::OkStatus();
}

absl::Status Resharder::Close(absl::Time deadline) {
  absl::MutexLock lock(&mu_);
  if (phase_ == Phase::kNone) {
    return absl::FailedPreconditionError("Reshard CLOSE: nothing prepared");
  }
  closed_ = true;
  if (phase_ == Phase::kPrepared || phase_ == Phase::kCopied) {
    phase_ = Phase::kClosed;
  }
  // Re-evaluated whenever a push leaves the gate, which is when a round
  // can complete.
  auto idle = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return running_sync_ == 0 &&
           (sync_ == nullptr || sync_->pending_rounds() == 0);
  };
  if (!mu_.AwaitWithDeadline(absl::Condition(&idle), deadline)) {
    return absl::DeadlineExceededError(absl::StrCat(
        "Reshard CLOSE: ", sync_ == nullptr ? 0 : sync_->pending_rounds(),
        " synchronous rounds of started steps still wait for workers"));
  }
  return absl::OkStatus();
}

absl::Status Resharder::Handoff(const v1::ReshardRequest& req,
                                absl::Time deadline) {
  absl::flat_hash_map<std::string, absl::flat_hash_set<uint64_t>> touched;
  {
    absl::MutexLock lock(&mu_);
    if (phase_ == Phase::kNone || id_ != req.migration_id()) {
      return absl::FailedPreconditionError(
          absl::StrCat("Reshard HANDOFF: migration ", req.migration_id(),
                       " is not prepared"));
    }
    if (!source_ || phase_ == Phase::kHandedOff) return absl::OkStatus();
    holding_ = true;
    auto idle = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      return running_leaving_ == 0;
    };
    if (!mu_.AwaitWithDeadline(absl::Condition(&idle), deadline)) {
      return absl::DeadlineExceededError(
          absl::StrCat("Reshard HANDOFF: ", running_leaving_,
                       " requests for handed-over keys still running"));
    }
    // Nothing adds to it while holding.
    touched.swap(touched_);
    rows_to_move_ += [&] {
      uint64_t n = 0;
      for (const auto& [table, keys] : touched) n += keys.size();
      return n;
    }();
  }
  const size_t batch_rows = std::min<size_t>(
      req.batch_rows() > 0 ? req.batch_rows() : kDefaultBatchRows,
      max_batch_keys_);
  for (const auto& [table, keys] : touched) {
    absl::StatusOr<TableSpec> spec = store_->GetTable(table);
    if (!spec.ok()) continue;  // dropped meanwhile
    std::vector<uint64_t> sorted(keys.begin(), keys.end());
    std::sort(sorted.begin(), sorted.end());
    PSDB_RETURN_IF_ERROR(SendRows(*spec, sorted, batch_rows,
                                  req.max_rows_per_second(), deadline));
  }
  absl::MutexLock lock(&mu_);
  if (id_ == req.migration_id()) phase_ = Phase::kHandedOff;
  return absl::OkStatus();
}

absl::Status Resharder::SendRows(const TableSpec& spec,
                                 absl::Span<const uint64_t> keys,
                                 size_t batch_rows, int64_t rows_per_second,
                                 absl::Time deadline) {
  if (keys.empty()) return absl::OkStatus();
  std::shared_ptr<const ClusterMap> target;
  {
    absl::MutexLock lock(&mu_);
    target = target_;
  }
  if (target == nullptr) {
    return absl::AbortedError("live resharding aborted while sending rows");
  }
  // Keys by new owner, in their order (batched ring lookups).
  const Ring& ring = target->ring();
  if (ring.empty()) return absl::InternalError("target map has no servers");
  std::vector<std::vector<uint64_t>> by_owner(ring.num_servers());
  std::vector<uint32_t> owner(keys.size());
  ring.OwnerIndices(keys, absl::MakeSpan(owner));
  for (size_t i = 0; i < keys.size(); ++i)
    by_owner[owner[i]].push_back(keys[i]);
  return SendGrouped(spec, target, by_owner, batch_rows, rows_per_second,
                     deadline);
}

absl::Status Resharder::SendGrouped(
    const TableSpec& spec, const std::shared_ptr<const ClusterMap>& target,
    absl::Span<const std::vector<uint64_t>> by_owner, size_t batch_rows,
    int64_t rows_per_second, absl::Time deadline) {
  uint64_t id;
  {
    absl::MutexLock lock(&mu_);
    if (target_ != target) {
      return absl::AbortedError("live resharding aborted while sending rows");
    }
    id = id_;
  }
  // Up to kInFlight Migrate calls at once (reading and encoding the next
  // batch while the last ones travel and are applied). 4 batches of 1024
  // dim-64 Adagrad rows are 2.2 MB per source, more than a 10 Gb/s link
  // with 1 ms of round trip holds. More is not faster: every batch in
  // flight is a request buffer here and a receive buffer and a parsed
  // copy at the destination, fresh memory the first time, and with 16 per
  // source a destination fed by 3 sources took ~25k page faults over one
  // ps-bench migrate add against ~17k with 4 (docs/benchmarks/migrate.md, run
  // 9).
  constexpr int kInFlight = 4;
  struct Flight {
    grpc::ClientContext ctx;
    v1::MigrateRequest req;
    v1::MigrateResponse resp;
    std::string where;
  };
  const v1::TableSpec spec_proto = TableSpecToProto(spec);
  std::vector<uint64_t> found;
  absl::Mutex flight_mu;
  int in_flight = 0;
  absl::Status first_error;
  std::vector<uint64_t> sent_keys;
  const absl::Time start = absl::Now();
  uint64_t launched = 0;
  absl::Status status;
  for (size_t o = 0; o < by_owner.size(); ++o) {
    const std::vector<uint64_t>& owned = by_owner[o];
    if (owned.empty()) continue;
    const ServerId owner = target->ring().server_id(o);
    const ServerInfo* info = target->Find(owner);
    if (info == nullptr) {
      return absl::InternalError(
          absl::StrCat("target map has no server ", owner));
    }
    PSDB_ASSIGN_OR_RETURN(Peer * peer, PeerFor(owner, info->address));
    for (size_t begin = 0; begin < owned.size() && status.ok();
         begin += batch_rows) {
      const absl::Span<const uint64_t> chunk =
          absl::MakeConstSpan(owned).subspan(
              begin, std::min(batch_rows, owned.size() - begin));
      auto flight = std::make_shared<Flight>();
      flight->req.set_migration_id(id);
      *flight->req.mutable_spec() = spec_proto;
      // Rows that exist (a key never materialized, under admission, has
      // none), encoded as stored.
      found.clear();
      status = store_->ReadEncodedRows(spec.name, chunk, &found,
                                       flight->req.mutable_row_bytes());
      if (!status.ok()) break;
      if (found.empty()) continue;
      flight->req.mutable_keys()->Add(found.begin(), found.end());
      sent_keys.insert(sent_keys.end(), flight->req.keys().begin(),
                       flight->req.keys().end());
      flight->where = absl::StrCat("Migrate to server ", owner, " at ",
                                   info->address, ", table '", spec.name, "'");
      flight->ctx.set_deadline(absl::ToChronoTime(deadline));
      {
        absl::MutexLock lock(&flight_mu);
        flight_mu.Await(absl::Condition(
            +[](int* n) { return *n < kInFlight; }, &in_flight));
        if (!first_error.ok()) {
          status = first_error;
          break;
        }
        ++in_flight;
      }
      const int n = flight->req.keys_size();
      peer->stub->async()->Migrate(&flight->ctx, &flight->req, &flight->resp,
                                   [this, flight, n, &flight_mu, &in_flight,
                                    &first_error](grpc::Status s) {
                                     if (s.ok()) rows_moved_.fetch_add(n);
                                     absl::MutexLock lock(&flight_mu);
                                     if (!s.ok() && first_error.ok()) {
                                       first_error = Annotate(FromGrpcStatus(s),
                                                              flight->where);
                                     }
                                     --in_flight;
                                   });
      launched += n;
      if (rows_per_second > 0) {
        // A throttle, not a wait for a condition: keep to the rate.
        const absl::Time due =
            start + absl::Seconds(static_cast<double>(launched) /
                                  static_cast<double>(rows_per_second));
        if (due > deadline) {
          status = absl::DeadlineExceededError(
              "live resharding: the rate limit does not fit the deadline");
          break;
        }
        absl::SleepFor(due - absl::Now());
      }
    }
    if (!status.ok()) break;
  }
  absl::MutexLock lock(&flight_mu);
  flight_mu.Await(absl::Condition(
      +[](int* n) { return *n == 0; }, &in_flight));
  if (status.ok()) status = first_error;
  if (!status.ok()) return status;
  absl::MutexLock state_lock(&mu_);
  std::vector<uint64_t>& handed = handed_over_[spec.name];
  handed.insert(handed.end(), sent_keys.begin(), sent_keys.end());
  return absl::OkStatus();
}

absl::StatusOr<Resharder::Peer*> Resharder::PeerFor(
    ServerId id, const std::string& address) {
  absl::MutexLock lock(&peers_mu_);
  std::unique_ptr<Peer>& peer = peers_[id];
  if (peer == nullptr) {
    grpc::ChannelArguments args;
    args.SetMaxReceiveMessageSize(-1);
    args.SetMaxSendMessageSize(-1);
    PSDB_ASSIGN_OR_RETURN(std::shared_ptr<grpc::Channel> channel,
                          MakeChannel(peer_tls_, address, args));
    peer = std::make_unique<Peer>();
    peer->stub = v1::ParameterService::NewStub(channel);
  }
  return peer.get();
}

absl::Status Resharder::Commit(const v1::ReshardRequest& req) {
  PSDB_ASSIGN_OR_RETURN(ClusterMap published,
                        ClusterMapFromProto(req.target()));
  bool scan = false;
  absl::flat_hash_map<std::string, std::vector<uint64_t>> handed;
  std::vector<std::function<void()>> resume;
  {
    absl::MutexLock lock(&mu_);
    if (published.epoch() <= map_->epoch()) {
      if (published.epoch() == map_->epoch() && SameRing(published, *map_)) {
        return absl::OkStatus();  // re-sent
      }
      return absl::FailedPreconditionError(
          absl::StrCat("Reshard COMMIT: epoch ", published.epoch(),
                       " is not newer than this server's ", map_->epoch()));
    }
    if (phase_ != Phase::kNone && id_ == req.migration_id() &&
        !SameRing(published, *target_)) {
      return absl::InvalidArgumentError(
          "Reshard COMMIT: the published map is not the prepared target");
    }
    // A source, or a server that was not prepared (restarted) and may hold
    // rows it no longer owns.
    // A server that was not prepared (restarted) may hold rows it no
    // longer owns: it scans for them.
    scan = phase_ == Phase::kNone || id_ != req.migration_id();
    if (!scan) handed.swap(handed_over_);
    map_ = std::make_shared<const ClusterMap>(std::move(published));
    resume = EndLocked();
  }
  for (auto& fn : resume) fn();
  if (scan) return DropForeignRows();
  // A source deletes what it handed over (every such row exists: nothing
  // can delete it while it is in flight), after answering: the store
  // keeps readers of its key set (checkpoints, scans, stats, the next
  // PREPARE) waiting until the rows are gone, and no request can write
  // them meanwhile (this server no longer owns them).
  for (auto& [table, keys] : handed) {
    store_->DeleteRowsLater(table, std::move(keys));
  }
  return absl::OkStatus();
}

absl::Status Resharder::Abort() {
  bool received;
  std::vector<std::function<void()>> resume;
  {
    absl::MutexLock lock(&mu_);
    if (phase_ == Phase::kNone) return absl::OkStatus();
    resume = EndLocked();
    auto idle = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      return running_receive_ == 0;
    };
    mu_.Await(absl::Condition(&idle));
    received = rows_received_.load() > 0;
  }
  for (auto& fn : resume) fn();
  return received ? DropForeignRows() : absl::OkStatus();
}

absl::Status Resharder::Migrate(const v1::MigrateRequest& req) {
  const absl::Span<const uint64_t> keys = KeySpan(req.keys());
  PSDB_ASSIGN_OR_RETURN(TableSpec spec, TableSpecFromProto(req.spec()));
  PSDB_RETURN_IF_ERROR(ValidateTableSpec(spec));
  if (keys.size() > max_batch_keys_) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "Migrate: ", keys.size(), " rows, more than ", max_batch_keys_));
  }
  {
    absl::MutexLock lock(&mu_);
    if (phase_ == Phase::kNone || id_ != req.migration_id()) {
      return absl::FailedPreconditionError(
          absl::StrCat("Migrate: migration ", req.migration_id(),
                       " is not prepared on this server"));
    }
    // Batched ring lookups (Ring::OwnerIndices): this runs per row.
    const Ring& ring = target_->ring();
    const std::optional<size_t> self_index = ring.IndexOf(self_);
    std::vector<uint32_t> owner(keys.size());
    if (self_index.has_value()) ring.OwnerIndices(keys, absl::MakeSpan(owner));
    for (size_t i = 0; i < keys.size(); ++i) {
      if (!self_index.has_value() || owner[i] != *self_index) {
        return absl::FailedPreconditionError(
            absl::StrCat("Migrate: table '", spec.name, "': key ", keys[i],
                         " is not this server's under the target map"));
      }
    }
    ++running_receive_;
  }
  absl::Status status = [&]() -> absl::Status {
    PSDB_RETURN_IF_ERROR(store_->CreateTable(spec));
    return store_->IngestRows(spec.name, keys, req.row_bytes());
  }();
  absl::MutexLock lock(&mu_);
  --running_receive_;
  if (status.ok()) rows_received_.fetch_add(keys.size());
  return status;
}

absl::Status Resharder::DropForeignRows() {
  const std::shared_ptr<const ClusterMap> current = map();
  if (current->servers().size() <= 1) return absl::OkStatus();  // owns all
  for (const TableSpec& spec : store_->ListTables()) {
    std::vector<uint64_t> foreign;
    PSDB_RETURN_IF_ERROR(store_->ScanKeys(spec.name, kScanBatch,
                                          [&](absl::Span<const uint64_t> keys) {
                                            for (uint64_t key : keys) {
                                              if (!current->Owns(self_, key))
                                                foreign.push_back(key);
                                            }
                                            return absl::OkStatus();
                                          }));
    for (size_t begin = 0; begin < foreign.size(); begin += max_batch_keys_) {
      PSDB_RETURN_IF_ERROR(
          store_
              ->DeleteRows(
                  spec.name,
                  absl::MakeConstSpan(foreign).subspan(
                      begin, std::min(max_batch_keys_, foreign.size() - begin)))
              .status());
    }
  }
  return absl::OkStatus();
}

}  // namespace psdb::rpc::internal
