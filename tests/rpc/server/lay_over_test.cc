// rpc/server/lay_over.h on hand-made file facts: which files a replica
// reads, skips or cannot place, and the delta built from them.
#include "rpc/server/lay_over.h"

#include <memory>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/test_util.h"

namespace psdb::rpc {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::UnorderedElementsAre;

// A table SST with inode `inode` and sequence numbers [min, max].
TableFile File(uint64_t inode, uint64_t min, uint64_t max) {
  TableFile f;
  f.id.inode = inode;
  f.facts.name = absl::StrCat(inode, ".sst");
  f.facts.sst = true;
  f.facts.column_family = "emb";
  f.facts.seqnos = ckpt::SeqnoRange{min, max};
  return f;
}

// A base holding files 1 and 2, every row up to seqno 100 served.
ServingSnapshot::Base Base100() {
  return BaseOf("ckpt-a", {File(1, 1, 60), File(2, 61, 100)});
}

std::vector<std::string> Names(const std::vector<const TableFile*>& files) {
  std::vector<std::string> out;
  for (const TableFile* f : files) out.push_back(f->facts.name);
  return out;
}

MATCHER_P(Refused, why, "") {
  return arg.code() == absl::StatusCode::kFailedPrecondition &&
         absl::StrContains(arg.message(), why);
}

TEST(LayOverTest, TheBaseIsItsFilesAndTheirLargestSequenceNumber) {
  const ServingSnapshot::Base base = Base100();
  EXPECT_EQ(base.files.size(), 2u);
  ASSERT_TRUE(base.seen_max.has_value());
  EXPECT_EQ(*base.seen_max, 100u);
  TableFile unlisted = File(3, 0, 0);
  unlisted.facts.seqnos.reset();
  EXPECT_FALSE(BaseOf("ckpt-b", {File(1, 1, 60), unlisted}).seen_max);
}

TEST(LayOverTest, NewerFilesAreReadOldestFirstAndCompactedOnesSkipped) {
  // 1 stays; 2 was compacted (with 1's rows) into 5; 3 and 4 are new.
  const std::vector<TableFile> files = {File(1, 1, 60), File(4, 131, 150),
                                        File(3, 101, 130), File(5, 30, 100)};
  ASSERT_OK_AND_ASSIGN(LayPlan plan, PlanLayOver(Base100(), files));
  EXPECT_THAT(Names(plan.fresh), ElementsAre("3.sst", "4.sst"));
  EXPECT_THAT(plan.skip, UnorderedElementsAre("1.sst", "5.sst"));
  EXPECT_EQ(plan.seen_max, 150u);
}

TEST(LayOverTest, FilesItCannotPlaceRefuseTheDelta) {
  auto refused = [](std::vector<TableFile> files) {
    return PlanLayOver(Base100(), files).status();
  };
  // Rows on both sides of what is served.
  EXPECT_THAT(refused({File(1, 1, 60), File(6, 90, 120)}),
              Refused("older and newer"));
  // Rows compacted into the last level: their age is lost.
  EXPECT_THAT(refused({File(7, 0, 0)}), Refused("last level"));
  // New files whose rows interleave.
  EXPECT_THAT(refused({File(8, 101, 140), File(9, 120, 160)}),
              Refused("interleave"));
  // A file the manifest lists no sequence numbers for.
  TableFile unlisted = File(10, 0, 0);
  unlisted.facts.seqnos.reset();
  EXPECT_THAT(refused({unlisted}), Refused("no sequence numbers"));
  // A base whose own files list none.
  ServingSnapshot::Base unknown = Base100();
  unknown.seen_max.reset();
  EXPECT_THAT(PlanLayOver(unknown, {File(1, 1, 60)}).status(),
              StatusIs(absl::StatusCode::kFailedPrecondition));
}

// Rows of `keys` (dim 1, value = key * 10 + version) in a file `inode`.
ckpt::FileRows Rows(uint64_t inode, std::vector<uint64_t> keys, int version) {
  ckpt::FileRows rows;
  rows.id.inode = inode;
  rows.table = "emb";
  rows.keys = keys;
  rows.rows.Resize(1, 0, keys.size());
  for (size_t i = 0; i < keys.size(); ++i) {
    rows.rows.values[i] = static_cast<float>(keys[i] * 10 + version);
  }
  return rows;
}

float Value(const DeltaRows& delta, uint64_t key) {
  size_t row = 0;
  const ckpt::FileRows* file = delta.Find("emb", key, &row);
  return file == nullptr ? -1 : file->rows.values[row];
}

TEST(LayOverTest, TheDeltaIsTheOldRowsUnderTheFreshOnes) {
  const std::vector<TableFile> files = {File(1, 1, 60), File(2, 61, 100),
                                        File(3, 101, 130), File(4, 131, 150)};
  ASSERT_OK_AND_ASSIGN(LayPlan plan, PlanLayOver(Base100(), files));
  ckpt::VerifiedFiles verified;
  for (const TableFile& f : files) {
    ckpt::FileFacts facts = f.facts;
    facts.deletions = 0;
    verified.Insert(f.id, facts);
  }
  ckpt::FileVerifyReport checked;
  checked.rows = {std::make_shared<ckpt::FileRows>(Rows(4, {7, 8}, 4)),
                  std::make_shared<ckpt::FileRows>(Rows(3, {7, 9}, 3))};
  const DeltaRows old(
      {std::make_shared<const ckpt::FileRows>(Rows(99, {7, 11}, 1))});
  ASSERT_OK_AND_ASSIGN(std::shared_ptr<const DeltaRows> delta,
                       LayOver(plan, checked, verified, &old, 1 << 20));
  EXPECT_EQ(Value(*delta, 7), 74);  // the newest file's
  EXPECT_EQ(Value(*delta, 8), 84);
  EXPECT_EQ(Value(*delta, 9), 93);
  EXPECT_EQ(Value(*delta, 11), 111);  // from the old delta
  EXPECT_EQ(Value(*delta, 12), -1);   // not in the delta: the base's
  EXPECT_EQ(delta->rows(), 4u);

  // Refused: a fresh file deletes rows; rows not all kept; too many bytes.
  ckpt::FileFacts deleting = files[3].facts;
  deleting.deletions = 2;
  ckpt::VerifiedFiles with_deletions = verified;
  with_deletions.Insert(files[3].id, deleting);
  EXPECT_THAT(LayOver(plan, checked, with_deletions, &old, 1 << 20).status(),
              Refused("deletes rows"));
  ckpt::FileVerifyReport partial = checked;
  partial.rows_complete = false;
  EXPECT_THAT(LayOver(plan, partial, verified, &old, 1 << 20).status(),
              StatusIs(absl::StatusCode::kFailedPrecondition));
  EXPECT_THAT(LayOver(plan, checked, verified, &old, 16).status(),
              Refused("max_delta_bytes"));
}

}  // namespace
}  // namespace psdb::rpc
