#include "checkpoint/verify.h"

#include <set>
#include <utility>
#include <vector>

#include "absl/algorithm/container.h"
#include "absl/strings/str_cat.h"
#include "manifest/manifest.h"
#include "rocksdb/db.h"
#include "store/row_codec.h"
#include "util/status_macros.h"

namespace psdb::ckpt {

absl::StatusOr<Ring> RingFromManifest(const v1::RingManifest& rm,
                                      absl::string_view where) {
  if (rm.weights_size() != rm.server_ids_size()) {
    return absl::DataLossError(
        absl::StrCat(where, ": ring has ", rm.server_ids_size(),
                     " server ids and ", rm.weights_size(), " weights"));
  }
  RingOptions options;
  options.vnodes_per_server = rm.vnodes_per_server();
  options.hash_seed = rm.hash_seed();
  std::vector<RingMember> members;
  for (int i = 0; i < rm.server_ids_size(); ++i) {
    members.push_back({rm.server_ids(i), rm.weights(i)});
  }
  absl::StatusOr<Ring> ring = Ring::Create(options, members);
  if (!ring.ok()) {
    return absl::DataLossError(
        absl::StrCat(where, ": bad ring: ", ring.status().message()));
  }
  return ring;
}

absl::StatusOr<std::unique_ptr<RingOwnershipCheck>> RingOwnershipCheck::Create(
    const CheckpointReader& reader) {
  const v1::RingManifest& rm = reader.manifest().ring();
  if (rm.server_ids_size() == 0) return nullptr;
  const std::string where = absl::StrCat(reader.dir(), "/MANIFEST.json");
  std::set<int> ids(rm.server_ids().begin(), rm.server_ids().end());
  std::set<int> shard_ids;
  for (const ShardInfo& s : reader.shards()) shard_ids.insert(s.shard_id);
  if (ids != shard_ids) {
    return absl::DataLossError(absl::StrCat(
        where, ": the ring's servers are not the checkpoint's shards"));
  }
  PSDB_ASSIGN_OR_RETURN(Ring ring, RingFromManifest(rm, where));
  return std::unique_ptr<RingOwnershipCheck>(
      new RingOwnershipCheck(std::move(ring)));
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

absl::StatusOr<VerifyReport> Verify(const CheckpointReader& reader,
                                    const VerifyOptions& options) {
  VerifyReport report;
  auto error = [&](std::string message) {
    ++report.error_count;
    if (report.errors.size() < options.max_errors) {
      report.errors.push_back(std::move(message));
    }
  };
  const std::string manifest_file =
      absl::StrCat(reader.dir(), "/MANIFEST.json");
  for (size_t shard = 0; shard < reader.shards().size(); ++shard) {
    const absl::Status st = reader.VerifyChecksums(shard);
    if (!st.ok()) error(std::string(st.message()));
    // The manifest's tables are exactly the shard's column families.
    for (const std::string& m : ShardTableMismatches(
             reader.manifest(), reader.shards()[shard].column_families)) {
      error(absl::StrCat(reader.shards()[shard].path, ": ", m, " (",
                         manifest_file, ")"));
    }
  }
  std::vector<RowCheck*> checks = options.checks;
  absl::StatusOr<std::unique_ptr<RingOwnershipCheck>> ring =
      RingOwnershipCheck::Create(reader);
  if (!ring.ok()) {
    error(std::string(ring.status().message()));
  } else if (*ring != nullptr) {
    checks.push_back(ring->get());
  }

  for (const TableInfo& table : reader.tables()) {
    ++report.tables;
    const std::string& name = table.spec.name;
    uint64_t manifest_sum = 0;
    for (uint64_t r : table.shard_rows) manifest_sum += r;
    if (manifest_sum != table.rows) {
      error(absl::StrCat(manifest_file, ": table '", name, "' rows ",
                         table.rows, " != sum of shard rows ", manifest_sum));
    }
    for (size_t shard = 0; shard < reader.shards().size(); ++shard) {
      if (!absl::c_linear_search(reader.shards()[shard].column_families,
                                 name)) {
        continue;  // reported above: in the manifest, not in the shard
      }
      absl::StatusOr<std::unique_ptr<rocksdb::Iterator>> it =
          reader.NewIterator(shard, name);
      if (!it.ok()) {
        error(std::string(it.status().message()));
        continue;
      }
      uint64_t rows = 0;
      DecodedRow row;
      for ((*it)->SeekToFirst(); (*it)->Valid(); (*it)->Next()) {
        ++rows;
        const rocksdb::Slice k = (*it)->key();
        const rocksdb::Slice v = (*it)->value();
        absl::Status st =
            reader.Decode(shard, table, absl::string_view(k.data(), k.size()),
                          absl::string_view(v.data(), v.size()), &row);
        if (!st.ok()) {
          error(std::string(st.message()));
          continue;
        }
        if (!AllFinite(row.values.data(), row.values.size()) ||
            !AllFinite(row.state.data(), row.state.size())) {
          error(absl::StrCat(reader.Where(shard, name), " key ", row.key,
                             ": non-finite value or state"));
        }
        for (RowCheck* check : checks) {
          st = check->Check(reader, table, shard, row.key);
          if (!st.ok()) {
            error(absl::StrCat(reader.Where(shard, name), " key ", row.key,
                               ": ", st.message()));
          }
        }
      }
      report.rows += rows;
      if (!(*it)->status().ok()) {
        error(absl::StrCat(reader.Where(shard, name), ": read error after ",
                           rows, " rows: ", (*it)->status().ToString()));
        continue;
      }
      if (rows != table.shard_rows[shard]) {
        error(absl::StrCat(reader.Where(shard, name), ": ", rows,
                           " rows, manifest says ", table.shard_rows[shard]));
      }
    }
  }
  return report;
}

void PrintVerifyReport(const CheckpointReader& reader,
                       const VerifyReport& report, std::ostream& out) {
  for (const std::string& e : report.errors) out << "error: " << e << "\n";
  if (report.error_count > report.errors.size()) {
    out << "... and " << report.error_count - report.errors.size()
        << " more errors\n";
  }
  out << (report.ok() ? "OK: " : "FAILED: ") << reader.dir() << ": "
      << report.tables << " tables, " << report.rows << " rows in "
      << reader.shards().size() << " shards checked, " << report.error_count
      << " errors\n";
}

}  // namespace psdb::ckpt
