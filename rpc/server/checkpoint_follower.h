// CheckpointFollower: the data of a read-only serving replica
// (`ps-server --serve_from=ROOT`). It serves one shard of the newest
// complete checkpoint under a checkpoint root that training keeps writing
// into, and follows the root: when a newer complete checkpoint (its
// MANIFEST.json written) appears, it verifies it, opens it beside the
// current one, warms the rows the current one holds in memory, and swaps.
//
//   FollowerOptions options;
//   options.root = "/shared/ckpt";
//   options.store.memory_budget_bytes = 8ull << 30;
//   PSDB_ASSIGN_OR_RETURN(auto follower, CheckpointFollower::Start(options));
//   std::shared_ptr<ServingSnapshot> snap = follower->Acquire();
//   snap->store->Pull("emb", keys, out);  // wholly from one checkpoint
//
// Semantics:
//  - Following: the root is looked at every options.interval and, through
//    inotify (options.watch_root), as soon as a checkpoint's manifest is
//    renamed into it.
//  - A checkpoint is served only after it verifies. The first one (and any
//    whose manifest lists no files, format 1) is verified whole
//    (checkpoint/verify.h: block checksums, every row decodes, row counts,
//    ring ownership). After that a checkpoint's files are verified one by
//    one, and only those no earlier swap verified: checkpoints share their
//    unchanged SST files by hard link, and a file known by inode, size and
//    crc32c is not read again (checkpoint/file_verify.h). One that fails
//    (corrupt, half-written files) is refused with a logged reason,
//    remembered (not re-verified every interval) and skipped; the replica
//    keeps serving what it has. Directories without a manifest do not
//    exist (manifest/manifest.h) and are never looked at.
//  - Newest means highest checkpoint seq. Among those newer than the one
//    served, the newest that verifies is taken.
//  - A swap costs the change, not the table (delta_rows.h). A shard's
//    store is opened on one checkpoint (its base); later checkpoints are
//    laid over it when the manifest lists, for every table SST the replica
//    has not accounted for, the sequence numbers of its rows, and each such
//    file holds either only rows newer than all the replica serves (read
//    while verifying it, and served over the store, newest file last) or
//    only rows no newer (a compaction's output: what it holds the replica
//    serves already, so it is not read). No RocksDB is opened and nothing
//    is warmed; memory grows by the new rows. Otherwise (a file holds
//    rows on both sides, a new file deletes rows, the tables or the ring
//    changed, the rows held over the base pass max_delta_bytes, a manifest
//    written before it listed sequence numbers) the checkpoint is opened
//    whole as a new base, every file of it verified first, and warmed
//    from the old one. SwapReport says which it was and the log says why.
//  - Atomic swap: Acquire() hands out the current snapshot; a caller holds
//    it for one request, so a response comes wholly from one checkpoint and
//    in-flight requests finish on the old one. A retired snapshot is
//    closed once its last holder lets go (on the follower's side, not the
//    request's thread); a base store shared by several snapshots closes
//    with the last of them. While a new base is opened both bases' memory
//    tiers exist: plan for twice the budget then.
//  - Versions: the follower keeps the newest options.serve_versions (K)
//    checkpoints it swapped in readable: Acquire(checkpoint_id) hands out
//    any of them, and HeldVersions() lists them, newest first. A version's
//    identity is its checkpoint id (it embeds step and seq; order is by
//    seq). Versions laid over the same base share its store and the added
//    files' rows (delta_rows.h), so a row unchanged between them is held
//    once. A version on a base of its own (the newer one was opened whole)
//    keeps its own store: K versions over K different bases cost up to K
//    memory budgets (plus K RocksDB instances) until the older ones fall
//    out of the window. Training's keep_last may delete a held version's
//    directory: its files stay open (hard links, open descriptors), so it
//    keeps being served exactly until it falls out of the window; then
//    Acquire(its id) is NotFound naming it and the versions held.
//  - Warming (a new base only): for every shard and every table of the new
//    checkpoint that the old one also has, the keys resident in the old
//    store's memory tier (up to options.warm_max_keys per table) are pulled
//    from the new store before the swap, so the hot set is in memory when
//    requests arrive.
//  - Each served shard is a store of its own with the whole
//    options.store.memory_budget_bytes (serving every shard of an N-shard
//    checkpoint: N budgets).
//  - Verifying, warming and closing a retired checkpoint run under
//    SCHED_IDLE: they take only CPU that requests leave, so requests keep
//    their latency during a swap and on a busy machine the swap takes
//    longer.
//  - Files are never modified (Store::OpenCheckpoint, CheckpointReader).
//  - Every read of a checkpoint's files goes through a counting file
//    system (store/counting_file_system.h): SwapReport::bytes_read.
//
// Thread-safety: Acquire, Poll and status may be called from any thread;
// Poll calls are serialized internally. Start/destroy from one thread; the
// destructor waits for the follow thread and closes the retired snapshots,
// and must run after every Acquire()d snapshot has been released.
#ifndef PSDB_RPC_SERVER_CHECKPOINT_FOLLOWER_H_
#define PSDB_RPC_SERVER_CHECKPOINT_FOLLOWER_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "psdb/store.h"
#include "rpc/server/serving_snapshot.h"

