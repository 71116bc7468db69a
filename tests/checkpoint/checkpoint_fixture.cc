#include "tests/checkpoint/checkpoint_fixture.h"

#include <filesystem>
#include <memory>

#include "absl/strings/str_cat.h"
#include "manifest/manifest.h"
#include "rocksdb/db.h"
#include "rocksdb/file_system.h"
#include "store/row_codec.h"
#include "store/shard_files.h"
#include "util/status_macros.h"

namespace psdb::testing {

FixtureRow MakeRow(uint64_t key, int dim, int state_size) {
  FixtureRow row;
  row.header = RowHeader{static_cast<int64_t>(key), 2 * key, 3};
  for (int j = 0; j < dim; ++j) row.values.push_back(key + 0.25f * j);
  for (int j = 0; j < state_size; ++j) row.state.push_back(0.5f + j);
  return row;
}

absl::Status WriteCheckpoint(const std::string& dir,
                             const std::vector<FixtureTable>& tables,
                             int shards, int64_t step,
                             const std::map<std::pair<std::string, uint64_t>,
                                            std::string>& raw_overrides) {
  std::filesystem::create_directories(dir);
  v1::Manifest manifest;
  manifest.set_format_version(kManifestFormatVersion);
  manifest.set_checkpoint_id(std::filesystem::path(dir).filename().string());
  manifest.set_step(step);
  manifest.set_created_unix_micros(1700000000000000);
  std::vector<std::vector<uint64_t>> counts(tables.size(),
                                            std::vector<uint64_t>(shards, 0));
  for (int s = 0; s < shards; ++s) {
    v1::ShardManifest* sm = manifest.add_shards();
    sm->set_shard_id(s);
    sm->set_dir(ShardDirName(s));
    rocksdb::Options options;
    options.create_if_missing = true;
    rocksdb::DB* raw = nullptr;
    const std::string path = absl::StrCat(dir, "/", ShardDirName(s));
    rocksdb::Status st = rocksdb::DB::Open(options, path, &raw);
    if (!st.ok()) return absl::InternalError(st.ToString());
    std::unique_ptr<rocksdb::DB> db(raw);
    for (size_t t = 0; t < tables.size(); ++t) {
      rocksdb::ColumnFamilyHandle* cf = nullptr;
      st = db->CreateColumnFamily(rocksdb::ColumnFamilyOptions(),
                                  tables[t].spec.name, &cf);
      if (!st.ok()) return absl::InternalError(st.ToString());
      std::string value;
      for (const auto& [key, row] : tables[t].rows) {
        if (static_cast<int>(key % shards) != s) continue;
        EncodeRow(row.header, row.values, row.state, &value);
        auto it = raw_overrides.find({tables[t].spec.name, key});
        if (it != raw_overrides.end()) value = it->second;
        st = db->Put(rocksdb::WriteOptions(), cf, EncodeKey(key), value);
        if (!st.ok()) return absl::InternalError(st.ToString());
        ++counts[t][s];
      }
      st = db->Flush(rocksdb::FlushOptions(), cf);
      if (!st.ok()) return absl::InternalError(st.ToString());
      st = db->DestroyColumnFamilyHandle(cf);
      if (!st.ok()) return absl::InternalError(st.ToString());
    }
    st = db->Close();
    if (!st.ok()) return absl::InternalError(st.ToString());
    db.reset();
    PSDB_RETURN_IF_ERROR(
        RecordShardFiles(*rocksdb::FileSystem::Default(), path, {}, sm));
  }
  for (size_t t = 0; t < tables.size(); ++t) {
    v1::TableManifest* tm = manifest.add_tables();
    *tm->mutable_spec() = TableSpecToProto(tables[t].spec);
    tm->set_step(tables[t].step);
    uint64_t total = 0;
    for (uint64_t c : counts[t]) {
      tm->add_shard_rows(c);
      total += c;
    }
    tm->set_rows(total);
  }
  return WriteManifestAtomic(dir, manifest);
}

}  // namespace psdb::testing
