// Verifying a psdb checkpoint: what `ps-dump verify` prints and what a
// serving replica (rpc/server/checkpoint_follower.h) requires of a
// checkpoint before it serves it.
//
// Verify checks, over a CheckpointReader:
//  - every block checksum of every SST file of every shard
//    (CheckpointReader::VerifyChecksums: a flipped byte anywhere);
//  - every row's key and value decode (store/row_codec.h) with the table's
//    dim and state size, and its values and state are finite;
//  - every shard holds exactly the manifest's tables: a column family the
//    manifest does not list, or a listed table without one, is an error
//    naming the shard directory and the table (ShardTableMismatches,
//    manifest/manifest.h);
//  - row counts match the manifest (per shard and in total);
//  - for a cluster checkpoint (the manifest records a ring), every key of
//    shard s is owned by server s on that ring (RingOwnershipCheck);
//  - any extra per-row checks the caller plugs in (RowCheck).
// Errors name the file (shard directory), the table and the key.
//
// Thread-safety: functions over a CheckpointReader (see its header); a
// RowCheck is used by one Verify at a time.
#ifndef PSDB_CHECKPOINT_VERIFY_H_
#define PSDB_CHECKPOINT_VERIFY_H_

#include <cstdint>
#include <memory>
#include <ostream>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "manifest/manifest.pb.h"
#include "psdb/checkpoint_reader.h"
#include "shard/ring.h"

namespace psdb::ckpt {

// The ring a cluster manifest records (RingManifest: vnodes, hash seed,
// server ids in rank order and their weights), built as every reader of
// the manifest builds it. DataLoss naming `where` (the manifest file) when
// the ids and weights differ in number or Ring::Create refuses them.
// REQUIRES: ring.server_ids_size() > 0.
absl::StatusOr<Ring> RingFromManifest(const v1::RingManifest& ring,
                                      absl::string_view where);

// A per-row check Verify runs after a row decodes.
class RowCheck {
 public:
  virtual ~RowCheck() = default;
  // A non-OK status is reported as a verify error (Verify adds the shard
  // directory, table and key to the message).
  virtual absl::Status Check(const CheckpointReader& reader,
                             const TableInfo& table, size_t shard,
                             uint64_t key) = 0;
};

// The ring check of cluster checkpoints: every key of shard s is owned by
// server s on the ring the manifest records (RingManifest: vnodes, hash
// seed, server ids and weights; shard/ring.h), as written by
// rpc/control/cluster_checkpoint.h. Verify runs it by itself.
class RingOwnershipCheck final : public RowCheck {
 public:
  // Null when the manifest has no ring (an embedded checkpoint); DataLoss
  // when the recorded ring is invalid or lists servers other than the
  // shards.
  static absl::StatusOr<std::unique_ptr<RingOwnershipCheck>> Create(
      const CheckpointReader& reader);

  absl::Status Check(const CheckpointReader& reader, const TableInfo& table,
                     size_t shard, uint64_t key) override;
  const Ring& ring() const { return ring_; }

 private:
  explicit RingOwnershipCheck(Ring ring) : ring_(std::move(ring)) {}
  const Ring ring_;
};

struct VerifyOptions {
  // Extra per-row checks, not owned. Default: none
  std::vector<RowCheck*> checks;
  // Errors kept in VerifyReport::errors (all are counted). Default: 100
  size_t max_errors = 100;
};

struct VerifyReport {
  uint64_t tables = 0;
  uint64_t rows = 0;                // rows read
  uint64_t error_count = 0;         // every error found
  std::vector<std::string> errors;  // the first max_errors of them
  bool ok() const { return error_count == 0; }
};

// Runs every check above. Problems found in the data go into the report;
// the returned Status is non-OK only if reading could not proceed at all.
absl::StatusOr<VerifyReport> Verify(const CheckpointReader& reader,
                                    const VerifyOptions& options = {});

// Writes a report as `ps-dump verify` prints it.
void PrintVerifyReport(const CheckpointReader& reader,
                       const VerifyReport& report, std::ostream& out);

}  // namespace psdb::ckpt

#endif  // PSDB_CHECKPOINT_VERIFY_H_