namespace psdb::rpc {

// FollowerOptions::shard_id serving every shard of the checkpoint.
inline constexpr int kAllShards = -1;

struct FollowerOptions {
  // The checkpoint root training writes into (manifest/manifest.h layout).
  // REQUIRES: non-empty.
  std::string root;
  // Which shard of a cluster checkpoint to serve (kAllShards: every shard,
  // for a model small enough for one replica); an embedded checkpoint has
  // the one shard its store was given (0 by default). Default: 0
  int shard_id = 0;
  // Options of the read-only stores (memory_budget_bytes, eviction,
  // index_stripes, max_batch_keys, rocksdb_block_cache_bytes).
  StoreOptions store;
  // How often the root is looked at. Zero: never by itself (call Poll).
  // Default: 10 s
  absl::Duration interval = absl::Seconds(10);
  // With interval > 0: also watch the root with inotify
  // (rpc/server/root_watcher.h) and look at it as soon as a manifest is
  // renamed in, whatever the interval; the interval's polling stays, as
  // the fallback where inotify is unavailable (logged once) and as a
  // safety net. Default: true
  bool watch_root = true;
  // Keys per table warmed into the next checkpoint before a swap.
  // Default: 1 << 22
  size_t warm_max_keys = size_t{1} << 22;
  // Bytes of added files' rows a shard may hold over its base store (see
  // Semantics); past it the next checkpoint is opened whole. 0: a quarter
  // of store.memory_budget_bytes. Default: 0
  uint64_t max_delta_bytes = 0;
  // Checkpoints kept readable (see Versions): the one served plus the
  // serve_versions - 1 swapped in before it. REQUIRES: >= 1. Default: 2
  int serve_versions = 2;
};

// One checkpoint a replica can serve (checkpoint ids order as their seq).
struct ServedVersion {
  std::string checkpoint_id;  // e.g. "ckpt-000000001200-000003"
  int64_t step = 0;
  uint64_t seq = 0;
};

// What one swap cost: from the follower taking up a newer checkpoint to
// serving it.
struct SwapReport {
  std::string checkpoint_id;  // the checkpoint swapped in
  int64_t step = 0;
  absl::Time created;   // its manifest's creation time
  absl::Duration took;  // taking it up -> serving it
  // Bytes read from the checkpoint's files during the swap: verifying new
  // files, RocksDB opening the shard(s) and anything read to warm them.
  uint64_t bytes_read = 0;
  // Files (and their bytes) verified because no earlier swap had verified
  // them, and files known from an earlier swap (the same file, shared by
  // hard link) and not read again.
  uint64_t files_verified = 0;
  uint64_t bytes_verified = 0;
  uint64_t files_reused = 0;
  // Files not read: a compaction's outputs holding only rows the replica
  // serves already (checked by size; verified if ever opened whole).
  uint64_t files_skipped = 0;
  uint64_t rows_verified = 0;  // rows decoded and checked
  // Whether every shard was laid over its base (only the added files'
  // rows), rather than opened whole; and the rows and bytes the served
  // shards then hold over their bases.
  bool delta = false;
  uint64_t delta_rows = 0;
  uint64_t delta_bytes = 0;
};

struct ServingStatus {
  std::string checkpoint_id;
  int64_t step = 0;
  absl::Time created;        // the served checkpoint's creation time
  absl::Time opened;         // when the replica started serving it
  uint64_t swaps = 0;        // checkpoints swapped in after the first
  uint64_t refused = 0;      // checkpoints that failed verification
  std::string last_refusal;  // why the last refused one was refused
  SwapReport last_swap;      // the last swap (or the first open)
};

class CheckpointFollower {
 public:
  // Opens the newest complete checkpoint under options.root that verifies
  // and starts following (options.interval). NotFound if the root has no
  // complete checkpoint; FailedPrecondition listing the reasons if none
  // verifies; InvalidArgument on bad options.
  static absl::StatusOr<std::unique_ptr<CheckpointFollower>> Start(
      const FollowerOptions& options);
  ~CheckpointFollower();
  CheckpointFollower(const CheckpointFollower&) = delete;
  CheckpointFollower& operator=(const CheckpointFollower&) = delete;

  // The snapshot requests run against now (the newest held). Never null.
  std::shared_ptr<ServingSnapshot> Acquire() const;
  // The held snapshot of checkpoint `checkpoint_id`; NotFound naming it
  // and the versions held when it is not (never was, or fell out of the
  // serve_versions window).
  absl::StatusOr<std::shared_ptr<ServingSnapshot>> Acquire(
      absl::string_view checkpoint_id) const;
  // The versions Acquire(id) serves now, newest first (at least one).
  std::vector<ServedVersion> HeldVersions() const;

  // Looks at the root once: swaps in the newest newer checkpoint that
  // verifies. True if it swapped. An error only when the root cannot be
  // listed; refused checkpoints are reported through status().
  absl::StatusOr<bool> Poll();

  ServingStatus status() const;

  // Called on the follow thread (or Poll's caller) after every swap, with
  // its report; replaces the previous observer (null: none). For metrics:
  // it must be quick and must not call back into the follower.
  using SwapObserver = std::function<void(const SwapReport&)>;
  void SetSwapObserver(SwapObserver observer);

 private:
  class Impl;
  explicit CheckpointFollower(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace psdb::rpc

#endif  // PSDB_RPC_SERVER_CHECKPOINT_FOLLOWER_H_
