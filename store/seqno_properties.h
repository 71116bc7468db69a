// The sequence numbers an SST file's entries carry, recorded in the file
// itself: every SST the store's RocksDB writes gets two user-collected
// table properties, psdb.seqno.min and psdb.seqno.max (decimal), the
// smallest and largest sequence number of its entries.
//
// Why: a serving replica takes up a checkpoint by reading only the files it
// adds (rpc/server/checkpoint_follower.h); to lay their rows over the files
// it already serves it must know that they are newer, and in which order,
// which RocksDB 7.8's public SST reader does not say (it hides sequence
// numbers). Files written before these properties existed have none:
// readers treat their order as unknown.
//
// Thread-safety: the factory is thread-safe (RocksDB's contract); the
// parser is a pure function.
#ifndef PSDB_STORE_SEQNO_PROPERTIES_H_
#define PSDB_STORE_SEQNO_PROPERTIES_H_

#include <cstdint>
#include <memory>
#include <optional>

#include "rocksdb/table_properties.h"

namespace psdb {

inline constexpr char kSeqnoMinProperty[] = "psdb.seqno.min";
inline constexpr char kSeqnoMaxProperty[] = "psdb.seqno.max";

// The collector factory the store installs on every column family.
std::shared_ptr<rocksdb::TablePropertiesCollectorFactory>
NewSeqnoPropertiesCollectorFactory();

struct SeqnoRange {
  uint64_t min = 0;
  uint64_t max = 0;
};

// The range a file recorded; nullopt when it has none (written before the
// store recorded them, or with no entries) or they do not parse.
std::optional<SeqnoRange> SeqnoRangeOf(const rocksdb::TableProperties& props);

}  // namespace psdb

#endif  // PSDB_STORE_SEQNO_PROPERTIES_H_
