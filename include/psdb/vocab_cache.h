// VocabCache: the worker-side cache of embedding rows in front of any
// ParameterClient (a LocalClient, a RemoteClient, ...).
//
//   VocabCacheOptions options;
//   options.capacity_rows = 1 << 20;
//   options.policy = PolicyKind::kLookahead;
//   PSDB_ASSIGN_OR_RETURN(auto cache,
//                         VocabCache::Create(client, {"user", "item"},
//                         options));
//   for (t = 0; ...) {
//     cache->Announce(batch[t + K]);          // lookahead: the loader's window
//     PSDB_RETURN_IF_ERROR(cache->Lookup(batch[t], &rows));
//     PSDB_RETURN_IF_ERROR(cache->Prefetch(batch[t + 1]));  // background
//     ... forward / backward ...
//     PSDB_RETURN_IF_ERROR(cache->Update(grads));
//   }
//   PSDB_RETURN_IF_ERROR(cache->Flush());
//
// Pools: rows live in pools of `capacity_rows` slots, one per table, or with
// `shared_capacity` one per dimension shared by all tables of that
// dimension. Each pool is a SlotMap (index, pins, policy) and a backend.
//
// Per batch (Lookup): ids are de-duplicated per table (unique + inverse),
// resident rows are pinned, the misses of each table are fetched with one
// PullRows, unpinned victims are evicted (write-back: written with one
// PutRows per table), and the rows are gathered per position. A batch whose
// unique rows in a pool outnumber the pool's capacity (less the rows pinned
// by a prefetch, which are released first if that is what it takes) is an
// error: ResourceExhausted naming the table, the count and the capacity.
// The cache does not split batches, because a split batch would not be one
// optimizer step and would break exactness.
//
// Modes:
//  - kWriteBack: Update applies the table's optimizer to the cached rows
//    (optim/kernels.h, the store's own math, with the table's step counted
//    by the cache from the store's step on Create), keeps their optimizer
//    state and row headers, and writes whole rows back with PutRows on
//    eviction and on Flush(). A write-back run followed by Flush() leaves
//    every row of the store bit-identical (values, optimizer state and
//    header) to the same run of Pull + Push without a cache, for any
//    capacity, provided this cache is the table's only writer: with several
//    workers, each cache would train its own copy of a row and write the
//    whole row back over the others' updates (use push-through). The store's
//    table step is not advanced (the ParameterClient has no call for it; an
//    empty Push is rejected): a trainer that goes on pushing to the table
//    directly after a write-back run passes PushOptions::step explicitly.
//    A new cache starts counting from the store's table step.
//    Tables with an admission threshold > 1 are refused (FailedPrecondition):
//    the store would not apply the pushes of unadmitted keys, the cache
//    cannot know which those are, so it could not be exact.
//  - kPushThrough: Update pushes the gradients to the store every step (at
//    the caller's step, so synchronous servers can aggregate the round);
//    cached values are refetched when more than `max_staleness` of this
//    cache's pushes to the table have happened since they were fetched
//    (0 = always fresh: a row pushed since its fetch is fetched again).
//
// Prefetch(next) assigns slots for next's misses at once (pinning next's
// rows so they are not evicted) and fetches them on a background thread
// while the current batch computes. Lookup and Flush wait for it. The
// prefetched rows stay pinned until the Lookup of the same batch (same
// tables and ids) or the next Prefetch. A row missing at batch t and
// brought in by the prefetch of t+1 is one cached row: batch t's update is
// applied to it (write-back), or makes it stale (push-through), never lost.
//
// Stats per table (TableCacheStats): lookups count ids (positions); a
// position misses if its row was not resident when its batch was looked up
// and it is the row's first position in the batch (the fetched row serves
// the duplicates), it refreshes if its row was resident but stale
// (push-through) and it is the row's first position, otherwise it hits:
// lookups = hits + misses + refreshes. Prefetched rows count as resident
// (and, under push-through, are stale once a push has passed their fetch).
// misses are rows Lookup fetched, refreshes stale rows it re-fetched,
// prefetched the rows Prefetch fetched.
//
// Thread-safety: the public methods are meant for one training thread (they
// may be called from different threads but not at the same time); the
// prefetch thread is internal and synchronized.
#ifndef PSDB_VOCAB_CACHE_H_
#define PSDB_VOCAB_CACHE_H_

#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/types/span.h"
#include "psdb/parameter_client.h"

namespace psdb {
class KeyDedup;
}  // namespace psdb

