// The check a restore makes of a checkpoint shard's files before they
// become a store's database (Store::Open with StoreOptions::restore_from):
// the manifest is a claim about the files, and nothing it claims that can
// be checked is trusted. Internal to psdb_store.
//
// CheckRestoredShard first checks the copy's files against the manifest's
// list (CheckShardFiles, store/shard_files.h: sizes and checksums, before
// RocksDB parses any of them), then opens the copy read-only (writing
// nothing into it) and requires:
//  - its column families (the default one aside) are exactly the tables
//    the manifest lists (CheckShardTables, manifest/manifest.h);
//  - its metadata holds a spec for each of them, equal to the manifest's,
//    and for no other table (Store::Open takes the tables from that
//    metadata);
//  - each table's rows, counted by iterating its column family, equal the
//    manifest's count for this shard. RocksDB has no cheaper exact count:
//    "rocksdb.estimate-num-keys" and the table properties' num_entries
//    count overwritten and deleted keys, so iterating is the only exact
//    method. The iteration verifies block checksums, and opening the
//    database opens every SST file (RocksDB's default max_open_files = -1
//    checks their sizes and footers), so a missing, truncated, zeroed or
//    corrupted SST file is an error too.
// Cost: one sequential read of the shard's rows (what `ps-dump verify`
// reads), paid once per restore.
//
// Thread-safety: a pure function of the files; `db_dir` must not be written
// concurrently.
#ifndef PSDB_STORE_RESTORE_CHECK_H_
#define PSDB_STORE_RESTORE_CHECK_H_

#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "manifest/manifest.pb.h"
#include "psdb/store.h"

namespace psdb::internal {

// Checks the RocksDB database at `db_dir` (a copy of shard `shard_id`,
// index `shard_index` in manifest.shards(), of the checkpoint at
// `checkpoint_dir`) against `manifest`, per the header. DataLoss naming
// the checkpoint, the shard and the table; a count mismatch says
// "checkpoint <dir> shard <id> table '<name>': the manifest says <m> rows,
// the files hold <n>". `options` supplies the file system RocksDB reads
// through. On success, `shard_rows` (if not null) receives each manifest
// table's verified count, in manifest order.
absl::Status CheckRestoredShard(const std::string& db_dir,
                                const v1::Manifest& manifest, int shard_index,
                                absl::string_view checkpoint_dir,
                                const StoreOptions& options,
                                std::vector<uint64_t>* shard_rows = nullptr);

}  // namespace psdb::internal

#endif  // PSDB_STORE_RESTORE_CHECK_H_
