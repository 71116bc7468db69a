// Laying a checkpoint over the one a serving replica's shard serves
// (rpc/server/checkpoint_follower.h): which of its table SST files hold
// rows the replica has not seen (read into the delta), which hold only rows
// it serves already (not read), and when it cannot tell (the checkpoint is
// then opened whole).
//
// The replica's shard serves a base store (a checkpoint opened whole) plus
// the rows of files read since (delta_rows.h); ServingSnapshot::Base says
// which files are accounted for and the largest sequence number of the
// rows served (`seen_max`). Every row with a sequence number up to
// seen_max is served. A file the replica has not accounted for, by the
// sequence numbers the manifest lists for it:
//  - all above seen_max: fresh rows, read and laid over, oldest file first
//    (fresh files' ranges must not interleave);
//  - all at most seen_max (and not zero): rows served already, moved by a
//    compaction; not read;
//  - otherwise (both sides; or zero, which RocksDB gives rows it compacts
//    into the last level, whatever their age; or not listed): unknown.
// A fresh file that deletes rows also makes the delta impossible (which
// keys it deletes the SST reader does not say).
//
// Thread-safety: pure functions.
#ifndef PSDB_RPC_SERVER_LAY_OVER_H_
#define PSDB_RPC_SERVER_LAY_OVER_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/status/statusor.h"
#include "checkpoint/file_verify.h"
#include "manifest/manifest.pb.h"
#include "rpc/server/delta_rows.h"
#include "rpc/server/serving_snapshot.h"

namespace psdb::rpc {

// A table SST file of a shard, with what the manifest says of it.
struct TableFile {
  ckpt::FileId id;
  ckpt::FileFacts facts;
};

// The table SST files of shard `shard` of `m` (at `dir`) (files the
// manifest says nothing of take their column family from `verified`).
absl::StatusOr<std::vector<TableFile>> TableFiles(
    const v1::Manifest& m, int shard, const std::string& dir,
    const ckpt::VerifiedFiles& verified);

// The base of a store opened on these files.
ServingSnapshot::Base BaseOf(const std::string& checkpoint_id,
                             const std::vector<TableFile>& files);

struct LayPlan {
  std::vector<const TableFile*> fresh;    // oldest first
  absl::flat_hash_set<std::string> skip;  // file names not to read
  uint64_t seen_max = 0;                  // after the fresh files
};
// The plan for `files` (the shard's table SSTs now) over `base`;
// FailedPrecondition saying why there is none. The plan points into
// `files`.
absl::StatusOr<LayPlan> PlanLayOver(const ServingSnapshot::Base& base,
                                    const std::vector<TableFile>& files);

// The delta of the planned checkpoint: the old delta's rows and the fresh
// files' rows (from `checked`, their facts from `verified`), newest last.
// FailedPrecondition saying why not: a fresh file deletes rows, or the rows
// were not all kept or pass max_bytes.
absl::StatusOr<std::shared_ptr<const DeltaRows>> LayOver(
    const LayPlan& plan, const ckpt::FileVerifyReport& checked,
    const ckpt::VerifiedFiles& verified, const DeltaRows* old_delta,
    uint64_t max_bytes);

}  // namespace psdb::rpc

#endif  // PSDB_RPC_SERVER_LAY_OVER_H_
