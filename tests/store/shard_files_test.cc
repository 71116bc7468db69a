// A checkpoint lists its shards' files with their sizes and checksums
// (store/shard_files.h), and every reader checks them before RocksDB parses
// a byte: ps-dump's reader, a restore, a serving replica. The sweep below
// damages, in turn, every byte RocksDB parses when it opens each SST file
// of a real checkpoint (and every 8th byte of the rest); before the check,
// one of them (a byte of an SST's properties block) aborted the process
// inside RocksDB (tests/fuzz/README.md).
#include "store/shard_files.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "checkpoint/verify.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "manifest/manifest.h"
#include "psdb/checkpoint_reader.h"
#include "psdb/store.h"
#include "rocksdb/file_system.h"
#include "tests/store/store_test_util.h"
#include "tests/testing/test_util.h"

namespace psdb {
namespace {

namespace fs = std::filesystem;
using ::psdb::testing::MakeSpec;
using ::psdb::testing::ScratchDir;
using ::psdb::testing::SmallOptions;
using ::testing::HasSubstr;

std::string ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

void WriteAll(const std::string& path, const std::string& data) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(data.data(), static_cast<std::streamsize>(data.size()));
}

// Sets the byte at `offset` of the file at `path` in place.
void WriteByte(const std::string& path, size_t offset, char byte) {
  std::fstream out(path, std::ios::binary | std::ios::in | std::ios::out);
  out.seekp(static_cast<std::streamoff>(offset));
  out.put(byte);
}

class ShardFilesTest : public ::testing::Test {
 protected:
  // A checkpoint of a store with one table of 200 rows (flushed to one SST
  // file by the checkpoint; the metadata is in others), under
  // scratch_/ckpt.
  void SetUp() override {
    auto store = Store::Open(SmallOptions(), scratch_.Sub("store"));
    ASSERT_TRUE(store.ok()) << store.status();
    for (const char* name : {"emb"}) {
      ASSERT_TRUE((*store)->CreateTable(MakeSpec(name, 4)).ok());
      std::vector<uint64_t> keys;
      for (uint64_t k = 1; k <= 200; ++k) keys.push_back(k);
      std::vector<float> grads(keys.size() * 4, -1.0f);
      ASSERT_TRUE((*store)->Push(name, keys, grads).ok());
    }
    auto info = (*store)->Checkpoint(scratch_.Sub("ckpt"));
    ASSERT_TRUE(info.ok()) << info.status();
    ckpt_ = info->path;
    shard_ = ckpt_ + "/shard-0";
  }

  std::vector<std::string> Ssts() const {
    std::vector<std::string> out;
    for (const auto& e : fs::directory_iterator(shard_)) {
      if (e.path().extension() == ".sst") out.push_back(e.path().string());
    }
    std::sort(out.begin(), out.end());
    return out;
  }

  ScratchDir scratch_;
  std::string ckpt_;
  std::string shard_;
};

TEST(ShardFileChecksumTest, IsTheStandardCrc32cInHex) {
  ScratchDir dir;
  const std::string path = dir.Sub("f");
  WriteAll(path, "123456789");  // CRC-32C's check value: 0xe3069283
  auto f = ReadShardFile(*rocksdb::FileSystem::Default(), path);
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_EQ(f->size(), 9u);
  EXPECT_EQ(f->crc32c(), "e3069283");
}

TEST_F(ShardFilesTest, ManifestListsEveryFileWithItsSizeAndChecksum) {
  auto m = ReadManifest(ckpt_);
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(m->format_version(), 2u);
  ASSERT_EQ(m->shards_size(), 1);
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(shard_)) {
    if (e.is_regular_file()) names.push_back(e.path().filename().string());
  }
  std::sort(names.begin(), names.end());
  ASSERT_EQ(m->shards(0).files_size(), static_cast<int>(names.size()));
  EXPECT_GE(Ssts().size(), 2u);  // the rows' and the metadata's
  for (int i = 0; i < m->shards(0).files_size(); ++i) {
    const v1::ShardFile& listed = m->shards(0).files(i);
    EXPECT_EQ(listed.name(), names[i]);
    auto read = ReadShardFile(*rocksdb::FileSystem::Default(),
                              shard_ + "/" + listed.name());
    ASSERT_TRUE(read.ok()) << read.status();
    EXPECT_EQ(listed.size(), read->size()) << listed.name();
    EXPECT_EQ(listed.crc32c(), read->crc32c()) << listed.name();
  }
}

// Every byte of each SST's last 2 KiB (its index, properties and
// metaindex blocks and footer: what RocksDB parses at open; the byte that
// aborted it was 170 bytes from the end) and every 8th byte before.
TEST_F(ShardFilesTest, DamagedBytesOfEverySstAreRefusedNamingTheFile) {
  int tried = 0;
  for (const std::string& sst : Ssts()) {
    const std::string name = fs::path(sst).filename().string();
    const std::string good = ReadAll(sst);
    const size_t tail = good.size() > 2048 ? good.size() - 2048 : 0;
    for (size_t i = 0; i < good.size(); i += i < tail ? 8 : 1) {
      WriteByte(sst, i, static_cast<char>(good[i] ^ 0xff));
      auto reader = ckpt::CheckpointReader::Open(ckpt_);
      WriteByte(sst, i, good[i]);
      ASSERT_FALSE(reader.ok()) << name << " byte " << i;
      EXPECT_EQ(reader.status().code(), absl::StatusCode::kDataLoss);
      EXPECT_THAT(reader.status().message(),
                  HasSubstr(absl::StrCat("file '", name, "': checksum")))
          << " byte " << i;
      ++tried;
    }
  }
  EXPECT_GT(tried, 1000);
  std::printf("damaged bytes tried: %d\n", tried);
  auto reader = ckpt::CheckpointReader::Open(ckpt_);
  ASSERT_TRUE(reader.ok()) << reader.status();
  auto report = ckpt::Verify(**reader);
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_TRUE(report->ok());
}

