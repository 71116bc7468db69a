// Test helper: writes a psdb checkpoint directory by hand (RocksDB shards
// with one column family per table, rows encoded with store/row_codec.h, and
// MANIFEST.json written last), in the layout manifest/manifest.h defines, so
// the checkpoint reader's, verify's and ps-dump's tests control every byte
// without depending on the Store.
//
// Thread-safety: test-only, single-threaded.
#ifndef PSDB_TESTS_STORE_CHECKPOINT_FIXTURE_H_
#define PSDB_TESTS_STORE_CHECKPOINT_FIXTURE_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "psdb/row.h"
#include "psdb/table_spec.h"

namespace psdb::testing {

struct FixtureRow {
  RowHeader header;
  std::vector<float> values;
  std::vector<float> state;
};

struct FixtureTable {
  TableSpec spec;
  int64_t step = 0;
  std::map<uint64_t, FixtureRow> rows;
};

// The row the fixture stores for `key` in a table of `dim`/`state_size`:
// values[j] = key + 0.25 * j, state[j] = 0.5 + j, header {key, 2 * key, 3}.
FixtureRow MakeRow(uint64_t key, int dim, int state_size);

// Writes <dir>/MANIFEST.json and <dir>/shard-<i>/ for i < shards; key k goes
// to shard k % shards. `raw_overrides` replaces the stored value bytes of
// (table, key) after encoding (to plant corruption).
absl::Status WriteCheckpoint(const std::string& dir,
                             const std::vector<FixtureTable>& tables,
                             int shards, int64_t step,
                             const std::map<std::pair<std::string, uint64_t>,
                                            std::string>& raw_overrides = {});

}  // namespace psdb::testing

#endif  // PSDB_TESTS_STORE_CHECKPOINT_FIXTURE_H_
