#include "train/dense_tensor.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "util/status_macros.h"

namespace psdb::train {

DenseTensor::DenseTensor(std::string table, size_t size, int block_dim)
    : table_(std::move(table)),
      size_(size),
      row_dim_(static_cast<int>(std::min<size_t>(size, block_dim))) {
  const size_t blocks = (size + row_dim_ - 1) / row_dim_;
  for (size_t i = 0; i < blocks; ++i) keys_.push_back(i);
  pull_scratch_.resize(blocks * row_dim_);
  push_scratch_.resize(blocks * row_dim_);
}

TableSpec DenseTensor::Spec(const InitializerSpec& init,
                            const optim::OptimizerSpec& opt,
                            uint64_t seed) const {
  TableSpec spec;
  spec.name = table_;
  spec.dim = row_dim_;
  spec.initializer = init;
  spec.optimizer = opt;
  spec.seed = seed;
  return spec;
}

absl::Status DenseTensor::Pull(ParameterClient* client, absl::Span<float> out,
                               bool serving) {
  if (out.size() != size_) {
    return absl::InvalidArgumentError(absl::StrCat("dense tensor ", table_,
                                                   ": out has ", out.size(),
                                                   " floats, not ", size_));
  }
  PullOptions options;
  options.serving = serving;
  PSDB_RETURN_IF_ERROR(
      client->Pull(table_, keys_, absl::MakeSpan(pull_scratch_), options));
  std::copy(pull_scratch_.begin(), pull_scratch_.begin() + size_, out.begin());
  return absl::OkStatus();
}

absl::Status DenseTensor::Push(ParameterClient* client,
                               absl::Span<const float> grad, int64_t step) {
  if (grad.size() != size_) {
    return absl::InvalidArgumentError(
        absl::StrCat("dense tensor ", table_, ": gradient has ", grad.size(),
                     " floats, not ", size_));
  }
  std::copy(grad.begin(), grad.end(), push_scratch_.begin());
  std::fill(push_scratch_.begin() + size_, push_scratch_.end(), 0.0f);
  PushOptions options;
  options.step = step;
  return client->Push(table_, keys_, push_scratch_, options);
}

}  // namespace psdb::train