TEST_F(ShardFilesTest, TruncatedMissingAndUnlistedFilesAreRefused) {
  const std::string sst = Ssts().front();
  const std::string name = fs::path(sst).filename().string();
  const std::string good = ReadAll(sst);

  WriteAll(sst, good.substr(0, good.size() - 1));
  auto reader = ckpt::CheckpointReader::Open(ckpt_);
  EXPECT_EQ(reader.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(
      reader.status().message(),
      HasSubstr(absl::StrCat("shard 0: file '", name, "': ", good.size() - 1,
                             " bytes, the manifest says ", good.size())));

  fs::remove(sst);
  reader = ckpt::CheckpointReader::Open(ckpt_);
  EXPECT_EQ(reader.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(reader.status().message(),
              HasSubstr(absl::StrCat("file '", name, "': missing")));

  WriteAll(sst, good);
  WriteAll(shard_ + "/999999.sst", good);
  reader = ckpt::CheckpointReader::Open(ckpt_);
  EXPECT_EQ(reader.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(reader.status().message(), HasSubstr("file '999999.sst' is in"));
  EXPECT_THAT(reader.status().message(), HasSubstr("but not in the manifest"));

  // A file RocksDB does not read as data may be there.
  fs::remove(shard_ + "/999999.sst");
  WriteAll(shard_ + "/LOG", "a log line\n");
  EXPECT_TRUE(ckpt::CheckpointReader::Open(ckpt_).ok());
}

TEST_F(ShardFilesTest, TheListItselfIsChecked) {
  auto m = ReadManifest(ckpt_);
  ASSERT_TRUE(m.ok()) << m.status();
  const v1::Manifest good = *m;

  m->mutable_shards(0)->clear_files();
  ASSERT_TRUE(WriteManifestAtomic(ckpt_, *m).ok());
  auto reader = ckpt::CheckpointReader::Open(ckpt_);
  EXPECT_EQ(reader.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(reader.status().message(),
              HasSubstr("shard 0: the manifest lists no files for the shard"));

  for (const char* name : {"../MANIFEST.json", "", ".."}) {
    *m = good;
    m->mutable_shards(0)->mutable_files(0)->set_name(name);
    ASSERT_TRUE(WriteManifestAtomic(ckpt_, *m).ok());
    reader = ckpt::CheckpointReader::Open(ckpt_);
    EXPECT_EQ(reader.status().code(), absl::StatusCode::kDataLoss) << name;
    EXPECT_THAT(reader.status().message(),
                HasSubstr("not a plain file name or named twice"));
  }
  *m = good;
  *m->mutable_shards(0)->add_files() = good.shards(0).files(0);
  ASSERT_TRUE(WriteManifestAtomic(ckpt_, *m).ok());
  EXPECT_EQ(ckpt::CheckpointReader::Open(ckpt_).status().code(),
            absl::StatusCode::kDataLoss);

  *m = good;
  m->mutable_shards(0)->mutable_files(0)->set_crc32c("00000000");
  ASSERT_TRUE(WriteManifestAtomic(ckpt_, *m).ok());
  reader = ckpt::CheckpointReader::Open(ckpt_);
  EXPECT_THAT(reader.status().message(),
              HasSubstr(", the manifest says 00000000"));
}

TEST_F(ShardFilesTest, AFormatOneManifestWithoutFilesIsReadUnchecked) {
  auto m = ReadManifest(ckpt_);
  ASSERT_TRUE(m.ok()) << m.status();
  m->set_format_version(1);
  m->mutable_shards(0)->clear_files();
  ASSERT_TRUE(WriteManifestAtomic(ckpt_, *m).ok());
  auto reader = ckpt::CheckpointReader::Open(ckpt_);
  ASSERT_TRUE(reader.ok()) << reader.status();
  auto report = ckpt::Verify(**reader);
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_TRUE(report->ok());
}

TEST_F(ShardFilesTest, RestoreAndServingRefuseADamagedFile) {
  const std::string sst = Ssts().front();
  const std::string name = fs::path(sst).filename().string();
  std::string bad = ReadAll(sst);
  bad[bad.size() / 2] ^= 0x01;
  WriteAll(sst, bad);

  StoreOptions options = SmallOptions();
  options.restore_from = ckpt_;
  const std::string target = scratch_.Sub("restored");
  auto restored = Store::Open(options, target);
  EXPECT_EQ(restored.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(restored.status().message(), HasSubstr("restore refused"));
  EXPECT_THAT(restored.status().message(),
              HasSubstr(absl::StrCat("file '", name, "': checksum")));
  EXPECT_FALSE(fs::exists(Store::DbPath(target)));

  auto serving = Store::OpenCheckpoint(SmallOptions(), ckpt_, 0);
  EXPECT_EQ(serving.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(serving.status().message(),
              HasSubstr(absl::StrCat("file '", name, "': checksum")));
}

}  // namespace
}  // namespace psdb
