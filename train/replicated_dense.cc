#include "train/replicated_dense.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "absl/strings/str_cat.h"
#include "optim/optimizer.h"
#include "util/hash.h"
#include "util/status_macros.h"

namespace psdb::train {

absl::StatusOr<std::unique_ptr<ReplicatedDense>> ReplicatedDense::Load(
    const std::vector<const DenseTensor*>& tensors,
    const std::vector<TableSpec>& specs, ParameterClient* client,
    collective::AllReducer* reducer) {
  if (tensors.size() != specs.size() || client == nullptr ||
      reducer == nullptr) {
    return absl::InvalidArgumentError(
        "replicated dense: one spec per tensor, a client and a reducer");
  }
  std::unique_ptr<ReplicatedDense> dense(new ReplicatedDense(client, reducer));
  size_t offset = 0;
  for (size_t t = 0; t < tensors.size(); ++t) {
    const DenseTensor& tensor = *tensors[t];
    if (specs[t].name != tensor.table() || specs[t].dim != tensor.row_dim()) {
      return absl::InvalidArgumentError(
          absl::StrCat("replicated dense: spec of table ", specs[t].name,
                       " (dim ", specs[t].dim, ") does not describe tensor ",
                       tensor.table(), " (dim ", tensor.row_dim(), ")"));
    }
    Part part;
    part.spec = specs[t];
    part.size = tensor.size();
    for (size_t b = 0; b < tensor.blocks(); ++b) part.keys.push_back(b);
    PSDB_RETURN_IF_ERROR(
        client->PullRows(part.spec.name, part.keys, &part.rows));
    const int state_size = optim::StateSize(part.spec.optimizer, part.spec.dim);
    if (part.rows.size() != part.keys.size() ||
        part.rows.dim != part.spec.dim || part.rows.state_size != state_size) {
      return absl::InternalError(absl::StrCat(
          "replicated dense: PullRows of ", part.spec.name, " returned ",
          part.rows.size(), " rows of dim ", part.rows.dim, " and state ",
          part.rows.state_size, "; expected ", part.keys.size(), ", ",
          part.spec.dim, ", ", state_size));
    }
    part.offset = offset;
    offset += part.keys.size() * part.spec.dim;
    dense->parts_.push_back(std::move(part));
  }
  dense->grads_.resize(offset);
  return dense;
}

absl::Span<const float> ReplicatedDense::values(size_t t) const {
  return absl::MakeConstSpan(parts_[t].rows.values.data(), parts_[t].size);
}

absl::Status ReplicatedDense::Apply(
    const std::vector<absl::Span<const float>>& grads, int64_t step) {
  if (grads.size() != parts_.size() || step < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("replicated dense: ", grads.size(), " gradients for ",
                     parts_.size(), " tensors at step ", step));
  }
  std::fill(grads_.begin(), grads_.end(), 0.0f);
  for (size_t t = 0; t < parts_.size(); ++t) {
    if (grads[t].size() != parts_[t].size) {
      return absl::InvalidArgumentError(absl::StrCat(
          "replicated dense: gradient of ", parts_[t].spec.name, " has ",
          grads[t].size(), " floats, not ", parts_[t].size));
    }
    std::copy(grads[t].begin(), grads[t].end(),
              grads_.begin() + parts_[t].offset);
  }
  PSDB_RETURN_IF_ERROR(reducer_->AllReduceSum(absl::MakeSpan(grads_)));
  // The mean, as SyncAggregator's kMean: the sum divided by the workers.
  const float n = static_cast<float>(reducer_->world());
  for (float& g : grads_) g /= n;

  // Validate everything before changing anything.
  std::vector<std::vector<bool>> skip(parts_.size());
  for (size_t t = 0; t < parts_.size(); ++t) {
    const Part& p = parts_[t];
    const size_t d = p.spec.dim;
    skip[t].assign(p.keys.size(), false);
    for (size_t r = 0; r < p.keys.size(); ++r) {
      const float* g = grads_.data() + p.offset + r * d;
      bool finite = true;
      for (size_t j = 0; j < d; ++j) finite &= std::isfinite(g[j]);
      if (finite) continue;
      if (p.spec.non_finite == NonFinitePolicy::kReject) {
        return absl::InvalidArgumentError(absl::StrCat(
            "table ", p.spec.name, ": non-finite reduced gradient for block ",
            p.keys[r], " at step ", step, " (nothing applied)"));
      }
      skip[t][r] = true;
    }
  }
  for (size_t t = 0; t < parts_.size(); ++t) {
    Part& p = parts_[t];
    const size_t d = p.spec.dim;
    const size_t ss = p.rows.state_size;
    for (size_t r = 0; r < p.keys.size(); ++r) {
      if (skip[t][r]) continue;
      optim::Apply(
          p.spec.optimizer, absl::MakeSpan(p.rows.values.data() + r * d, d),
          absl::MakeSpan(p.rows.state.data() + r * ss, ss),
          absl::MakeConstSpan(grads_.data() + p.offset + r * d, d), step);
      RowHeader& h = p.rows.headers[r];
      h.last_update_step = std::max(h.last_update_step, step);
      ++h.update_count;
      ++h.frequency;
    }
  }
  return absl::OkStatus();
}

absl::Status ReplicatedDense::Publish() {
  for (const Part& p : parts_) {
    PSDB_RETURN_IF_ERROR(client_->PutRows(p.spec.name, p.keys, p.rows));
  }
  return absl::OkStatus();
}

uint64_t ReplicatedDense::Fingerprint() const {
  uint64_t h = 0;
  for (const Part& p : parts_) {
    h = Hash64(
        absl::string_view(reinterpret_cast<const char*>(p.rows.values.data()),
                          p.size * sizeof(float)),
        h);
  }
  return h;
}

}  // namespace psdb::train
