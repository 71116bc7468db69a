#include "store/shard_files.h"

#include <algorithm>
#include <memory>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "manifest/manifest.h"
#include "rocksdb/file_checksum.h"
#include "rocksdb/file_system.h"

namespace psdb {
namespace {

constexpr size_t kChunk = 1 << 20;

// A name RocksDB reads as data when it opens the directory.
bool IsRocksDataFile(absl::string_view name) {
  return absl::EndsWith(name, ".sst") || absl::EndsWith(name, ".log") ||
         absl::EndsWith(name, ".blob") || absl::StartsWith(name, "MANIFEST-");
}

bool IsPlainFileName(absl::string_view name) {
  return !name.empty() && name != "." && name != ".." &&
         !absl::StrContains(name, '/') && !absl::StrContains(name, '\0');
}

}  // namespace

std::string ShardFileChecksumHex(absl::string_view raw) {
  return absl::BytesToHexString(raw);
}

absl::StatusOr<v1::ShardFile> ReadShardFile(rocksdb::FileSystem& fs,
                                            const std::string& path) {
  std::unique_ptr<rocksdb::FSSequentialFile> file;
  rocksdb::IOStatus s =
      fs.NewSequentialFile(path, rocksdb::FileOptions(), &file, nullptr);
  if (!s.ok()) {
    return absl::DataLossError(
        absl::StrCat("cannot open ", path, ": ", s.ToString()));
  }
  std::unique_ptr<rocksdb::FileChecksumGenerator> crc =
      rocksdb::GetFileChecksumGenCrc32cFactory()->CreateFileChecksumGenerator(
          rocksdb::FileChecksumGenContext());
  std::unique_ptr<char[]> scratch(new char[kChunk]);
  uint64_t size = 0;
  for (;;) {
    rocksdb::Slice got;
    s = file->Read(kChunk, rocksdb::IOOptions(), &got, scratch.get(), nullptr);
    if (!s.ok()) {
      return absl::DataLossError(absl::StrCat("cannot read ", path, " at byte ",
                                              size, ": ", s.ToString()));
    }
    if (got.empty()) break;
    crc->Update(got.data(), got.size());
    size += got.size();
  }
  crc->Finalize();
  v1::ShardFile out;
  out.set_size(size);
  out.set_crc32c(ShardFileChecksumHex(crc->GetChecksum()));
  return out;
}

absl::Status RecordShardFiles(
    rocksdb::FileSystem& fs, const std::string& dir,
    const absl::flat_hash_map<std::string, v1::ShardFile>& known,
    v1::ShardManifest* shard) {
  std::vector<std::string> names;
  rocksdb::IOStatus s =
      fs.GetChildren(dir, rocksdb::IOOptions(), &names, nullptr);
  if (!s.ok()) {
    return absl::InternalError(
        absl::StrCat("cannot list ", dir, ": ", s.ToString()));
  }
  std::sort(names.begin(), names.end());
  shard->clear_files();
  for (const std::string& name : names) {
    if (name == "." || name == "..") continue;
    const std::string path = absl::StrCat(dir, "/", name);
    bool is_dir = false;
    s = fs.IsDirectory(path, rocksdb::IOOptions(), &is_dir, nullptr);
    if (!s.ok()) {
      return absl::InternalError(
          absl::StrCat("cannot stat ", path, ": ", s.ToString()));
    }
    if (is_dir) continue;
    uint64_t size = 0;
    s = fs.GetFileSize(path, rocksdb::IOOptions(), &size, nullptr);
    if (!s.ok()) {
      return absl::InternalError(
          absl::StrCat("cannot stat ", path, ": ", s.ToString()));
    }
    v1::ShardFile* file = shard->add_files();
    auto it = known.find(name);
    if (it != known.end() && it->second.size() == size) {
      *file = it->second;
    } else {
      absl::StatusOr<v1::ShardFile> read = ReadShardFile(fs, path);
      if (!read.ok()) return read.status();
      *file = *std::move(read);
    }
    file->set_name(name);
  }
  return absl::OkStatus();
}

void AppendShardFiles(absl::Span<const Store::ShardCheckpoint::File> files,
                      google::protobuf::RepeatedPtrField<v1::ShardFile>* out) {
  for (const Store::ShardCheckpoint::File& f : files) {
    v1::ShardFile* file = out->Add();
    file->set_name(f.name);
    file->set_size(f.size);
    file->set_crc32c(f.crc32c);
    file->set_column_family(f.column_family);
    if (f.seqnos.has_value()) {
      file->set_smallest_seqno(f.seqnos->first);
      file->set_largest_seqno(f.seqnos->second);
    }
  }
}

absl::Status CheckShardFiles(
    rocksdb::FileSystem& fs, uint32_t format_version,
    const v1::ShardManifest& shard, const std::string& dir,
    absl::string_view where,
    absl::FunctionRef<bool(const v1::ShardFile& file, const std::string& path)>
        known) {
  if (format_version < kManifestShardFilesVersion) return absl::OkStatus();
  if (shard.files().empty()) {
    return absl::DataLossError(
        absl::StrCat(where, ": the manifest lists no files for the shard"));
  }
  absl::flat_hash_set<std::string> listed;
  for (const v1::ShardFile& f : shard.files()) {
    if (!IsPlainFileName(f.name()) || !listed.insert(f.name()).second) {
      return absl::DataLossError(absl::StrCat(
          where, ": the manifest lists file '", absl::CHexEscape(f.name()),
          "', not a plain file name or named twice"));
    }
  }
  std::vector<std::string> present;
  rocksdb::IOStatus s =
      fs.GetChildren(dir, rocksdb::IOOptions(), &present, nullptr);
  if (!s.ok()) {
    return absl::DataLossError(
        absl::StrCat(where, ": cannot list ", dir, ": ", s.ToString()));
  }
  for (const std::string& name : present) {
    if (IsRocksDataFile(name) && !listed.contains(name)) {
      return absl::DataLossError(absl::StrCat(where, ": file '", name,
                                              "' is in ", dir,
                                              " but not in the manifest"));
    }
  }
  for (const v1::ShardFile& f : shard.files()) {
    const std::string path = absl::StrCat(dir, "/", f.name());
    const auto fail = [&](absl::string_view what) {
      return absl::DataLossError(
          absl::StrCat(where, ": file '", f.name(), "': ", what));
    };
    uint64_t size = 0;
    s = fs.GetFileSize(path, rocksdb::IOOptions(), &size, nullptr);
    if (!s.ok()) return fail(absl::StrCat("missing (", s.ToString(), ")"));
    if (size != f.size()) {
      return fail(absl::StrCat(size, " bytes, the manifest says ", f.size()));
    }
    if (known(f, path)) continue;
    absl::StatusOr<v1::ShardFile> read = ReadShardFile(fs, path);
    if (!read.ok()) return fail(read.status().message());
    if (read->size() != f.size()) {
      return fail(absl::StrCat(read->size(), " bytes read, the manifest says ",
                               f.size()));
    }
    if (read->crc32c() != f.crc32c()) {
      return fail(absl::StrCat("checksum ", read->crc32c(),
                               ", the manifest says ", f.crc32c()));
    }
  }
  return absl::OkStatus();
}

}  // namespace psdb
