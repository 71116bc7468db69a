#include "train/cached_embedding_source.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "util/status_macros.h"

namespace psdb::train {
namespace {

std::vector<cache::TableIds> ToTableIds(
    absl::Span<const EmbeddingRequest> batch) {
  std::vector<cache::TableIds> ids;
  ids.reserve(batch.size());
  for (const EmbeddingRequest& r : batch) ids.push_back({r.table, r.ids});
  return ids;
}

}  // namespace

absl::StatusOr<std::unique_ptr<CachedEmbeddingSource>>
CachedEmbeddingSource::Create(ParameterClient* client,
                              const std::vector<std::string>& tables,
                              const cache::VocabCacheOptions& options) {
  PSDB_ASSIGN_OR_RETURN(std::unique_ptr<cache::VocabCache> cache,
                        cache::VocabCache::Create(client, tables, options));
  return std::unique_ptr<CachedEmbeddingSource>(
      new CachedEmbeddingSource(client, tables, options, std::move(cache)));
}

CachedEmbeddingSource::CachedEmbeddingSource(
    ParameterClient* client, std::vector<std::string> tables,
    const cache::VocabCacheOptions& options,
    std::unique_ptr<cache::VocabCache> cache)
    : client_(client),
      tables_(std::move(tables)),
      options_(options),
      cache_(std::move(cache)) {}

absl::Status CachedEmbeddingSource::Lookup(
    absl::Span<const EmbeddingRequest> batch,
    std::vector<std::vector<float>>* rows) {
  return cache_->Lookup(ToTableIds(batch), rows);
}

absl::Status CachedEmbeddingSource::Update(
    absl::Span<const EmbeddingRequest> batch,
    absl::Span<const absl::Span<const float>> grads, int64_t step) {
  // Push-through pushes carry the step (sync servers aggregate by it);
  // write-back counts the tables' steps itself (one per Update), which is
  // the trainer's global step when every step updates every table once.
  return cache_->Update(grads, step);
}

absl::Status CachedEmbeddingSource::LookupForServing(
    absl::Span<const EmbeddingRequest> batch,
    std::vector<std::vector<float>>* rows) {
  rows->resize(batch.size());
  PullOptions options;
  options.serving = true;
  for (size_t i = 0; i < batch.size(); ++i) {
    (*rows)[i].resize(batch[i].ids.size() * batch[i].dim);
    PSDB_RETURN_IF_ERROR(client_->Pull(batch[i].table, batch[i].ids,
                                       absl::MakeSpan((*rows)[i]), options));
  }
  return absl::OkStatus();
}

absl::Status CachedEmbeddingSource::Prefetch(
    absl::Span<const EmbeddingRequest> next) {
  return cache_->Prefetch(ToTableIds(next));
}

void CachedEmbeddingSource::Announce(
    absl::Span<const EmbeddingRequest> future) {
  cache_->Announce(ToTableIds(future));
}

absl::Status CachedEmbeddingSource::Flush() { return cache_->Flush(); }

EmbeddingStats CachedEmbeddingSource::Stats() const {
  EmbeddingStats s;
  s.has_cache = true;
  for (const cache::TableCacheStats& t : cache_->Stats()) {
    s.lookups += t.lookups;
    s.hits += t.hits;
    s.misses += t.misses;
    s.refreshes += t.refreshes;
    s.evictions += t.evictions;
  }
  for (const std::string& table : tables_) {
    const int64_t rows = cache_->CachedRows(table);
    if (rows > 0) s.cached_rows += rows;
  }
  return s;
}

std::string CachedEmbeddingSource::Describe() const {
  return absl::StrCat(
      "VocabCache (",
      options_.mode == cache::CacheMode::kWriteBack ? "write-back"
                                                    : "push-through",
      ", ", cache::PolicyName(options_.policy), ", ", options_.capacity_rows,
      " rows per table", options_.shared_capacity ? " (shared)" : "", ")");
}

}  // namespace psdb::train