namespace psdb::cache {

// Which rows a full pool evicts.
enum class PolicyKind : int {
  kLru = 0,
  kLfu = 1,
  // Belady within the batches announced so far (VocabCache::Announce).
  kLookahead = 2,
};

// "lru", "lfu", "lookahead".
absl::string_view PolicyName(PolicyKind kind);

// Where a pool's rows live.
enum class BackendKind : int {
  kCpu = 0,   // host memory
  kCuda = 1,  // device memory (builds with CUDA; Create fails without a device)
};

enum class CacheMode : int {
  kWriteBack = 0,
  kPushThrough = 1,
};

struct VocabCacheOptions {
  // Default: kWriteBack
  CacheMode mode = CacheMode::kWriteBack;
  // Default: kLru
  PolicyKind policy = PolicyKind::kLru;
  // Rows per pool (>= 1). REQUIRED.
  int64_t capacity_rows = 0;
  // One pool per dimension shared by the tables of that dimension, instead
  // of one pool per table. Default: false
  bool shared_capacity = false;
  // Push-through: pushes a cached value may lag behind. Default: 0
  int64_t max_staleness = 0;
  // Default: kCpu
  BackendKind backend = BackendKind::kCpu;
};

struct TableCacheStats {
  std::string table;
  uint64_t lookups = 0;      // ids looked up (with duplicates)
  uint64_t unique_ids = 0;   // de-duplicated per batch
  uint64_t hits = 0;         // looked-up ids served by a resident row
  uint64_t misses = 0;       // rows fetched by Lookup
  uint64_t refreshes = 0;    // stale rows re-fetched (push-through)
  uint64_t prefetched = 0;   // rows fetched by Prefetch
  uint64_t evictions = 0;    // rows evicted
  uint64_t write_backs = 0;  // rows written with PutRows (evictions, Flush)
  uint64_t bytes_moved = 0;  // row bytes fetched from and sent to the client
  double hit_rate() const {
    return lookups == 0 ? 0.0 : static_cast<double>(hits) / lookups;
  }
};

// The ids of one table in a batch. The spans need only live for the call.
struct TableIds {
  absl::string_view table;
  absl::Span<const uint64_t> ids;
};

class VocabCache {
 public:
  // `client` must outlive the cache. Every table must exist; with
  // shared_capacity tables of one dimension share a pool.
  static absl::StatusOr<std::unique_ptr<VocabCache>> Create(
      ParameterClient* client, const std::vector<std::string>& tables,
      const VocabCacheOptions& options);
  // Waits for a running prefetch. Does not flush: call Flush() first.
  ~VocabCache();
  VocabCache(const VocabCache&) = delete;
  VocabCache& operator=(const VocabCache&) = delete;

  // Tells the lookahead policy about a future batch; batches must be
  // announced in the order they will be looked up, starting with the next
  // one not yet announced. No-op for LRU and LFU.
  void Announce(absl::Span<const TableIds> batch);

  // Looks up a batch (each table at most once). (*rows)[i] receives
  // batch[i].ids.size() * dim floats. The batch's rows stay pinned until
  // Update or Release; a previous batch still pinned is released first.
  absl::Status Lookup(absl::Span<const TableIds> batch,
                      std::vector<std::vector<float>>* rows);
  // Applies the looked-up batch's gradients: grads[i] holds
  // batch[i].ids.size() * dim floats. Then releases the batch.
  // Push-through: the pushes carry `step` (PushOptions::step; 0 = the
  // table's step + 1), which servers aggregating synchronous rounds need.
  // Write-back counts the steps itself and ignores it.
  // REQUIRES: a Lookup since the last Update / Release.
  absl::Status Update(absl::Span<const absl::Span<const float>> grads,
                      int64_t step = 0);
  // Releases the looked-up batch without an update (evaluation).
  void Release();

  // Starts fetching `next`'s misses in the background (see above).
  absl::Status Prefetch(absl::Span<const TableIds> next);

  // Write-back: writes every cached row back (rows stay cached) and
  // advances the store's table steps. Push-through: waits for a prefetch.
  absl::Status Flush();

  std::vector<TableCacheStats> Stats() const;
  // Rows cached in the pool of `table` (-1 for an unknown table).
  int64_t CachedRows(absl::string_view table) const;

 private:
  struct Table;
  struct Pool;
  struct PendingBatch;
  struct Fetch;

  VocabCache(ParameterClient* client, const VocabCacheOptions& options);

  absl::StatusOr<int> TableIndex(absl::string_view name) const;
  absl::Status Prepare(absl::Span<const TableIds> batch, PendingBatch* out);
  uint64_t Fingerprint(const PendingBatch& batch) const;
  // Pins resident rows and reserves slots for misses (all of them, or
  // with `partial` as many as fit). Collects the victims to write back.
  absl::Status Assign(PendingBatch* batch, bool count_access, bool partial,
                      Fetch* fetch) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Writes victims back and fetches rows; then installs them.
  absl::Status RunFetch(Fetch* fetch);
  void UnpinBatch(const PendingBatch& batch) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void ReleasePrefetchPins() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status WaitForPrefetch();

  ParameterClient* const client_;
  const VocabCacheOptions options_;
  std::vector<std::unique_ptr<Table>> tables_;
  std::vector<std::unique_ptr<Pool>> pools_;
  std::unique_ptr<KeyDedup> dedup_;  // Prepare's scratch (caller's thread)

  mutable absl::Mutex mu_;
  int64_t next_seq_ = 0;   // sequence number of the next Lookup
  int64_t announced_ = 0;  // sequence number of the next Announce
  std::unique_ptr<PendingBatch> current_;  // looked up, pinned
  std::unique_ptr<PendingBatch> prefetch_ ABSL_GUARDED_BY(mu_);
  std::thread prefetch_thread_;
  absl::Status prefetch_status_ ABSL_GUARDED_BY(mu_);
};

}  // namespace psdb::cache

#endif  // PSDB_VOCAB_CACHE_H_
