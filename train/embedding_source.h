// EmbeddingSource: where the trainer gets and updates embedding rows. The
// training loop is written against this interface so that the same loop runs
// straight on a ParameterClient (ClientEmbeddingSource, below) or through the
// worker VocabCache (cache/) with prefetch of the next batch.
//
// Keys passed to Lookup/Update are unique within a call (the model
// de-duplicates a batch first).
//
// Thread-safety: implementations are thread-safe.
#ifndef PSDB_TRAIN_EMBEDDING_SOURCE_H_
#define PSDB_TRAIN_EMBEDDING_SOURCE_H_

#include <atomic>
#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "store/parameter_client.h"

namespace psdb::train {

struct EmbeddingStats {
  bool has_cache = false;    // false: no worker cache, hits/misses unused
  uint64_t lookups = 0;      // keys looked up
  uint64_t hits = 0;         // keys served by the worker cache
  uint64_t misses = 0;       // keys fetched from the parameter client
  uint64_t evictions = 0;    // rows evicted from the worker cache
  uint64_t cached_rows = 0;  // rows resident in the worker cache now
};

class EmbeddingSource {
 public:
  virtual ~EmbeddingSource() = default;

  // out[i*dim ..) = the row of keys[i] of `table` (dim floats each).
  // serving = read-only (evaluation): no row is created.
  virtual absl::Status Lookup(absl::string_view table, int dim,
                              absl::Span<const uint64_t> keys,
                              absl::Span<float> out, bool serving) = 0;
  // Applies gradients (grads[i*dim ..) for keys[i]) at global step `step`.
  virtual absl::Status Update(absl::string_view table, int dim,
                              absl::Span<const uint64_t> keys,
                              absl::Span<const float> grads, int64_t step) = 0;
  // Hint: `keys` will be looked up soon (the next batch). May start fetching
  // them in the background. Default: no-op.
  virtual absl::Status Prefetch(absl::string_view table, int dim,
                                absl::Span<const uint64_t> keys) {
    return absl::OkStatus();
  }
  // Makes every update visible in the parameter client (write-back caches
  // write their dirty rows). Called before checkpoints and at the end.
  virtual absl::Status Flush() { return absl::OkStatus(); }
  virtual EmbeddingStats Stats() const = 0;
  // One line for logs, e.g. "direct (no worker cache)".
  virtual std::string Describe() const = 0;
};

// Straight on the client: Lookup = Pull, Update = Push.
class ClientEmbeddingSource final : public EmbeddingSource {
 public:
  // `client` must outlive this object.
  explicit ClientEmbeddingSource(ParameterClient* client) : client_(client) {}

  absl::Status Lookup(absl::string_view table, int dim,
                      absl::Span<const uint64_t> keys, absl::Span<float> out,
                      bool serving) override;
  absl::Status Update(absl::string_view table, int dim,
                      absl::Span<const uint64_t> keys,
                      absl::Span<const float> grads, int64_t step) override;
  EmbeddingStats Stats() const override;
  std::string Describe() const override;

 private:
  ParameterClient* const client_;
  std::atomic<uint64_t> lookups_{0};
};

}  // namespace psdb::train

#endif  // PSDB_TRAIN_EMBEDDING_SOURCE_H_
