// The commands of ps-dump over an open checkpoint, as a library (the tool's
// main only parses argv; see tools/dump/dump_cli.h):
//
//  - Info: tables, their specs, rows and bytes, and the rows per shard when
//    there are several shards (balance = busiest shard / mean).
//  - Export: one table's rows in key order (shards merged) as TSV, JSON
//    lines or NumPy .npy files; optionally only some keys, at most N rows,
//    with the optimizer state and row header.
//  - Verify: checkpoint/verify.h (shared with serving replicas).
//
// Errors name the file (shard directory), the table and the key.
//
// Thread-safety: functions over a CheckpointReader; see its header.
#ifndef PSDB_TOOLS_DUMP_DUMP_H_
#define PSDB_TOOLS_DUMP_DUMP_H_

#include <cstdint>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "checkpoint/verify.h"
#include "psdb/checkpoint_reader.h"

namespace psdb::dump {

using ckpt::CheckpointReader;
using ckpt::DecodedRow;
using ckpt::ShardInfo;
using ckpt::TableCursor;
using ckpt::TableInfo;

// Writes the human-readable summary `ps-dump info` prints.
void PrintInfo(const CheckpointReader& reader, std::ostream& out);

enum class ExportFormat {
  // Tab-separated with a header line: key, v0..v{dim-1}; with state also
  // s0..s{state_size-1}, last_update_step, update_count, frequency.
  kTsv,
  // One JSON object per line: {"key":K,"values":[...]}; with state also
  // "state":[...],"last_update_step":..,"update_count":..,"frequency":..
  kJsonl,
  // NumPy v1.0 files <out>_keys.npy ('<u8', (n,)) and <out>_values.npy
  // ('<f4', (n, dim)); with state also <out>_state.npy ('<f4',
  // (n, state_size)), <out>_last_update_step.npy ('<i8', (n,)),
  // <out>_update_count.npy and <out>_frequency.npy ('<u8', (n,)).
  // A trailing ".npy" on <out> is dropped.
  kNpy,
};

// InvalidArgument unless "tsv", "jsonl" or "npy".
absl::StatusOr<ExportFormat> ParseExportFormat(absl::string_view name);

struct ExportOptions {
  // REQUIRED.
  std::string table;
  // Default: kTsv
  ExportFormat format = ExportFormat::kTsv;
  // Include optimizer state and the row header. Default: false
  bool with_state = false;
  // Only these keys (exported in key order, duplicates once); a key not in
  // the table is a NotFound error and nothing is written. Default: all keys
  std::optional<std::vector<uint64_t>> keys;
  // At most this many rows; 0 = no limit. Default: 0
  uint64_t limit = 0;
  // Output file (tsv/jsonl; empty = the `out` stream) or path prefix (npy,
  // REQUIRED). Default: ""
  std::string out;
};

struct ExportResult {
  uint64_t rows = 0;
  std::vector<std::string> files;  // files written (empty for a stream)
};

// Exports rows per `options`; text formats go to `stream` when options.out
// is empty.
absl::StatusOr<ExportResult> Export(const CheckpointReader& reader,
                                    const ExportOptions& options,
                                    std::ostream& stream);

}  // namespace psdb::dump

#endif  // PSDB_TOOLS_DUMP_DUMP_H_
