#include "rpc/server/request_checks.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "psdb/table_spec.h"
#include "util/status_macros.h"

namespace psdb::rpc::internal {

RequestChecks::RequestChecks(const ServerOptions& options, bool serving)
    : shard_id_(options.shard_id),
      max_batch_keys_(options.max_batch_keys),
      sync_(options.sync.num_workers > 0),
      serving_(serving) {}

absl::Status RequestChecks::WrongEpoch(absl::string_view why,
                                       uint64_t epoch) const {
  return absl::FailedPreconditionError(
      absl::StrCat(why, "; server ", shard_id_, " has server epoch ", epoch));
}

absl::Status RequestChecks::CheckEpoch(const ClusterMap& map,
                                       uint64_t client_epoch) const {
  if (serving_) return absl::OkStatus();  // see server.h
  if (client_epoch != 0 && client_epoch != map.epoch()) {
    return WrongEpoch(
        absl::StrCat("request routed with cluster epoch ", client_epoch),
        map.epoch());
  }
  return absl::OkStatus();
}

absl::Status RequestChecks::CheckKeys(const ClusterMap& map,
                                      const ServingSnapshot* snapshot,
                                      uint64_t client_epoch,
                                      absl::string_view table,
                                      absl::Span<const uint64_t> keys) const {
  PSDB_RETURN_IF_ERROR(CheckEpoch(map, client_epoch));
  PSDB_RETURN_IF_ERROR(ValidateTableName(table));
  if (keys.size() > max_batch_keys_) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "table '", table, "': request has ", keys.size(),
        " keys, more than the server's limit of ", max_batch_keys_));
  }
  if (snapshot != nullptr) {
    for (uint64_t key : keys) {
      if (!snapshot->Holds(key)) {
        return absl::FailedPreconditionError(absl::StrCat(
            "table '", table, "': key ", key, " is on shard ",
            snapshot->ring->Owner(key), " of checkpoint ",
            snapshot->checkpoint_id, "; this replica serves shard ",
            absl::StrJoin(snapshot->shard_ids, ",")));
      }
    }
  } else if (!Alone(map)) {
    for (uint64_t key : keys) {
      const ServerId owner = map.Owner(key);
      if (owner != shard_id_) {
        return WrongEpoch(
            absl::StrCat("table '", table, "': key ", key,
                         " is owned by server ", owner, ", not this one"),
            map.epoch());
      }
    }
  }
  return absl::OkStatus();
}

absl::Status RequestChecks::CheckPushMode(v1::PushMode mode,
                                          absl::string_view table) const {
  if (serving_ || mode == v1::PUSH_MODE_UNSPECIFIED) return absl::OkStatus();
  const bool sync_push = mode == v1::PUSH_MODE_SYNC;
  if (sync_push == sync_) return absl::OkStatus();
  // The fix is on either side: the servers' --sync_mode or the worker's
  // mode (ps-train pushes synchronously only as a cluster worker, through
  // the scheduler: with a servers: URL its pushes are async).
  if (sync_push) {
    return absl::FailedPreconditionError(absl::StrCat(
        "ps-server runs --sync_mode=async but this worker pushes "
        "synchronously (ps-train --mode sync, or push_to_every_server): start "
        "every ps-server with --sync_mode=sync, or run ps-train with --mode "
        "async; table '",
        table, "': push refused, nothing applied"));
  }
  return absl::FailedPreconditionError(absl::StrCat(
      "ps-server runs --sync_mode=sync but this worker pushes asynchronously "
      "(ps-train --mode async, or no push_to_every_server): start every "
      "ps-server with --sync_mode=async, or run ps-train with --mode sync "
      "and --store scheduler:HOST:PORT; table '",
      table, "': push refused, nothing applied"));
}

bool Alone(const ClusterMap& map) { return map.servers().size() <= 1; }

absl::Status ValidateRootDir(absl::string_view root) {
  if (root.empty()) {
    return absl::InvalidArgumentError("checkpoint root_dir is empty");
  }
  for (absl::string_view part : absl::StrSplit(root, '/')) {
    if (part == "..") {
      return absl::InvalidArgumentError(absl::StrCat(
          "checkpoint root_dir '", root, "' has a '..' component"));
    }
  }
  return absl::OkStatus();
}

}  // namespace psdb::rpc::internal
