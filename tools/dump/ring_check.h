// RingOwnershipCheck: ps-dump verify's check that a cluster checkpoint's
// rows sit where the cluster routes them: every key of shard s is owned by
// server s on the ring the manifest records (RingManifest: vnodes, hash
// seed, server ids and weights; shard/ring.h), as written by
// rpc/control/cluster_checkpoint.h. Embedded checkpoints record no ring and get
// no such check (Create returns null).
//
// Thread-safety: Check is const over an immutable ring; one Verify at a time.
#ifndef PSDB_TOOLS_DUMP_RING_CHECK_H_
#define PSDB_TOOLS_DUMP_RING_CHECK_H_

#include <memory>

#include "absl/status/statusor.h"
#include "shard/ring.h"
#include "tools/dump/dump.h"

namespace psdb::dump {

class RingOwnershipCheck final : public RowCheck {
 public:
  // Null when the manifest has no ring (embedded mode); an error when the
  // recorded ring is invalid or lists servers other than the shards.
  static absl::StatusOr<std::unique_ptr<RingOwnershipCheck>> Create(
      const CheckpointReader& reader);

  absl::Status Check(const CheckpointReader& reader, const TableInfo& table,
                     size_t shard, uint64_t key) override;

 private:
  explicit RingOwnershipCheck(Ring ring) : ring_(std::move(ring)) {}
  const Ring ring_;
};

}  // namespace psdb::dump

#endif  // PSDB_TOOLS_DUMP_RING_CHECK_H_
