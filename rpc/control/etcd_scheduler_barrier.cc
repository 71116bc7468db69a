// EtcdScheduler (etcd_scheduler.h): barriers and the step clock.
#include <algorithm>
#include <map>
#include <optional>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "rpc/control/etcd_scheduler.h"
#include "util/status_macros.h"

namespace psdb::rpc {
namespace {

// A barrier's key value: "open" or "released", then one arrived node id
// per line.
struct BarrierValue {
  bool released = false;
  std::vector<std::string> arrived;

  static BarrierValue Parse(absl::string_view text) {
    BarrierValue out;
    std::vector<std::string> lines =
        absl::StrSplit(text, '\n', absl::SkipEmpty());
    if (!lines.empty()) {
      out.released = lines[0] == "released";
      out.arrived.assign(lines.begin() + 1, lines.end());
    }
    return out;
  }
  std::string Serialize() const {
    return absl::StrCat(released ? "released" : "open", "\n",
                        absl::StrJoin(arrived, "\n"));
  }
  bool Has(absl::string_view id) const {
    return std::find(arrived.begin(), arrived.end(), id) != arrived.end();
  }
};

}  // namespace

absl::Status EtcdScheduler::Barrier(absl::string_view name,
                                    absl::string_view node_id, int64_t sequence,
                                    absl::Time deadline) {
  PSDB_RETURN_IF_ERROR(scheduler_internal::ValidateBarrierName(name));
  if (sequence < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "barrier '", name, "': node id:", node_id,
        " sent no sequence (the etcd scheduler needs BarrierRequest.sequence "
        ">= 1, which psdb's SchedulerClient sends)"));
  }
  if (closed()) return absl::UnavailableError("scheduler is shutting down");
  PSDB_RETURN_IF_ERROR(
      RegisteredWorker(node_id, absl::StrCat("barrier '", name, "'")).status());
  const std::string key = Key(absl::StrCat("barriers/", name, "/", sequence));
  const std::string id(node_id);
  // Arrive (idempotent: a re-sent call finds itself arrived).
  int64_t revision = 0;
  for (int attempt = 0;; ++attempt) {
    if (attempt == kMaxCasAttempts) {
      return absl::AbortedError(
          absl::StrCat("barrier '", name, "': too many concurrent writes"));
    }
    PSDB_ASSIGN_OR_RETURN(std::optional<EtcdKeyValue> kv, etcd_->Get(key));
    BarrierValue value =
        kv.has_value() ? BarrierValue::Parse(kv->value) : BarrierValue{};
    if (value.released) return absl::OkStatus();
    if (value.Has(id)) {
      revision = kv->mod_revision;
      break;
    }
    value.arrived.push_back(id);
    value.released =
        static_cast<int>(value.arrived.size()) >= options_.worker_num;
    // A released barrier is kept a while for calls re-sent after a
    // fail-over, then goes with its lease: no key is left per use.
    int64_t lease = 0;
    if (value.released) {
      PSDB_ASSIGN_OR_RETURN(lease, etcd_->LeaseGrant(ReleasedBarrierTtl()));
    }
    PSDB_ASSIGN_OR_RETURN(
        EtcdTxnResult r,
        etcd_->Txn({EtcdCompare::ModRevisionIs(
                       key, kv.has_value() ? kv->mod_revision : 0)},
                   {EtcdOp::Put(key, value.Serialize(), lease)},
                   {EtcdOp::Get(key)}));
    if (!r.succeeded) {
      // Our own release, committed by an attempt whose answer was lost?
      if (lease != 0 && !r.gets.empty() && r.gets[0].has_value() &&
          r.gets[0]->lease == lease) {
        return absl::OkStatus();
      }
      if (lease != 0) (void)etcd_->LeaseRevoke(lease);
      continue;
    }
    if (value.released) return absl::OkStatus();
    revision = r.revision;
    break;
  }
  // Wait for the release.
  while (!closed() && absl::Now() < deadline) {
    PSDB_RETURN_IF_ERROR(AwaitChange(key, false, revision, deadline));
    PSDB_ASSIGN_OR_RETURN(std::optional<EtcdKeyValue> kv, etcd_->Get(key));
    // Gone: released, and its lease ended since.
    if (!kv.has_value()) return absl::OkStatus();
    if (BarrierValue::Parse(kv->value).released) return absl::OkStatus();
    revision = kv->mod_revision;
  }
  // Leave, unless released meanwhile.
  BarrierValue left;
  for (int attempt = 0; attempt < kMaxCasAttempts; ++attempt) {
    PSDB_ASSIGN_OR_RETURN(std::optional<EtcdKeyValue> kv, etcd_->Get(key));
    if (!kv.has_value()) return absl::OkStatus();
    left = BarrierValue::Parse(kv->value);
    if (left.released) return absl::OkStatus();
    left.arrived.erase(
        std::remove(left.arrived.begin(), left.arrived.end(), id),
        left.arrived.end());
    PSDB_ASSIGN_OR_RETURN(
        EtcdTxnResult r,
        etcd_->Txn({EtcdCompare::ModRevisionIs(key, kv->mod_revision)},
                   {EtcdOp::Put(key, left.Serialize())}, {}));
    if (r.succeeded) break;
  }
  if (closed()) return absl::UnavailableError("scheduler is shutting down");
  PSDB_ASSIGN_OR_RETURN(
      std::string missing, DescribeWorkers([&](const std::string& w) {
        return w != id && !left.Has(w) ? std::optional<std::string>("")
                                       : std::nullopt;
      }));
  return absl::DeadlineExceededError(
      absl::StrCat("barrier '", name, "' timed out for node id:", node_id,
                   "; not arrived: ", missing));
}

