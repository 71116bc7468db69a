// The properties a reader checks when asking "does sharding hold at scale",
// at the sizes of the issue: 10M random keys on 10 and on 1,000 servers with
// 256 vnodes each.
//  - Balance: the busiest server holds <= 1.1x the mean.
//  - Adding one server to N moves between 0.8/(N+1) and 1.2/(N+1) of the
//    keys, and only onto the new server.
//  - Removing one server moves exactly that server's keys.
//  - Weights: a weight-2 server gets ~2x the keys of a weight-1 server.
// Each key is hashed once; each configuration's owners are computed once.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "shard/ring.h"
#include "tests/testing/test_util.h"

#define XXH_INLINE_ALL
#include <xxhash.h>

namespace psdb {
namespace {

constexpr size_t kKeys = 10'000'000;

// Ring positions of kKeys random keys (all rings here share the seed).
// XXH3 is inlined here, so hashing runs at this file's -O2 rather than the
// Debug build's -O0 of util/; a sample checks it is exactly Ring::KeyHash.
std::vector<uint64_t> RandomKeyHashes() {
  std::mt19937_64 rng(20261121);
  std::vector<uint64_t> hashes(kKeys);
  std::vector<uint64_t> sample;
  for (size_t i = 0; i < kKeys; ++i) {
    const uint64_t key = rng();
    unsigned char bytes[8];
    for (int b = 0; b < 8; ++b)
      bytes[b] = static_cast<unsigned char>(key >> (8 * b));
    hashes[i] = XXH3_64bits_withSeed(bytes, sizeof(bytes), kDefaultRingSeed);
    if (i % 100'000 == 0) sample.push_back(key);
  }
  const Ring ring;
  for (size_t s = 0; s < sample.size(); ++s) {
    EXPECT_EQ(hashes[s * 100'000], ring.KeyHash(sample[s]));
  }
  return hashes;
}

Ring MakeRing(const std::vector<RingMember>& members) {
  return Ring::Create(RingOptions(), members).value();
}

std::vector<RingMember> Members(int n) {
  std::vector<RingMember> members;
  for (int i = 0; i < n; ++i) members.push_back({i, 1.0f});
  return members;
}

// Owner id of every key (ids here are < 65536).
std::vector<uint16_t> Owners(const Ring& ring,
                             const std::vector<uint64_t>& hashes) {
  std::vector<uint32_t> indices(hashes.size());
  ring.OwnerIndicesOfHashes(hashes, absl::MakeSpan(indices));
  std::vector<uint16_t> owners(hashes.size());
  for (size_t i = 0; i < hashes.size(); ++i) {
    owners[i] = static_cast<uint16_t>(ring.server_id(indices[i]));
  }
  return owners;
}

std::vector<size_t> Counts(const std::vector<uint16_t>& owners, size_t max_id) {
  std::vector<size_t> counts(max_id + 1, 0);
  for (uint16_t o : owners) ++counts[o];
  return counts;
}

void Report(const std::string& name, double value) {
  ::testing::Test::RecordProperty(name, absl::StrFormat("%.4f", value));
  std::printf("%s = %.4f\n", name.c_str(), value);
}

// Balance, add-one and remove-one on n servers of weight 1.
void CheckScale(int n) {
  const std::vector<uint64_t> hashes = RandomKeyHashes();
  const std::string tag = absl::StrCat(n, "_servers");

  std::vector<RingMember> members = Members(n);
  const std::vector<uint16_t> base = Owners(MakeRing(members), hashes);
  const std::vector<size_t> counts = Counts(base, n);
  const double mean = static_cast<double>(kKeys) / n;
  const double busiest = *std::max_element(counts.begin(), counts.end()) / mean;
  Report("busiest_over_mean_" + tag, busiest);
  EXPECT_LE(busiest, 1.1);

  // Add server n.
  {
    members.push_back({n, 1.0f});
    const std::vector<uint16_t> added = Owners(MakeRing(members), hashes);
    members.pop_back();
    size_t moved = 0;
    size_t moved_elsewhere = 0;
    for (size_t i = 0; i < kKeys; ++i) {
      if (added[i] != base[i]) {
        ++moved;
        moved_elsewhere += added[i] != n;
      }
    }
    const double share = static_cast<double>(moved) / kKeys * (n + 1);
    Report("add_one_moved_times_n_plus_1_" + tag, share);
    EXPECT_GE(share, 0.8);
    EXPECT_LE(share, 1.2);
    EXPECT_EQ(moved_elsewhere, 0u) << "keys moved between old servers";
  }

  // Remove server n / 2.
  {
    const ServerId gone = n / 2;
    members.erase(members.begin() + gone);
    const std::vector<uint16_t> removed = Owners(MakeRing(members), hashes);
    size_t moved = 0;
    size_t wrongly_moved = 0;
    for (size_t i = 0; i < kKeys; ++i) {
      if (removed[i] != base[i]) {
        ++moved;
        wrongly_moved += base[i] != gone;
      }
    }
    Report("remove_one_moved_times_n_" + tag,
           static_cast<double>(moved) / kKeys * n);
    EXPECT_EQ(wrongly_moved, 0u) << "keys of surviving servers moved";
    EXPECT_EQ(moved, counts[gone]);  // Every key of the removed server moved.
  }
}

TEST(RingPropertyTest, TenServers) { CheckScale(10); }

TEST(RingPropertyTest, ThousandServers) { CheckScale(1000); }

TEST(RingPropertyTest, WeightTwoServerGetsTwiceTheKeys) {
  const std::vector<uint64_t> hashes = RandomKeyHashes();
  std::vector<RingMember> members = Members(10);
  members[3].weight = 2.0f;
  const std::vector<size_t> counts =
      Counts(Owners(MakeRing(members), hashes), 9);
  size_t others = 0;
  for (int i = 0; i < 10; ++i) others += i == 3 ? 0 : counts[i];
  const double ratio = counts[3] / (static_cast<double>(others) / 9);
  Report("weight_2_over_weight_1_mean", ratio);
  EXPECT_GE(ratio, 1.9);
  EXPECT_LE(ratio, 2.1);
  // And the expected share of the total: 2/11.
  EXPECT_NEAR(static_cast<double>(counts[3]) / kKeys, 2.0 / 11, 0.01);
}

}  // namespace
}  // namespace psdb
