// The keys of the store's metadata in the default column family of a
// store's RocksDB (and so of every checkpoint shard): written by the Store
// (store.cc, store_open.cc) and by ShardWriter (shard_writer.h), read when a
// store opens. Internal to psdb_store. store_impl.h describes each key.
//
// Thread-safety: constants.
#ifndef PSDB_STORE_STORE_META_H_
#define PSDB_STORE_STORE_META_H_

#include <cstdint>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

namespace psdb::internal {

inline constexpr absl::string_view kMetaVersion = "psdb/format_version";
inline constexpr absl::string_view kMetaTable = "psdb/table/";
inline constexpr absl::string_view kMetaStep = "psdb/step/";
inline constexpr absl::string_view kMetaRows = "psdb/rows/";
inline constexpr absl::string_view kMetaClean = "psdb/clean";
// Write-ahead log (store/wal.h): the id its segments carry, the LSN the
// next record gets (persisted at Flush), and per row the LSN of the last
// record the row on disk includes (8 bytes little-endian).
inline constexpr absl::string_view kMetaWalId = "psdb/wal_id";
inline constexpr absl::string_view kMetaWalNextLsn = "psdb/wal_next_lsn";
inline constexpr absl::string_view kMetaWalTag = "psdb/wal_tag/";

// psdb/wal_tag/<table>/<8-byte big-endian key>.
inline std::string WalTagPrefix(absl::string_view table) {
  return absl::StrCat(kMetaWalTag, table, "/");
}
inline std::string WalTagKey(absl::string_view table, uint64_t key) {
  std::string k = WalTagPrefix(table);
  for (int i = 7; i >= 0; --i) k.push_back(static_cast<char>(key >> (8 * i)));
  return k;
}

}  // namespace psdb::internal

#endif  // PSDB_STORE_STORE_META_H_