absl::StatusOr<int64_t> EtcdScheduler::StepClock(absl::string_view node_id,
                                                 int64_t finished_step,
                                                 int staleness,
                                                 absl::Time deadline) {
  PSDB_RETURN_IF_ERROR(
      scheduler_internal::ValidateStepClock(finished_step, staleness));
  if (closed()) return absl::UnavailableError("scheduler is shutting down");
  absl::StatusOr<v1::NodeEntry> worker =
      RegisteredWorker(node_id, "step clock");
  if (!worker.ok()) {
    return absl::NotFoundError(absl::StrCat("step clock: node id:", node_id,
                                            " is not a registered worker"));
  }
  const std::string key = Key(absl::StrCat("clocks/", node_id));
  for (int attempt = 0;; ++attempt) {
    if (attempt == kMaxCasAttempts) {
      return absl::AbortedError("step clock: too many concurrent writes");
    }
    PSDB_ASSIGN_OR_RETURN(std::optional<EtcdKeyValue> kv, etcd_->Get(key));
    int64_t current = 0;
    if (kv.has_value()) (void)absl::SimpleAtoi(kv->value, &current);
    if (finished_step < current) {
      return absl::InvalidArgumentError(
          absl::StrCat("step clock: node id:", node_id, " reported step ",
                       finished_step, " after step ", current));
    }
    if (finished_step == current && kv.has_value()) break;  // a re-send
    PSDB_ASSIGN_OR_RETURN(
        EtcdTxnResult r,
        etcd_->Txn({EtcdCompare::ModRevisionIs(
                       key, kv.has_value() ? kv->mod_revision : 0)},
                   {EtcdOp::Put(key, absl::StrCat(finished_step))}, {}));
    if (r.succeeded) break;
  }
  const int64_t need = finished_step - staleness;
  absl::flat_hash_map<std::string, int64_t> clocks;
  // Worker rank -> node id. Ranks are never given twice nor taken away, so
  // they are read again only while some are still unassigned.
  std::map<int, std::string> ids;
  const std::string worker_ranks = Key("ranks/worker/");
  while (true) {
    if (static_cast<int>(ids.size()) < options_.worker_num) {
      PSDB_ASSIGN_OR_RETURN(EtcdRange ranks, etcd_->GetPrefix(worker_ranks));
      for (const EtcdKeyValue& kv : ranks.kvs) {
        int rank = 0;
        if (absl::SimpleAtoi(kv.key.substr(worker_ranks.size()), &rank)) {
          ids[rank] = kv.value;
        }
      }
    }
    PSDB_ASSIGN_OR_RETURN(EtcdRange range, etcd_->GetPrefix(Key("clocks/")));
    clocks.clear();
    for (const EtcdKeyValue& kv : range.kvs) {
      int64_t step = 0;
      if (absl::SimpleAtoi(kv.value, &step)) {
        clocks[kv.key.substr(Key("clocks/").size())] = step;
      }
    }
    int64_t slowest = INT64_MAX;
    for (int rank = 0; rank < options_.worker_num; ++rank) {
      auto id = ids.find(rank);
      auto clock = id == ids.end() ? clocks.end() : clocks.find(id->second);
      slowest = std::min(slowest, clock == clocks.end() ? 0 : clock->second);
    }
    if (slowest == INT64_MAX) slowest = 0;
    if (slowest >= need) return slowest;
    if (closed()) return absl::UnavailableError("scheduler is shutting down");
    if (absl::Now() >= deadline) break;
    PSDB_RETURN_IF_ERROR(
        AwaitChange(Key("clocks/"), true, range.revision, deadline));
  }
  PSDB_ASSIGN_OR_RETURN(
      std::string behind,
      DescribeWorkers([&](const std::string& w) -> std::optional<std::string> {
        auto it = clocks.find(w);
        const int64_t finished = it == clocks.end() ? 0 : it->second;
        if (finished >= need) return std::nullopt;
        return absl::StrCat(", finished ", finished);
      }));
  return absl::DeadlineExceededError(
      absl::StrCat("step clock: node id:", node_id, " finished step ",
                   finished_step, " and may run at most ", staleness,
                   " steps ahead; waiting for step ", need, " of: ", behind));
}

}  // namespace psdb::rpc
