// The small real checkpoint the checkpoint-reader fuzz target mutates and
// the seed corpus is made from: a Store on a local directory with two
// tables (Adagrad dim 4, FTRL dim 1), rows created by pulls and changed by
// pushes of exactly representable gradients, then Store::Checkpoint.
//
// Thread-safety: functions over the filesystem; one caller per directory.
#ifndef PSDB_TESTS_FUZZ_SMALL_CHECKPOINT_H_
#define PSDB_TESTS_FUZZ_SMALL_CHECKPOINT_H_

#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "psdb/table_spec.h"

namespace psdb::fuzz {

// The tables of the small checkpoint (and of the parameter-service target's
// store).
std::vector<TableSpec> SmallTables();

// Writes the store under `work_dir`/store and its checkpoint under
// `work_dir`/ckpt; returns the checkpoint directory (with MANIFEST.json).
absl::StatusOr<std::string> WriteSmallCheckpoint(absl::string_view work_dir);

// Every regular file under `dir`: (path relative to dir, contents), sorted
// by path.
absl::StatusOr<std::vector<std::pair<std::string, std::string>>> ReadTree(
    absl::string_view dir);

}  // namespace psdb::fuzz

#endif  // PSDB_TESTS_FUZZ_SMALL_CHECKPOINT_H_
