#include "tools/dump/ring_check.h"

#include <set>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "util/status_macros.h"

namespace psdb::dump {

absl::StatusOr<std::unique_ptr<RingOwnershipCheck>> RingOwnershipCheck::Create(
    const CheckpointReader& reader) {
  const v1::RingManifest& rm = reader.manifest().ring();
  if (rm.server_ids_size() == 0) return nullptr;
  const std::string where = absl::StrCat(reader.dir(), "/MANIFEST.json");
  if (rm.weights_size() != rm.server_ids_size()) {
    return absl::DataLossError(
        absl::StrCat(where, ": ring has ", rm.server_ids_size(),
                     " server ids and ", rm.weights_size(), " weights"));
  }
  RingOptions options;
  options.vnodes_per_server = rm.vnodes_per_server();
  options.hash_seed = rm.hash_seed();
  std::vector<RingMember> members;
  std::set<int> ids;
  for (int i = 0; i < rm.server_ids_size(); ++i) {
    members.push_back({rm.server_ids(i), rm.weights(i)});
    ids.insert(rm.server_ids(i));
  }
  std::set<int> shard_ids;
  for (const ShardInfo& s : reader.shards()) shard_ids.insert(s.shard_id);
  if (ids != shard_ids) {
    return absl::DataLossError(absl::StrCat(
        where, ": the ring's servers are not the checkpoint's shards"));
  }
  absl::StatusOr<Ring> ring = Ring::Create(options, members);
  if (!ring.ok()) {
    return absl::DataLossError(
        absl::StrCat(where, ": bad ring: ", ring.status().message()));
  }
  return std::unique_ptr<RingOwnershipCheck>(
      new RingOwnershipCheck(*std::move(ring)));
}

absl::Status RingOwnershipCheck::Check(const CheckpointReader& reader,
                                       const TableInfo& table, size_t shard,
                                       uint64_t key) {
  const ServerId owner = ring_.Owner(key);
  const int here = reader.shards()[shard].shard_id;
  if (owner == here) return absl::OkStatus();
  return absl::FailedPreconditionError(absl::StrCat(
      "in shard ", here, " but the ring places it on shard ", owner));
}

}  // namespace psdb::dump
