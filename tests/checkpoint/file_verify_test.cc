// checkpoint/file_verify.h over checkpoints of a real Store: each file is
// read once, what each file is (column family, sequence numbers,
// deletions), rows kept for a replica's delta, and the row checks.
#include "checkpoint/file_verify.h"

#include <memory>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "manifest/manifest.h"
#include "psdb/store.h"
#include "store/file_io_rocksdb.h"
#include "tests/testing/test_util.h"
#include "util/status_macros.h"

namespace psdb::ckpt {
namespace {

using ::psdb::testing::ScratchDir;
using ::testing::HasSubstr;

constexpr int kDim = 4;

class FileVerifyTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_OK_AND_ASSIGN(store_, Store::Open({}, dir_.Sub("train")));
    TableSpec spec;
    spec.name = "emb";
    spec.dim = kDim;
    ASSERT_OK(store_->CreateTable(spec));
  }

  // Pushes keys [first, first + n) at `step` and checkpoints.
  std::string PushAndCheckpoint(uint64_t first, uint64_t n, int64_t step) {
    std::vector<uint64_t> keys;
    for (uint64_t k = first; k < first + n; ++k) keys.push_back(k);
    const std::vector<float> grads(keys.size() * kDim, 0.25f);
    EXPECT_OK(store_->Push("emb", keys, grads, {.step = step}));
    absl::StatusOr<CheckpointInfo> info = store_->Checkpoint(dir_.Sub("ckpt"));
    EXPECT_OK(info.status());
    return info->path;
  }

  absl::Status VerifyShard(const std::string& ckpt,
                           const FileVerifyOptions& options,
                           FileVerifyReport* report) {
    PSDB_ASSIGN_OR_RETURN(v1::Manifest m, ReadManifest(ckpt));
    return VerifyShardFiles(fs_, m, 0, ckpt, options, &verified_, report);
  }

  ScratchDir dir_;
  std::unique_ptr<Store> store_;
  std::shared_ptr<rocksdb::FileSystem> fs_ = internal::FileSystemOr(nullptr);
  VerifiedFiles verified_;
};

TEST_F(FileVerifyTest, ReadsEachFileOnceAndKnowsWhatItIs) {
  const std::string first = PushAndCheckpoint(0, 100, 1);
  ASSERT_OK_AND_ASSIGN(v1::Manifest m1, ReadManifest(first));
  FileVerifyReport report;
  ASSERT_OK(VerifyShard(first, {}, &report));
  EXPECT_EQ(report.files_verified,
            static_cast<uint64_t>(m1.shards(0).files_size()));
  EXPECT_EQ(report.files_reused, 0u);
  EXPECT_EQ(report.rows_verified, 100u);
  EXPECT_EQ(report.ids.size(), static_cast<size_t>(m1.shards(0).files_size()));
  EXPECT_EQ(verified_.size(), report.ids.size());
  // The table's SST: its column family, sequence numbers, no deletions.
  int table_ssts = 0;
  for (const FileId& id : report.ids) {
    const FileFacts* facts = verified_.Find(id);
    ASSERT_NE(facts, nullptr);
    if (!facts->sst || facts->column_family != "emb") continue;
    ++table_ssts;
    ASSERT_TRUE(facts->seqnos.has_value()) << facts->name;
    EXPECT_LE(facts->seqnos->min, facts->seqnos->max);
    EXPECT_EQ(facts->deletions, 0u);
  }
  EXPECT_EQ(table_ssts, 1);

  // The same checkpoint again: nothing is read.
  FileVerifyReport again;
  ASSERT_OK(VerifyShard(first, {}, &again));
  EXPECT_EQ(again.files_verified, 0u);
  EXPECT_EQ(again.bytes_verified, 0u);
  EXPECT_EQ(again.rows_verified, 0u);
  EXPECT_EQ(again.files_reused, report.files_verified);

  // The next one: only its new files, whose rows are newer.
  const std::string second = PushAndCheckpoint(40, 10, 2);
  FileVerifyReport next;
  FileVerifyOptions keep;
  keep.keep_rows = true;
  keep.max_row_bytes = 1 << 20;
  ASSERT_OK(VerifyShard(second, keep, &next));
  EXPECT_EQ(next.rows_verified, 10u);
  EXPECT_GT(next.files_reused, 0u);
  ASSERT_TRUE(next.rows_complete);
  ASSERT_EQ(next.rows.size(), 1u);
  const FileRows& rows = *next.rows[0];
  EXPECT_EQ(rows.table, "emb");
  EXPECT_EQ(rows.keys,
            (std::vector<uint64_t>{40, 41, 42, 43, 44, 45, 46, 47, 48, 49}));
  EXPECT_EQ(rows.rows.size(), 10u);
  EXPECT_EQ(rows.rows.headers[0].last_update_step, 2);
  const FileFacts* old_facts = nullptr;
  for (const FileId& id : report.ids) {
    const FileFacts* f = verified_.Find(id);
    if (f != nullptr && f->column_family == "emb") old_facts = f;
  }
  const FileFacts* new_facts = verified_.Find(rows.id);
  ASSERT_NE(old_facts, nullptr);
  ASSERT_NE(new_facts, nullptr);
  EXPECT_GT(new_facts->seqnos->min, old_facts->seqnos->max);
}

TEST_F(FileVerifyTest, RowsPastTheLimitAreCheckedNotKept) {
  const std::string first = PushAndCheckpoint(0, 100, 1);
  FileVerifyReport report;
  FileVerifyOptions keep;
  keep.keep_rows = true;
  keep.max_row_bytes = 1000;  // a few rows
  ASSERT_OK(VerifyShard(first, keep, &report));
  EXPECT_EQ(report.rows_verified, 100u);
  EXPECT_FALSE(report.rows_complete);
  EXPECT_TRUE(report.rows.empty());
}

TEST_F(FileVerifyTest, ARowOnAnotherShardsPartOfTheRingIsRefused) {
  const std::string first = PushAndCheckpoint(0, 100, 1);
  ASSERT_OK_AND_ASSIGN(Ring ring, Ring::Create({}, {{.id = 0}, {.id = 1}}));
  FileVerifyOptions options;
  options.ring = &ring;
  FileVerifyReport report;
  const absl::Status s = VerifyShard(first, options, &report);
  EXPECT_THAT(s, StatusIs(absl::StatusCode::kDataLoss));
  EXPECT_THAT(s.message(), HasSubstr("table 'emb' key "));
  EXPECT_THAT(s.message(), HasSubstr("the ring places it on shard 1"));
}

TEST_F(FileVerifyTest, AManifestWithoutFilesIsVerifiedWholeInstead) {
  const std::string first = PushAndCheckpoint(0, 10, 1);
  ASSERT_OK_AND_ASSIGN(v1::Manifest m, ReadManifest(first));
  m.set_format_version(1);
  FileVerifyReport report;
  EXPECT_THAT(VerifyShardFiles(fs_, m, 0, first, {}, &verified_, &report),
              StatusIs(absl::StatusCode::kFailedPrecondition));
}

}  // namespace
}  // namespace psdb::ckpt
