// Restoring one server of a cluster from a checkpoint cut for another ring
// (another number of servers, other ids, weights, vnodes or seed): a step a
// cluster server (ps-server --restore_from) takes before Store::Open, so
// the store engine itself knows no ring (DESIGN: store depends on optim
// only). PrepareRestoreForRing decides; RestoreForRing does the work. The
// server's database is built from the source rows it owns under its own ring
// (Ring::Owner(key) == server, the check rpc/server/server.cc makes of every
// request), nothing else.
//
// Source shards read: only those that can hold a key `server` owns
// (SourceShardsFor). Rows are streamed per table through a TableCursor over
// those shards and written, key and encoded value unchanged (values,
// optimizer state and header), by ShardWriter (store/shard_writer.h) in
// batches of batch_rows rows: memory is one batch plus RocksDB's buffers.
// Nothing the manifest claims is trusted: each opened shard must hold
// exactly the manifest's tables (CheckShardTables, manifest/manifest.h),
// every row read must decode with its table's dim and state size (reads
// verify block checksums; opening a shard opens every SST file), and the
// rows read from each opened shard must match the manifest's count for it,
// or the restore fails (DataLoss "restore refused: checkpoint <dir> shard
// <id> table '<t>': the manifest says <m> rows, the files hold <n>", or
// naming the shard and table otherwise).
//
// Crash safety: the database is written under "<db_path>.restore-tmp"
// (Store::RestoreTmpPath; removed first if a previous run left it) and
// renamed to db_path only when complete, the rename fsynced; on any error
// the temp directory is removed and db_path does not exist.
//
// Thread-safety: one call per db_path at a time.
#ifndef PSDB_CHECKPOINT_RESTORE_H_
#define PSDB_CHECKPOINT_RESTORE_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "manifest/manifest.pb.h"
#include "shard/ring.h"

namespace rocksdb {
class FileSystem;
}  // namespace rocksdb

namespace psdb::ckpt {

// The ids of `source`'s servers whose shards can hold a key that `server`
// owns on `target`. The ring's preference over vnodes is fixed per key
// (shard/ring.h), so when both rings share RingOptions and `server` is on
// both with the same vnode count, a key `server` owns on `target` was owned
// on `source` by `server` itself or by a server whose vnodes `target` lacks
// (one not on `target`, or with another vnode count): only those are
// returned. Otherwise (a server new to the ring, other options) every
// source server can, and all are returned. Sorted by id.
std::vector<ServerId> SourceShardsFor(const Ring& source, const Ring& target,
                                      ServerId server);

struct RingRestoreOptions {
  // The checkpoint directory (resolved: it holds MANIFEST.json).
  // Default: ""
  std::string checkpoint_dir;
  // The ring the restored server serves under, and its id on it.
  // REQUIRES: ring.IndexOf(server).has_value().
  Ring ring;
  ServerId server = kNoServer;
  // The database directory to create; must not exist. Default: ""
  std::string db_path;
  // Rows per RocksDB write batch. REQUIRES: >= 1. Default: 65536
  size_t batch_rows = 65536;
  // Every file is read and written through it (StoreOptions::file_system).
  // Default: nullptr, the local file system
  std::shared_ptr<rocksdb::FileSystem> file_system;
};

struct RingRestoreResult {
  // The source manifest with each table's rows set to the rows written.
  v1::Manifest manifest;
  // Source shard ids opened and read, sorted.
  std::vector<int> source_shards;
  // Rows written, over all tables.
  uint64_t rows = 0;
};

// Builds options.db_path per the header. A checkpoint without a ring (an
// embedded one) is read whole. InvalidArgument if `server` is not on the
// ring or db_path exists; DataLoss on a bad ring, an undecodable row or a
// row count that does not match the manifest; any read or write error.
absl::StatusOr<RingRestoreResult> RestoreForRing(
    const RingRestoreOptions& options);

// For a store at `store_path` that will open with restore_from =
// `restore_from` as server `server` of `ring`: when its database does not
// exist yet and the checkpoint (a directory or a root, as restore_from)
// records another ring than `ring`, builds Store::DbPath(store_path) with
// RestoreForRing and returns its result; Store::Open then opens that
// database and restores nothing. Returns nullopt when there is nothing to
// do here: the database exists, or the rings are the same (Store::Open
// links the checkpoint's shard `server`, as before). A checkpoint without a
// ring counts as the same ring only for a one-server ring. On error
// `store_path` is as before the call (removed if this call created it). A
// caller whose Store::Open then fails removes Store::DbPath(store_path), so
// the next start restores again (ps-server does). Files go through
// `file_system` (nullptr: the local file system).
absl::StatusOr<std::optional<RingRestoreResult>> PrepareRestoreForRing(
    absl::string_view restore_from, const Ring& ring, ServerId server,
    absl::string_view store_path,
    std::shared_ptr<rocksdb::FileSystem> file_system = nullptr);

}  // namespace psdb::ckpt

#endif  // PSDB_CHECKPOINT_RESTORE_H_
