#include "rpc/server/sync_aggregator.h"

#include <algorithm>
#include <string>
#include <tuple>
#include <vector>

#include "tests/testing/test_util.h"

namespace psdb::rpc {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

struct Applied {
  std::string table;
  std::vector<uint64_t> keys;
  std::vector<float> grads;
  int64_t step = 0;
};

class SyncAggregatorTest : public ::testing::Test {
 protected:
  SyncAggregator Make(int workers, SyncReduce reduce) {
    SyncOptions o;
    o.num_workers = workers;
    o.reduce = reduce;
    return SyncAggregator(
        o, [this](absl::string_view table, absl::Span<const uint64_t> keys,
                  absl::Span<const float> grads, int64_t step) {
          applied_.push_back({std::string(table),
                              {keys.begin(), keys.end()},
                              {grads.begin(), grads.end()},
                              step});
          return absl::OkStatus();
        });
  }
  std::vector<Applied> applied_;
};

// What the rounds still waiting for workers will write, push by push.
TEST_F(SyncAggregatorTest, ForEachPendingPushListsWaitingRoundsOnly) {
  SyncAggregator agg = Make(2, SyncReduce::kMean);
  ASSERT_OK(agg.Push("a", 1, 0, 1, std::vector<uint64_t>{4, 9}, {1, 1}));
  ASSERT_OK(agg.Push("a", 1, 1, 1, std::vector<uint64_t>{5}, {1}));  // applied
  ASSERT_OK(agg.Push("a", 1, 1, 2, std::vector<uint64_t>{6}, {1}));
  ASSERT_OK(agg.Push("b", 1, 0, 3, std::vector<uint64_t>{8, 2}, {1, 1}));
  using Pending = std::tuple<std::string, int64_t, std::vector<uint64_t>>;
  std::vector<Pending> pending;
  agg.ForEachPendingPush([&](absl::string_view table, int64_t step,
                             absl::Span<const uint64_t> keys) {
    pending.emplace_back(std::string(table), step,
                         std::vector<uint64_t>(keys.begin(), keys.end()));
  });
  std::sort(pending.begin(), pending.end());
  EXPECT_THAT(pending,
              ElementsAre(Pending{"a", 2, {6}}, Pending{"b", 3, {8, 2}}));
}

TEST_F(SyncAggregatorTest, MeanOfWorkerGradientsAppliedOnceWhenAllArrive) {
  SyncAggregator agg = Make(2, SyncReduce::kMean);
  const std::vector<uint64_t> k1 = {7, 3, 7};  // duplicate 7 summed first
  const std::vector<float> g1 = {1.0f, 2.0f, 10.0f, 20.0f, 0.5f, 0.25f};
  ASSERT_OK(agg.Push("t", 2, 1, 1, k1, g1));
  EXPECT_TRUE(applied_.empty());
  EXPECT_EQ(agg.pending_steps("t"), 1);
  const std::vector<uint64_t> k0 = {3, 5};
  const std::vector<float> g0 = {4.0f, 6.0f, 8.0f, 8.0f};
  ASSERT_OK(agg.Push("t", 2, 0, 1, k0, g0));
  ASSERT_EQ(applied_.size(), 1u);
  // Keys in first occurrence over workers 0, 1; a key a worker did not
  // touch counts as a zero gradient from it.
  EXPECT_THAT(applied_[0].keys, ElementsAre(3, 5, 7));
  EXPECT_THAT(applied_[0].grads,
              ElementsAre((4.0f + 10.0f) / 2, (6.0f + 20.0f) / 2, 8.0f / 2,
                          8.0f / 2, (1.0f + 0.5f) / 2, (2.0f + 0.25f) / 2));
  EXPECT_EQ(applied_[0].step, 1);
  EXPECT_EQ(agg.last_applied_step("t"), 1);
  EXPECT_EQ(agg.pending_steps("t"), 0);
}

TEST_F(SyncAggregatorTest, SumOptionAndEmptyPushes) {
  SyncAggregator agg = Make(3, SyncReduce::kSum);
  ASSERT_OK(agg.Push("t", 1, 0, 4, std::vector<uint64_t>{9},
                     std::vector<float>{1.5f}));
  ASSERT_OK(agg.Push("t", 1, 2, 4, {}, {}));  // owns none of worker 2's keys
  ASSERT_OK(agg.Push("t", 1, 1, 4, std::vector<uint64_t>{9},
                     std::vector<float>{2.5f}));
  ASSERT_EQ(applied_.size(), 1u);
  EXPECT_THAT(applied_[0].grads, ElementsAre(4.0f));
  // A step whose pushes were all empty applies nothing.
  for (int w = 0; w < 3; ++w) ASSERT_OK(agg.Push("t", 1, w, 5, {}, {}));
  EXPECT_EQ(applied_.size(), 1u);
  EXPECT_EQ(agg.last_applied_step("t"), 5);
}

TEST_F(SyncAggregatorTest, TablesAndStepsAreIndependent) {
  SyncAggregator agg = Make(2, SyncReduce::kMean);
  ASSERT_OK(agg.Push("a", 1, 0, 1, std::vector<uint64_t>{1},
                     std::vector<float>{2.0f}));
  ASSERT_OK(agg.Push("b", 1, 0, 1, std::vector<uint64_t>{1},
                     std::vector<float>{4.0f}));
  ASSERT_OK(agg.Push("a", 1, 0, 2, std::vector<uint64_t>{1},
                     std::vector<float>{8.0f}));
  ASSERT_OK(agg.Push("b", 1, 1, 1, std::vector<uint64_t>{1},
                     std::vector<float>{0.0f}));
  ASSERT_EQ(applied_.size(), 1u);
  EXPECT_EQ(applied_[0].table, "b");
  EXPECT_THAT(applied_[0].grads, ElementsAre(2.0f));
  EXPECT_EQ(agg.pending_steps("a"), 2);
}

TEST_F(SyncAggregatorTest, BadPushesChangeNothing) {
  SyncAggregator agg = Make(2, SyncReduce::kMean);
  EXPECT_THAT(agg.Push("t", 1, 2, 1, std::vector<uint64_t>{1},
                       std::vector<float>{1.0f}),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(agg.Push("t", 1, 0, 0, std::vector<uint64_t>{1},
                       std::vector<float>{1.0f}),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(agg.Push("t", 2, 0, 1, std::vector<uint64_t>{1},
                       std::vector<float>{1.0f}),
              StatusIs(absl::StatusCode::kInvalidArgument));
  ASSERT_OK(agg.Push("t", 1, 0, 1, std::vector<uint64_t>{1},
                     std::vector<float>{1.0f}));
  EXPECT_THAT(agg.Push("t", 1, 0, 1, std::vector<uint64_t>{1},
                       std::vector<float>{1.0f}),
              StatusIs(absl::StatusCode::kAlreadyExists));
  ASSERT_OK(agg.Push("t", 1, 1, 1, std::vector<uint64_t>{1},
                     std::vector<float>{3.0f}));
  ASSERT_EQ(applied_.size(), 1u);
  EXPECT_THAT(applied_[0].grads, ElementsAre(2.0f));
  absl::Status late = agg.Push("t", 1, 1, 1, std::vector<uint64_t>{1},
                               std::vector<float>{1.0f});
  EXPECT_THAT(late, StatusIs(absl::StatusCode::kFailedPrecondition));
  EXPECT_THAT(std::string(late.message()),
              HasSubstr("arrived after step 1 was applied"));
}

// Live resharding: part of step 3 applied under epoch 1, the re-sent rest
// under epoch 2 is a round of its own; older rounds are refused.
TEST_F(SyncAggregatorTest, RoundsOfOneStepUnderTwoEpochsApplyApart) {
  SyncAggregator agg = Make(2, SyncReduce::kSum);
  const std::vector<uint64_t> a = {1}, b = {2};
  const std::vector<float> g = {1.0f};
  ASSERT_OK(agg.Push("t", 1, 0, 3, a, g, /*epoch=*/1));
  ASSERT_OK(agg.Push("t", 1, 1, 3, a, g, 1));
  ASSERT_EQ(applied_.size(), 1u);
  ASSERT_OK(agg.Push("t", 1, 0, 3, b, g, 2));
  EXPECT_EQ(agg.pending_rounds(), 1);
  ASSERT_OK(agg.Push("t", 1, 1, 3, b, g, 2));
  ASSERT_EQ(applied_.size(), 2u);
  EXPECT_THAT(applied_[1].keys, ElementsAre(2));
  EXPECT_THAT(applied_[1].grads, ElementsAre(2.0f));
  EXPECT_EQ(applied_[1].step, 3);
  EXPECT_EQ(agg.pending_rounds(), 0);
  absl::Status late = agg.Push("t", 1, 0, 3, a, g, 1);
  EXPECT_THAT(late, StatusIs(absl::StatusCode::kFailedPrecondition));
  EXPECT_THAT(std::string(late.message()),
              HasSubstr("step 3 (epoch 1) arrived after step 3 (epoch 2) was "
                        "applied"));
}

}  // namespace
}  // namespace psdb::rpc
