// The keys of the store's metadata in the default column family of a
// store's RocksDB (and so of every checkpoint shard): written by the Store
// (store.cc) and by ShardWriter (shard_writer.h), read when a store opens.
// Internal to psdb_store. store_impl.h describes each key.
//
// Thread-safety: constants.
#ifndef PSDB_STORE_STORE_META_H_
#define PSDB_STORE_STORE_META_H_

#include "absl/strings/string_view.h"

namespace psdb::internal {

inline constexpr absl::string_view kMetaVersion = "psdb/format_version";
inline constexpr absl::string_view kMetaTable = "psdb/table/";
inline constexpr absl::string_view kMetaStep = "psdb/step/";
inline constexpr absl::string_view kMetaRows = "psdb/rows/";
inline constexpr absl::string_view kMetaClean = "psdb/clean";

}  // namespace psdb::internal

#endif  // PSDB_STORE_STORE_META_H_
