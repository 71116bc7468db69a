#include "train/embedding_source.h"

namespace psdb::train {

absl::Status ClientEmbeddingSource::Lookup(absl::string_view table, int dim,
                                           absl::Span<const uint64_t> keys,
                                           absl::Span<float> out,
                                           bool serving) {
  lookups_.fetch_add(keys.size(), std::memory_order_relaxed);
  PullOptions options;
  options.serving = serving;
  return client_->Pull(table, keys, out, options);
}

absl::Status ClientEmbeddingSource::Update(absl::string_view table, int dim,
                                           absl::Span<const uint64_t> keys,
                                           absl::Span<const float> grads,
                                           int64_t step) {
  PushOptions options;
  options.step = step;
  return client_->Push(table, keys, grads, options);
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
