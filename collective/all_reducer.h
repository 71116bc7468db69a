// AllReducer: the dense-reduction interface the trainer uses for dense
// weights replicated on every worker (ps-train --dense=allreduce): each
// worker hands in its gradient, every worker gets back the element-wise
// sum over all workers, identical bit for bit on every rank. It is an
// interface target of its own (psdb_collective_interface, like
// psdb/parameter_client.h) so train/ uses it without depending on gloo or
// NCCL; the implementations (gloo on CPU, NCCL on GPU) live in
// psdb_collective (collective/gloo_all_reducer.h, nccl_all_reducer.h) and
// are injected by tools/train.
//
// Thread-safety: implementations are thread-compatible: one caller at a
// time, and every rank makes the same calls in the same order (a
// collective).
#ifndef PSDB_COLLECTIVE_ALL_REDUCER_H_
#define PSDB_COLLECTIVE_ALL_REDUCER_H_

#include <string>

#include "absl/status/status.h"
#include "absl/types/span.h"

namespace psdb::collective {

class AllReducer {
 public:
  virtual ~AllReducer() = default;

  // This worker's rank in the group, 0..world()-1.
  virtual int rank() const = 0;
  virtual int world() const = 0;
  // data <- the sum of every rank's `data` (same length on every rank).
  // Every rank gets the same bits. An error (a peer gone, a timeout) leaves
  // `data` unspecified and the group unusable.
  virtual absl::Status AllReduceSum(absl::Span<float> data) = 0;
  // "gloo (tcp, 2 ranks)", for logs and summaries.
  virtual std::string Describe() const = 0;
};

}  // namespace psdb::collective

#endif  // PSDB_COLLECTIVE_ALL_REDUCER_H_
