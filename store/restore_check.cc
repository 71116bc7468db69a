#include "store/restore_check.h"

#include <algorithm>
#include <memory>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "manifest/manifest.h"
#include "store/disk_tier.h"
#include "store/file_io_rocksdb.h"
#include "store/shard_files.h"
#include "store/store_meta.h"
#include "util/status_macros.h"

namespace psdb::internal {
namespace {

// Rows of `cf`, counted by iterating it with checksum verification; an
// error naming `where` if a block cannot be read.
absl::StatusOr<uint64_t> CountRows(DiskTier* disk,
                                   rocksdb::ColumnFamilyHandle* cf,
                                   absl::string_view where) {
  rocksdb::ReadOptions ro;
  ro.verify_checksums = true;
  ro.fill_cache = false;  // read once
  std::unique_ptr<rocksdb::Iterator> it(disk->db()->NewIterator(ro, cf));
  uint64_t n = 0;
  for (it->SeekToFirst(); it->Valid(); it->Next()) ++n;
  if (!it->status().ok()) {
    return absl::DataLossError(absl::StrCat(
        where, ": unreadable after ", n, " rows: ", it->status().ToString()));
  }
  return n;
}

absl::Status CheckOpen(
    DiskTier* disk,
    const std::vector<std::pair<std::string, rocksdb::ColumnFamilyHandle*>>&
        cfs,
    const v1::Manifest& manifest, int shard_index, const std::string& where,
    std::vector<uint64_t>* shard_rows) {
  std::vector<std::string> names;
  absl::flat_hash_map<std::string, rocksdb::ColumnFamilyHandle*> by_name;
  for (const auto& [name, handle] : cfs) {
    names.push_back(name);
    by_name[name] = handle;
  }
  PSDB_RETURN_IF_ERROR(CheckShardTables(manifest, names, where));

  absl::flat_hash_map<std::string, std::string> specs;  // name -> JSON
  for (auto& [key, json] : disk->ScanMeta(kMetaTable)) {
    specs[key.substr(kMetaTable.size())] = std::move(json);
  }
  for (const auto& entry : specs) {
    const std::string& name = entry.first;  // a lambda may not capture a
                                            // structured binding (clang 14)
    const bool listed = std::any_of(
        manifest.tables().begin(), manifest.tables().end(),
        [&](const v1::TableManifest& t) { return t.spec().name() == name; });
    if (!listed) {
      // Store::Open would create it, empty, from that spec.
      return absl::DataLossError(absl::StrCat(
          where, ": table '", name,
          "' has a spec in the shard's metadata but is not in the manifest"));
    }
  }
  std::vector<uint64_t> counts;
  for (const v1::TableManifest& t : manifest.tables()) {
    const std::string& name = t.spec().name();
    const std::string table = absl::StrCat(where, " table '", name, "'");
    auto spec = specs.find(name);
    if (spec == specs.end()) {
      return absl::DataLossError(
          absl::StrCat(table, ": the shard's metadata has no spec for it"));
    }
    absl::StatusOr<TableSpec> held = TableSpecFromJson(spec->second);
    absl::StatusOr<TableSpec> listed = TableSpecFromProto(t.spec());
    if (!held.ok() || !listed.ok() || !(*held == *listed)) {
      return absl::DataLossError(
          absl::StrCat(table,
                       ": the manifest's spec is not the one in the "
                       "shard's metadata (",
                       spec->second, ")"));
    }
    const uint64_t expected = shard_index < t.shard_rows_size()
                                  ? t.shard_rows(shard_index)
                                  : t.rows();
    PSDB_ASSIGN_OR_RETURN(uint64_t held_rows,
                          CountRows(disk, by_name.at(name), table));
    if (held_rows != expected) {
      return absl::DataLossError(
          absl::StrCat(table, ": the manifest says ", expected,
                       " rows, the files hold ", held_rows));
    }
    counts.push_back(held_rows);
  }
  if (shard_rows != nullptr) *shard_rows = std::move(counts);
  return absl::OkStatus();
}

}  // namespace

absl::Status CheckRestoredShard(const std::string& db_dir,
                                const v1::Manifest& manifest, int shard_index,
                                absl::string_view checkpoint_dir,
                                const StoreOptions& options,
                                std::vector<uint64_t>* shard_rows) {
  const std::string where =
      absl::StrCat("checkpoint ", checkpoint_dir, " shard ",
                   manifest.shards(shard_index).shard_id());
  PSDB_RETURN_IF_ERROR(CheckShardFiles(
      *FileSystemOr(options.file_system), manifest.format_version(),
      manifest.shards(shard_index), db_dir, where));
  std::vector<std::pair<std::string, rocksdb::ColumnFamilyHandle*>> cfs;
  absl::StatusOr<std::unique_ptr<DiskTier>> disk =
      DiskTier::Open(db_dir, options, &cfs, /*read_only=*/true);
  if (!disk.ok()) {
    return absl::DataLossError(absl::StrCat(
        where, ": its files cannot be opened: ", disk.status().message()));
  }
  const absl::Status status =
      CheckOpen(disk->get(), cfs, manifest, shard_index, where, shard_rows);
  for (auto& [name, handle] : cfs) (*disk)->DestroyCf(handle);
  return status;
}

}  // namespace psdb::internal
