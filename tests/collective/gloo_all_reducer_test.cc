// gloo AllReduce groups formed through a real scheduler's rendezvous
// (in process, over loopback gRPC), one thread per rank, gloo's TCP
// transport on 127.0.0.1.
#include "collective/gloo_all_reducer.h"

#include <memory>
#include <string>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "collective/group.h"
#include "tests/collective/group_testing.h"
#include "tests/testing/test_util.h"

namespace psdb::collective {
namespace {

using ::psdb::collective::testing::SchedulerWithWorkers;
using ::testing::HasSubstr;

AllReducerOptions Options(SchedulerWithWorkers& cluster, int rank) {
  AllReducerOptions o;
  o.scheduler = cluster.client(rank);
  o.rank = rank;
  o.world = cluster.world();
  o.host = "127.0.0.1";
  o.timeout = absl::Seconds(60);
  return o;
}

// Rank r's contribution to element i: exact in float, so every sum is too.
float Value(int rank, size_t i) {
  return static_cast<float>((rank + 1) * 1000 + static_cast<int>(i % 997)) *
         0.25f;
}

TEST(GlooAllReducerTest, ThreeRanksGetTheExactSumOnEveryRank) {
  SchedulerWithWorkers cluster(3);
  // Small, and large enough for several of gloo's 1 MiB segments.
  const std::vector<size_t> sizes = {1, 7, 1000, 600000};
  std::vector<std::vector<std::vector<float>>> results(3);
  cluster.OnEveryRank([&](int rank) {
    absl::StatusOr<std::unique_ptr<AllReducer>> reducer =
        OpenAllReducer(Options(cluster, rank));
    ASSERT_OK(reducer);
    EXPECT_EQ((*reducer)->rank(), rank);
    EXPECT_EQ((*reducer)->world(), 3);
    EXPECT_EQ((*reducer)->Describe(), "gloo (tcp, 3 ranks)");
    for (size_t n : sizes) {
      std::vector<float> data(n);
      for (size_t i = 0; i < n; ++i) data[i] = Value(rank, i);
      ASSERT_OK((*reducer)->AllReduceSum(absl::MakeSpan(data)));
      results[rank].push_back(std::move(data));
    }
  });
  for (size_t k = 0; k < sizes.size(); ++k) {
    ASSERT_EQ(results[0][k].size(), sizes[k]);
    for (size_t i = 0; i < sizes[k]; ++i) {
      const float want = Value(0, i) + Value(1, i) + Value(2, i);
      ASSERT_EQ(results[0][k][i], want) << "size " << sizes[k] << " at " << i;
    }
    // Bit for bit the same on every rank.
    EXPECT_TRUE(results[1][k] == results[0][k]);
    EXPECT_TRUE(results[2][k] == results[0][k]);
  }
}

TEST(GlooAllReducerTest, EachAttemptGetsItsOwnScope) {
  SchedulerWithWorkers cluster(2);
  for (int attempt = 1; attempt <= 2; ++attempt) {
    std::vector<std::string> scopes(2);
    cluster.OnEveryRank([&](int rank) {
      absl::StatusOr<std::string> scope =
          AgreeOnScope(cluster.client(rank), "job", rank, absl::Seconds(30));
      ASSERT_OK(scope);
      scopes[rank] = *scope;
    });
    EXPECT_EQ(scopes[0], absl::StrCat("job/", attempt));
    EXPECT_EQ(scopes[1], scopes[0]);
  }
  // A third attempt forms a working group under job/3, next to the stale
  // entries of the first two.
  std::vector<float> sums(2);
  cluster.OnEveryRank([&](int rank) {
    AllReducerOptions o = Options(cluster, rank);
    o.job = "job";
    auto reducer = OpenAllReducer(o);
    ASSERT_OK(reducer);
    std::vector<float> x = {static_cast<float>(rank + 1)};
    ASSERT_OK((*reducer)->AllReduceSum(absl::MakeSpan(x)));
    sums[rank] = x[0];
  });
  EXPECT_EQ(sums[0], 3.0f);
  EXPECT_EQ(sums[1], 3.0f);
  ASSERT_OK_AND_ASSIGN(
      std::vector<std::string> held,
      cluster.client(0)->RendezvousGet({"job/attempts/3"}, absl::Seconds(1)));
  EXPECT_EQ(held.size(), 1u);
}

TEST(GlooAllReducerTest, AMissingRankIsATimeoutNamingIt) {
  SchedulerWithWorkers cluster(2);
  AllReducerOptions o = Options(cluster, 0);
  o.timeout = absl::Milliseconds(500);
  absl::StatusOr<std::unique_ptr<AllReducer>> reducer = OpenAllReducer(o);
  EXPECT_THAT(reducer, StatusIs(absl::StatusCode::kDeadlineExceeded));
  EXPECT_THAT(reducer.status().message(), HasSubstr("worker rank 1"));
}

TEST(GlooAllReducerTest, BadOptionsAreRefused) {
  SchedulerWithWorkers cluster(1);
  AllReducerOptions o = Options(cluster, 0);
  o.rank = 1;
  EXPECT_THAT(OpenAllReducer(o), StatusIs(absl::StatusCode::kInvalidArgument));
  o = Options(cluster, 0);
  o.job = "a/b";
  EXPECT_THAT(OpenAllReducer(o), StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(ParseBackend("mpi"),
              StatusIs(absl::StatusCode::kInvalidArgument));
  // One rank alone is a group of one: the sum is its own data.
  auto reducer = OpenAllReducer(Options(cluster, 0));
  ASSERT_OK(reducer);
  std::vector<float> x = {1.5f, -2.0f};
  ASSERT_OK((*reducer)->AllReduceSum(absl::MakeSpan(x)));
  EXPECT_EQ(x, (std::vector<float>{1.5f, -2.0f}));
}

}  // namespace
}  // namespace psdb::collective
