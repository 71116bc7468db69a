#include "tools/train/cluster_worker.h"

#include <unistd.h>

#include <cstdlib>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "rpc/cluster_checkpoint.h"
#include "rpc/remote_client.h"
#include "util/status_macros.h"

namespace psdb::train {
namespace {

// Forwards to a RemoteClient, stamping every push with this worker's id.
class WorkerIdClient final : public ParameterClient {
 public:
  WorkerIdClient(std::unique_ptr<ParameterClient> inner, int32_t worker_id)
      : inner_(std::move(inner)), worker_id_(worker_id) {}

  absl::Status CreateTable(const TableSpec& spec) override {
    return inner_->CreateTable(spec);
  }
  absl::Status DropTable(absl::string_view name) override {
    return inner_->DropTable(name);
  }
  absl::StatusOr<std::vector<TableSpec>> ListTables() override {
    return inner_->ListTables();
  }
  absl::StatusOr<TableSpec> GetTable(absl::string_view name) override {
    return inner_->GetTable(name);
  }
  absl::Status Pull(absl::string_view table, absl::Span<const uint64_t> keys,
                    absl::Span<float> out,
                    const PullOptions& options) override {
    return inner_->Pull(table, keys, out, options);
  }
  absl::Status Push(absl::string_view table, absl::Span<const uint64_t> keys,
                    absl::Span<const float> grads,
                    const PushOptions& options) override {
    PushOptions o = options;
    o.worker_id = worker_id_;
    return inner_->Push(table, keys, grads, o);
  }
  absl::Status PullRows(absl::string_view table,
                        absl::Span<const uint64_t> keys,
                        RowBatch* out) override {
    return inner_->PullRows(table, keys, out);
  }
  absl::Status PutRows(absl::string_view table, absl::Span<const uint64_t> keys,
                       const RowBatch& rows) override {
    return inner_->PutRows(table, keys, rows);
  }
  absl::StatusOr<CheckpointInfo> Checkpoint(
      absl::string_view root_dir, const CheckpointOptions& options) override {
    return inner_->Checkpoint(root_dir, options);
  }
  absl::StatusOr<StoreStats> Stats() override { return inner_->Stats(); }

 private:
  const std::unique_ptr<ParameterClient> inner_;
  const int32_t worker_id_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<ClusterWorker>> ClusterWorker::Join(
    const ClusterWorkerOptions& options) {
  if (options.scheduler.empty()) {
    return absl::InvalidArgumentError("scheduler:HOST:PORT names no scheduler");
  }
  std::unique_ptr<ClusterWorker> w(new ClusterWorker());
  w->options_ = options;
  rpc::SchedulerClientOptions so;
  so.address = options.scheduler;
  so.call_timeout = options.wait_ready;
  PSDB_ASSIGN_OR_RETURN(w->sched_, rpc::SchedulerClient::Open(so));
  v1::RegisterRequest req;
  const char* id = std::getenv("PS_NODE_ID");
  req.set_node_id(id != nullptr && *id != '\0'
                      ? std::string(id)
                      : absl::StrCat("ps-train-", getpid()));
  req.set_role(v1::NODE_ROLE_WORKER);
  PSDB_ASSIGN_OR_RETURN(v1::RegisterResponse reg, w->sched_->Register(req));
  w->rank_ = reg.rank();
  w->sched_->StartHeartbeats();
  PSDB_ASSIGN_OR_RETURN(v1::ClusterMap map,
                        w->sched_->GetClusterMap(options.wait_ready));
  w->world_ = map.worker_num();
  if (w->world_ < 1 || w->rank_ < 0 || w->rank_ >= w->world_) {
    return absl::FailedPreconditionError(absl::StrCat("worker rank ", w->rank_,
                                                      " outside the cluster's ",
                                                      w->world_, " workers"));
  }
  rpc::RemoteClientOptions ro;
  ro.push_to_every_server = options.sync;
  PSDB_ASSIGN_OR_RETURN(std::unique_ptr<rpc::RemoteClient> remote,
                        rpc::OpenSchedulerRemoteClient(options.scheduler, ro,
                                                       options.wait_ready));
  w->client_ = std::make_unique<WorkerIdClient>(std::move(remote), w->rank_);
  return w;
}

ClusterWorker::~ClusterWorker() {
  client_.reset();
  if (sched_ != nullptr) sched_->StopHeartbeats();
}

absl::Status ClusterWorker::AfterStep(int64_t step) {
  int staleness = options_.sync ? 0 : options_.staleness;
  if (staleness < 0) return absl::OkStatus();
  return sched_->StepClock(step, staleness, options_.step_timeout).status();
}

absl::StatusOr<std::string> ClusterWorker::Checkpoint(absl::string_view root,
                                                      int64_t step) {
  // Every rank's pushes and cache write-backs are in before rank 0 asks
  // the servers for their shards.
  PSDB_RETURN_IF_ERROR(sched_->Barrier(absl::StrCat("checkpoint-", step),
                                       options_.step_timeout));
  if (rank_ != 0) return std::string();
  PSDB_ASSIGN_OR_RETURN(v1::ClusterMap map, sched_->GetClusterMap());
  PSDB_ASSIGN_OR_RETURN(rpc::ClusterCheckpointInfo info,
                        rpc::WriteClusterCheckpoint(map, root, step));
  return info.path;
}

}  // namespace psdb::train
