// EmbeddingSource: where the trainer gets and updates embedding rows. The
// training loop is written against this interface so that the same loop runs
// straight on a ParameterClient (ClientEmbeddingSource, below) or through the
// worker VocabCache (CachedEmbeddingSource, train/cached_embedding_source.h)
// with prefetch of the next batch.
//
// The calls are batch-level, one request per table, like the cache's:
// Lookup(batch) then Update(grads of that batch). Ids are unique within a
// request (the model de-duplicates a batch first).
//
// Thread-safety: one training thread drives a source. Update may run on
// another thread than Lookup only if ConcurrentUpdate() is true.
#ifndef PSDB_TRAIN_EMBEDDING_SOURCE_H_
#define PSDB_TRAIN_EMBEDDING_SOURCE_H_

#include <atomic>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "psdb/parameter_client.h"

namespace psdb::train {

struct EmbeddingStats {
  bool has_cache = false;    // false: no worker cache, hits/misses unused
  uint64_t lookups = 0;      // ids looked up
  uint64_t hits = 0;         // ids served by the worker cache
  uint64_t misses = 0;       // rows fetched from the parameter client
  uint64_t refreshes = 0;    // stale rows fetched again (push-through)
  uint64_t evictions = 0;    // rows evicted from the worker cache
  uint64_t cached_rows = 0;  // rows resident in the worker cache now
};

// The ids of one table in a batch; the span need only live for the call.
struct EmbeddingRequest {
  std::string table;
  int dim = 0;
  absl::Span<const uint64_t> ids;
};

class EmbeddingSource {
 public:
  virtual ~EmbeddingSource() = default;

  // (*rows)[i] receives batch[i].ids.size() * batch[i].dim floats.
  virtual absl::Status Lookup(absl::Span<const EmbeddingRequest> batch,
                              std::vector<std::vector<float>>* rows) = 0;
  // Gradients of the batch of the last Lookup: grads[i] has
  // batch[i].ids.size() * dim floats. `step` is the global step (>= 1).
  virtual absl::Status Update(absl::Span<const EmbeddingRequest> batch,
                              absl::Span<const absl::Span<const float>> grads,
                              int64_t step) = 0;
  // Read-only rows for evaluation: creates nothing, trains nothing.
  virtual absl::Status LookupForServing(
      absl::Span<const EmbeddingRequest> batch,
      std::vector<std::vector<float>>* rows) = 0;
  // Hints: `next` will be looked up after the current batch (may start
  // fetching it in the background), `future` some time later, in order
  // (for a lookahead policy). Default: no-ops.
  virtual absl::Status Prefetch(absl::Span<const EmbeddingRequest> next) {
    return absl::OkStatus();
  }
  virtual void Announce(absl::Span<const EmbeddingRequest> future) {}
  // Makes every update visible in the parameter client (write-back caches
  // write their rows). Called before checkpoints and evaluations.
  virtual absl::Status Flush() { return absl::OkStatus(); }
  // Whether Update may run on a background thread concurrently with the
  // next Lookup (asynchronous mode).
  virtual bool ConcurrentUpdate() const { return false; }
  virtual EmbeddingStats Stats() const = 0;
  // One line for logs, e.g. "direct on the parameter client".
  virtual std::string Describe() const = 0;
};

// Straight on the client: Lookup = Pull, Update = Push.
class ClientEmbeddingSource final : public EmbeddingSource {
 public:
  // `client` must outlive this object.
  explicit ClientEmbeddingSource(ParameterClient* client) : client_(client) {}

  absl::Status Lookup(absl::Span<const EmbeddingRequest> batch,
                      std::vector<std::vector<float>>* rows) override;
  absl::Status Update(absl::Span<const EmbeddingRequest> batch,
                      absl::Span<const absl::Span<const float>> grads,
                      int64_t step) override;
  absl::Status LookupForServing(absl::Span<const EmbeddingRequest> batch,
                                std::vector<std::vector<float>>* rows) override;
  bool ConcurrentUpdate() const override { return true; }
  EmbeddingStats Stats() const override;
  std::string Describe() const override;

 private:
  absl::Status Pull(absl::Span<const EmbeddingRequest> batch,
                    std::vector<std::vector<float>>* rows, bool serving);

  ParameterClient* const client_;
  std::atomic<uint64_t> lookups_{0};
};

}  // namespace psdb::train

#endif  // PSDB_TRAIN_EMBEDDING_SOURCE_H_
