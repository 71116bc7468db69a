// CachedEmbeddingSource: embeddings through the worker VocabCache (cache/),
// so hot rows stay on the worker, the next batch's misses are prefetched
// while the current batch computes, and (write-back mode) the cache trains
// its rows with the tables' own optimizers and writes them back on eviction
// and at Flush(). Evaluation lookups read the parameter client directly
// (serving pulls) after a Flush, so they neither create rows nor disturb
// the cache.
//
// Thread-safety: one training thread (ConcurrentUpdate() is false).
#ifndef PSDB_TRAIN_CACHED_EMBEDDING_SOURCE_H_
#define PSDB_TRAIN_CACHED_EMBEDDING_SOURCE_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "psdb/parameter_client.h"
#include "psdb/vocab_cache.h"
#include "train/embedding_source.h"

namespace psdb::train {

class CachedEmbeddingSource final : public EmbeddingSource {
 public:
  // The tables must exist. `client` must outlive the source.
  static absl::StatusOr<std::unique_ptr<CachedEmbeddingSource>> Create(
      ParameterClient* client, const std::vector<std::string>& tables,
      const cache::VocabCacheOptions& options);

  absl::Status Lookup(absl::Span<const EmbeddingRequest> batch,
                      std::vector<std::vector<float>>* rows) override;
  absl::Status Update(absl::Span<const EmbeddingRequest> batch,
                      absl::Span<const absl::Span<const float>> grads,
                      int64_t step) override;
  absl::Status LookupForServing(absl::Span<const EmbeddingRequest> batch,
                                std::vector<std::vector<float>>* rows) override;
  absl::Status Prefetch(absl::Span<const EmbeddingRequest> next) override;
  void Announce(absl::Span<const EmbeddingRequest> future) override;
  absl::Status Flush() override;
  EmbeddingStats Stats() const override;
  std::string Describe() const override;

 private:
  CachedEmbeddingSource(ParameterClient* client,
                        std::vector<std::string> tables,
                        const cache::VocabCacheOptions& options,
                        std::unique_ptr<cache::VocabCache> cache);

  ParameterClient* const client_;
  const std::vector<std::string> tables_;
  const cache::VocabCacheOptions options_;
  std::unique_ptr<cache::VocabCache> cache_;
};

}  // namespace psdb::train

#endif  // PSDB_TRAIN_CACHED_EMBEDDING_SOURCE_H_
