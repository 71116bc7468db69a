#include "train/rare_ids.h"

#include <set>
#include <vector>

#include "gtest/gtest.h"
#include "train/criteo_reader.h"

namespace psdb::train {
namespace {

// A batch of one example per entry, field f of example i holding ids[i] + f.
CriteoBatch Batch(const std::vector<uint64_t>& ids) {
  CriteoBatch b;
  for (uint64_t id : ids) {
    b.labels.push_back(0);
    b.ints.resize(b.ints.size() + kNumIntFeatures);
    b.int_present.resize(b.int_present.size() + kNumIntFeatures);
    for (int f = 0; f < kNumCatFeatures; ++f) {
      b.cat_keys.push_back(CategoricalKey(f, id + f));
    }
  }
  return b;
}

// The k-th training sighting of an id maps to its field's fallback while
// k < min_count; from the min_count-th on it keeps its own key.
TEST(RareIdMapperTest, IdsAreAdmittedOnTheirMinCountthSighting) {
  RareIdMapper m(3);
  CriteoBatch b = Batch({7, 7, 9});
  m.MapTraining(&b, 1);  // 7: 1st and 2nd sightings, 9: 1st
  for (int i = 0; i < 3; ++i) {
    for (int f = 0; f < kNumCatFeatures; ++f) {
      EXPECT_EQ(b.cat_keys[i * kNumCatFeatures + f],
                RareIdMapper::FallbackKey(f));
    }
  }
  b = Batch({7, 9});
  m.MapTraining(&b, 2);  // 7: 3rd (admitted at step 2), 9: 2nd
  EXPECT_EQ(b.cat_keys[0], CategoricalKey(0, 7));
  EXPECT_EQ(b.cat_keys[kNumCatFeatures + 5], RareIdMapper::FallbackKey(5));
  EXPECT_EQ(m.admitted(), 26u);  // id 7's 26 field keys
  EXPECT_EQ(m.tracked(), 52u);
  EXPECT_EQ(m.mapped(), 3u * 26 + 26);

  // Evaluation maps the rare and the unseen, keeps the admitted and counts
  // nothing.
  CriteoBatch e = Batch({7, 9, 11});
  const CriteoBatch unmapped = e;
  m.MapEval(&e);
  EXPECT_EQ(e.cat_keys[3], CategoricalKey(3, 7 + 3));
  EXPECT_EQ(e.cat_keys[kNumCatFeatures + 3], RareIdMapper::FallbackKey(3));
  EXPECT_EQ(e.cat_keys[2 * kNumCatFeatures + 3], RareIdMapper::FallbackKey(3));
  EXPECT_EQ(m.tracked(), 52u);
  // As of step 1 (a checkpoint taken then) id 7 was not admitted yet.
  e = unmapped;
  m.MapEval(&e, /*as_of_step=*/1);
  EXPECT_EQ(e.cat_keys[3], RareIdMapper::FallbackKey(3));
  e = unmapped;
  m.MapEval(&e, /*as_of_step=*/2);
  EXPECT_EQ(e.cat_keys[3], CategoricalKey(3, 7 + 3));
}

TEST(RareIdMapperTest, FallbacksAreDistinctPerFieldAndOffMapsNothing) {
  std::set<uint64_t> keys;
  for (int f = 0; f < kNumCatFeatures; ++f) {
    keys.insert(RareIdMapper::FallbackKey(f));
    keys.insert(CategoricalKey(f, 0, /*present=*/false));
  }
  EXPECT_EQ(keys.size(), 2u * kNumCatFeatures);
  for (uint32_t off : {0u, 1u}) {
    RareIdMapper m(off);
    CriteoBatch b = Batch({1});
    const std::vector<uint64_t> before = b.cat_keys;
    m.MapTraining(&b, 1);
    m.MapEval(&b);
    EXPECT_EQ(b.cat_keys, before);
    EXPECT_FALSE(m.enabled());
  }
}

}  // namespace
}  // namespace psdb::train
