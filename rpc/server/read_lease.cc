#include "rpc/server/read_lease.h"

#include "absl/strings/str_cat.h"
#include "util/status_macros.h"

namespace psdb::rpc::internal {

absl::StatusOr<ReadLease> ReadLease::Acquire(Store* store,
                                             const CheckpointFollower* follower,
                                             absl::string_view version) {
  if (follower == nullptr) {
    if (!version.empty()) {
      return absl::FailedPreconditionError(absl::StrCat(
          "version ", version,
          " asked of a training server, which has no checkpoint versions "
          "(versions are read from serving replicas, ps-server "
          "--serve_from)"));
    }
    return ReadLease(store);
  }
  if (version.empty()) return ReadLease(follower->Acquire());
  PSDB_ASSIGN_OR_RETURN(std::shared_ptr<ServingSnapshot> snapshot,
                        follower->Acquire(version));
  return ReadLease(std::move(snapshot));
}

void ReadLease::SetVersions(
    const CheckpointFollower* follower, v1::Version* version,
    google::protobuf::RepeatedPtrField<v1::Version>* held) const {
  version->set_checkpoint_id(snapshot_->checkpoint_id);
  version->set_step(snapshot_->step);
  version->set_seq(snapshot_->seq);
  for (const ServedVersion& v : follower->HeldVersions()) {
    v1::Version* out = held->Add();
    out->set_checkpoint_id(v.checkpoint_id);
    out->set_step(v.step);
    out->set_seq(v.seq);
  }
}

absl::Status PullTables(const ReadLease& lease, const RequestChecks& checks,
                        const ClusterMap& map, size_t max_batch_keys,
                        const v1::PullTablesRequest& req,
                        v1::PullTablesResponse* resp) {
  size_t total = 0;
  for (const v1::TableRead& read : req.reads()) total += read.keys_size();
  if (total > max_batch_keys) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "PullTables of ", req.reads_size(), " tables has ", total,
        " keys, more than the server's limit of ", max_batch_keys));
  }
  // Every read checked before any is answered: a failing one answers
  // nothing.
  std::vector<TableSpec> specs;
  specs.reserve(req.reads_size());
  for (const v1::TableRead& read : req.reads()) {
    const absl::Span<const uint64_t> keys(read.keys().data(), read.keys_size());
    PSDB_RETURN_IF_ERROR(checks.CheckKeys(
        map, lease.snapshot(), req.cluster_epoch(), read.table(), keys));
    PSDB_ASSIGN_OR_RETURN(TableSpec spec, lease.GetTable(read.table()));
    specs.push_back(std::move(spec));
  }
  PullOptions options;
  options.serving = req.serving();
  for (int i = 0; i < req.reads_size(); ++i) {
    const v1::TableRead& read = req.reads(i);
    const int dim = specs[i].dim;
    const size_t floats = static_cast<size_t>(read.keys_size()) * dim;
    v1::TableValues* table = resp->add_tables();
    table->set_dim(dim);
    std::string* values = table->mutable_values();
    values->resize(floats * sizeof(float));
    PSDB_RETURN_IF_ERROR(lease.Pull(
        read.table(),
        absl::Span<const uint64_t>(read.keys().data(), read.keys_size()),
        absl::MakeSpan(reinterpret_cast<float*>(values->data()), floats),
        options));
  }
  return absl::OkStatus();
}

}  // namespace psdb::rpc::internal
