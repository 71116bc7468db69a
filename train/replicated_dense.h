// ReplicatedDense: the model's dense tensors (the MLP and the wide linear
// part: every DenseTensor) held on every worker and trained by AllReduce
// (ps-train --dense=allreduce, the parameter-server + AllReduce hybrid of
// MindSpore's GPU training, seed 003): sparse embeddings still go through
// psdb, dense gradients never do.
//
// Per step every worker hands in its gradients; they are summed across
// workers by the AllReducer (collective/all_reducer.h) in one call, divided
// by the number of workers, and each block row gets the table's own
// optimizer kernel (optim::Apply, the same Adam/FTRL the servers run) at
// the trainer's global step. That is exactly what a sync ps-server does
// with the same pushes (rpc/server/sync_aggregator.h: the mean of the
// workers' gradients, then one Apply per row at the step), so a run with
// --dense=allreduce ends with the dense weights of --dense=ps (bit for bit
// with 2 workers, where the sum has one order).
//
// Rows start from the store: Load() does PullRows on every block (get-or-
// create: the deterministic initializer on a fresh store, a restored
// checkpoint's values and optimizer state otherwise), before any worker
// has trained, so every replica starts equal. Publish() writes every row
// back with PutRows (rank 0 does, at each checkpoint and at the end), so
// checkpoints, ps-dump and serving see one model. Row headers count the
// local applies (update_count, last_update_step).
//
// Non-finite reduced gradients follow the table's NonFinitePolicy: reject
// (the step fails, nothing applied) or skip the row.
//
// Thread-safety: thread-compatible; every rank must call Apply for the same
// steps in the same order (it is a collective).
#ifndef PSDB_TRAIN_REPLICATED_DENSE_H_
#define PSDB_TRAIN_REPLICATED_DENSE_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "collective/all_reducer.h"
#include "psdb/parameter_client.h"
#include "psdb/row.h"
#include "psdb/table_spec.h"
#include "train/dense_tensor.h"

namespace psdb::train {

class ReplicatedDense {
 public:
  // One tensor per entry: its layout and its table's spec (name and dim
  // must match). Loads every row from `client`. `client` and `reducer`
  // must outlive the object.
  static absl::StatusOr<std::unique_ptr<ReplicatedDense>> Load(
      const std::vector<const DenseTensor*>& tensors,
      const std::vector<TableSpec>& specs, ParameterClient* client,
      collective::AllReducer* reducer);

  size_t tensors() const { return parts_.size(); }
  // Tensor t's current values (size() floats).
  absl::Span<const float> values(size_t t) const;
  // One training step: grads[t] is tensor t's gradient (its size() floats)
  // at global step `step` (>= 1).
  absl::Status Apply(const std::vector<absl::Span<const float>>& grads,
                     int64_t step);
  // PutRows of every tensor's rows (values, optimizer state, headers).
  absl::Status Publish();
  // XXH3-64 of every tensor's values: equal on every rank after every step.
  uint64_t Fingerprint() const;
  const collective::AllReducer& reducer() const { return *reducer_; }

 private:
  struct Part {
    TableSpec spec;
    size_t size = 0;             // floats of the tensor
    std::vector<uint64_t> keys;  // block indices
    RowBatch rows;               // blocks * dim values (zero-padded)
    size_t offset = 0;           // into grads_
  };
  ReplicatedDense(ParameterClient* client, collective::AllReducer* reducer)
      : client_(client), reducer_(reducer) {}

  ParameterClient* const client_;
  collective::AllReducer* const reducer_;
  std::vector<Part> parts_;
  std::vector<float> grads_;  // every tensor's padded gradient, one buffer
};

}  // namespace psdb::train

#endif  // PSDB_TRAIN_REPLICATED_DENSE_H_
