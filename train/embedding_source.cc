#include "train/embedding_source.h"

#include "absl/strings/str_cat.h"
#include "util/status_macros.h"

namespace psdb::train {

absl::Status ClientEmbeddingSource::Pull(
    absl::Span<const EmbeddingRequest> batch,
    std::vector<std::vector<float>>* rows, bool serving) {
  rows->resize(batch.size());
  PullOptions options;
  options.serving = serving;
  for (size_t i = 0; i < batch.size(); ++i) {
    const EmbeddingRequest& r = batch[i];
    (*rows)[i].resize(r.ids.size() * r.dim);
    PSDB_RETURN_IF_ERROR(
        client_->Pull(r.table, r.ids, absl::MakeSpan((*rows)[i]), options));
    if (!serving) lookups_.fetch_add(r.ids.size(), std::memory_order_relaxed);
  }
  return absl::OkStatus();
}

absl::Status ClientEmbeddingSource::Lookup(
    absl::Span<const EmbeddingRequest> batch,
    std::vector<std::vector<float>>* rows) {
  return Pull(batch, rows, /*serving=*/false);
}

absl::Status ClientEmbeddingSource::LookupForServing(
    absl::Span<const EmbeddingRequest> batch,
    std::vector<std::vector<float>>* rows) {
  return Pull(batch, rows, /*serving=*/true);
}

absl::Status ClientEmbeddingSource::Update(
    absl::Span<const EmbeddingRequest> batch,
    absl::Span<const absl::Span<const float>> grads, int64_t step) {
  if (grads.size() != batch.size()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "update: ", grads.size(), " gradients for ", batch.size(), " tables"));
  }
  PushOptions options;
  options.step = step;
  for (size_t i = 0; i < batch.size(); ++i) {
    PSDB_RETURN_IF_ERROR(
        client_->Push(batch[i].table, batch[i].ids, grads[i], options));
  }
  return absl::OkStatus();
}

EmbeddingStats ClientEmbeddingSource::Stats() const {
  EmbeddingStats s;
  s.lookups = lookups_.load(std::memory_order_relaxed);
  s.misses = s.lookups;
  return s;
}

std::string ClientEmbeddingSource::Describe() const {
  return "direct on the parameter client (no worker cache)";
}

}  // namespace psdb::train
