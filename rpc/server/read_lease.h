// ReadLease: what one ps-server request reads, held until it is answered:
// the training server's Store, or one version (checkpoint) a serving
// replica holds (rpc/server/checkpoint_follower.h). And the reads that
// name versions: the version fields of Pull, PullRows and PullTables
// answers, and PullTables itself (rpc/wire/psdb.proto). Internal to
// psdb_server (server.cc's handlers).
//
// Thread-safety: a lease is used by the one request that took it; the
// functions are thread-safe as the store and follower they use are.
#ifndef PSDB_RPC_SERVER_READ_LEASE_H_
#define PSDB_RPC_SERVER_READ_LEASE_H_

#include <memory>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "psdb/store.h"
#include "rpc/server/checkpoint_follower.h"
#include "rpc/server/request_checks.h"
#include "rpc/wire/psdb.pb.h"
#include "shard/cluster_map.h"

namespace psdb::rpc::internal {

class ReadLease {
 public:
  // The training store (no versions).
  explicit ReadLease(Store* store) : store_(store) {}
  // One version a replica holds; its reads are serving reads.
  explicit ReadLease(std::shared_ptr<ServingSnapshot> snapshot)
      : snapshot_(std::move(snapshot)) {}

  // What a request reads: `store` when training (REQUIRES: follower null;
  // a non-empty `version` is FAILED_PRECONDITION: a training server has
  // no checkpoint versions), else `follower`'s newest version (`version`
  // empty) or the held version `version` (NOT_FOUND naming it and the
  // versions held when it is not held).
  static absl::StatusOr<ReadLease> Acquire(Store* store,
                                           const CheckpointFollower* follower,
                                           absl::string_view version);

  // Null when training.
  const ServingSnapshot* snapshot() const { return snapshot_.get(); }

  absl::StatusOr<TableSpec> GetTable(absl::string_view table) const {
    return snapshot_ ? snapshot_->GetTable(table) : store_->GetTable(table);
  }
  std::vector<TableSpec> ListTables() const {
    return snapshot_ ? snapshot_->ListTables() : store_->ListTables();
  }
  StoreStats Stats() const {
    return snapshot_ ? snapshot_->Stats() : store_->Stats();
  }
  absl::Status Pull(absl::string_view table, absl::Span<const uint64_t> keys,
                    absl::Span<float> out, const PullOptions& options) const {
    return snapshot_ ? snapshot_->Pull(table, keys, out)
                     : store_->Pull(table, keys, out, options);
  }
  absl::Status PullRows(absl::string_view table,
                        absl::Span<const uint64_t> keys, RowBatch* out) const {
    return snapshot_ ? snapshot_->PullRows(table, keys, out)
                     : store_->PullRows(table, keys, out);
  }

  // The version read (when serving) and those `follower` holds now,
  // newest first, into an answer's version and held_versions fields.
  // Nothing when training.
  template <typename Response>
  void SetVersions(const CheckpointFollower* follower, Response* resp) const {
    if (snapshot_ == nullptr || follower == nullptr) return;
    SetVersions(follower, resp->mutable_version(),
                resp->mutable_held_versions());
  }

 private:
  void SetVersions(const CheckpointFollower* follower, v1::Version* version,
                   google::protobuf::RepeatedPtrField<v1::Version>* held) const;

  Store* store_ = nullptr;
  std::shared_ptr<ServingSnapshot> snapshot_;
};

// Rows of `lease` for every read of `req` (each read as DoPull reads one
// table), in request order, each read checked first by
// checks.CheckKeys(map, ...); the reads' keys together at most
// max_batch_keys (RESOURCE_EXHAUSTED). Any failed check or read fails
// the whole request with nothing answered.
absl::Status PullTables(const ReadLease& lease, const RequestChecks& checks,
                        const ClusterMap& map, size_t max_batch_keys,
                        const v1::PullTablesRequest& req,
                        v1::PullTablesResponse* resp);

}  // namespace psdb::rpc::internal

#endif  // PSDB_RPC_SERVER_READ_LEASE_H_
