// Verify's ring ownership check (checkpoint/verify.h) on
// hand-written checkpoints: rows placed by key % 2 against the ring the
// manifest records, where exactly the keys the ring places elsewhere are
// reported; no check without a ring; a ring naming other servers refused.
#include "checkpoint/verify.h"

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "manifest/manifest.h"
#include "psdb/checkpoint_reader.h"
#include "shard/ring.h"
#include "tests/checkpoint/checkpoint_fixture.h"
#include "tests/testing/test_util.h"

namespace psdb::ckpt {
namespace {

using ::psdb::testing::FixtureTable;
using ::psdb::testing::MakeRow;
using ::psdb::testing::ScratchDir;
using ::testing::HasSubstr;

constexpr int kKeys = 40;

// Keys 0..39 of a dim-1 SGD table on 2 shards (key k on shard k % 2).
std::string WriteByModulo(const ScratchDir& dir) {
  const std::string ckpt = dir.Sub("ckpt-000000000003-000001");
  FixtureTable t;
  t.spec.name = "emb";
  t.spec.dim = 1;
  t.step = 3;
  for (uint64_t k = 0; k < kKeys; ++k) t.rows[k] = MakeRow(k, 1, 0);
  EXPECT_OK(testing::WriteCheckpoint(ckpt, {t}, /*shards=*/2, /*step=*/3));
  return ckpt;
}

void AddRing(const std::string& ckpt, std::vector<int> ids) {
  ASSERT_OK_AND_ASSIGN(v1::Manifest m, ReadManifest(ckpt));
  const RingOptions defaults;
  m.mutable_ring()->set_vnodes_per_server(defaults.vnodes_per_server);
  m.mutable_ring()->set_hash_seed(defaults.hash_seed);
  for (int id : ids) {
    m.mutable_ring()->add_server_ids(id);
    m.mutable_ring()->add_weights(1.0f);
  }
  ASSERT_OK(WriteManifestAtomic(ckpt, m));
}

TEST(RingCheckTest, ReportsExactlyTheKeysTheRingPlacesElsewhere) {
  ScratchDir dir;
  const std::string ckpt = WriteByModulo(dir);
  AddRing(ckpt, {0, 1});
  ASSERT_OK_AND_ASSIGN(Ring ring,
                       Ring::Create(RingOptions(), {{0, 1.0f}, {1, 1.0f}}));
  std::vector<std::string> want;
  for (uint64_t k = 0; k < kKeys; ++k) {
    const int owner = ring.Owner(k);
    if (owner == static_cast<int>(k % 2)) continue;
    want.push_back(absl::StrCat(ckpt, "/shard-", k % 2, ": table 'emb' key ", k,
                                ": in shard ", k % 2,
                                " but the ring places it on shard ", owner));
  }
  ASSERT_GT(want.size(), 0u);
  ASSERT_LT(want.size(), static_cast<size_t>(kKeys));

  ASSERT_OK_AND_ASSIGN(auto reader, CheckpointReader::Open(ckpt));
  ASSERT_OK_AND_ASSIGN(auto check, RingOwnershipCheck::Create(*reader));
  ASSERT_NE(check, nullptr);
  // Verify runs the ring check by itself when the manifest records a ring.
  ASSERT_OK_AND_ASSIGN(VerifyReport report, Verify(*reader));
  EXPECT_EQ(report.rows, static_cast<uint64_t>(kKeys));
  EXPECT_EQ(report.error_count, want.size());
  // Verify walks shard 0 then shard 1, each in key order.
  std::vector<std::string> sorted;
  for (int s = 0; s < 2; ++s) {
    for (const std::string& w : want) {
      if (w.find(absl::StrCat("/shard-", s, ":")) != std::string::npos) {
        sorted.push_back(w);
      }
    }
  }
  EXPECT_EQ(report.errors, sorted);
}

TEST(RingCheckTest, NoRingNoCheck) {
  ScratchDir dir;
  const std::string ckpt = WriteByModulo(dir);
  ASSERT_OK_AND_ASSIGN(auto reader, CheckpointReader::Open(ckpt));
  ASSERT_OK_AND_ASSIGN(auto check, RingOwnershipCheck::Create(*reader));
  EXPECT_EQ(check, nullptr);
}

TEST(RingCheckTest, RingOfOtherServersIsRefused) {
  ScratchDir dir;
  const std::string ckpt = WriteByModulo(dir);
  AddRing(ckpt, {0, 5});
  ASSERT_OK_AND_ASSIGN(auto reader, CheckpointReader::Open(ckpt));
  auto check = RingOwnershipCheck::Create(*reader);
  EXPECT_THAT(check, StatusIs(absl::StatusCode::kDataLoss));
  EXPECT_THAT(std::string(check.status().message()),
              HasSubstr("the ring's servers are not the checkpoint's shards"));
}

}  // namespace
}  // namespace psdb::ckpt
