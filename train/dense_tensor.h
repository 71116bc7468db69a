// DenseTensor: a dense parameter tensor (MLP weights) kept in a psdb table.
// DESIGN.md: a dense tensor of n floats is cut into ceil(n / block_dim)
// blocks keyed by block index 0, 1, ...; the table's dim is the block size
// (min(block_dim, n)), the last block is zero-padded. Pulls and pushes go
// through the same ParameterClient as embeddings, with the table's optimizer
// (Adam for the MLP).
//
// Thread-safety: thread-compatible, except that one Push may run
// concurrently with one Pull (they use separate buffers).
#ifndef PSDB_TRAIN_DENSE_TENSOR_H_
#define PSDB_TRAIN_DENSE_TENSOR_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "psdb/parameter_client.h"
#include "psdb/table_spec.h"

namespace psdb::train {

class DenseTensor {
 public:
  // REQUIRES: size >= 1, block_dim >= 1.
  DenseTensor(std::string table, size_t size, int block_dim);

  const std::string& table() const { return table_; }
  size_t size() const { return size_; }
  int row_dim() const { return row_dim_; }
  size_t blocks() const { return keys_.size(); }

  // The table spec (name and dim filled in) for the given initializer,
  // optimizer and seed.
  TableSpec Spec(const InitializerSpec& init, const optim::OptimizerSpec& opt,
                 uint64_t seed) const;

  // out[0..size) = the tensor. REQUIRES: out.size() == size().
  absl::Status Pull(ParameterClient* client, absl::Span<float> out,
                    bool serving = false);
  // Pushes the gradient of the whole tensor at global step `step`.
  absl::Status Push(ParameterClient* client, absl::Span<const float> grad,
                    int64_t step);

 private:
  std::string table_;
  size_t size_;
  int row_dim_;
  std::vector<uint64_t> keys_;
  // Separate buffers: an asynchronous Push may overlap the next Pull.
  std::vector<float> pull_scratch_;
  std::vector<float> push_scratch_;
};

}  // namespace psdb::train

#endif  // PSDB_TRAIN_DENSE_TENSOR_H_
