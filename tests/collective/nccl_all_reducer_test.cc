// NCCL AllReduce through the scheduler's rendezvous: runs where the build
// has NCCL and the machine a CUDA device; skips, saying why, elsewhere.
// One rank per device (NCCL refuses two ranks on one GPU): a group of one
// on a one-GPU machine, of two where there are two.
#include <memory>
#include <vector>

#include "collective/group.h"
#include "tests/collective/group_testing.h"
#include "tests/testing/test_util.h"
#ifdef PSDB_HAVE_NCCL
#include "collective/nccl_all_reducer.h"
#endif

namespace psdb::collective {
namespace {

using ::psdb::collective::testing::SchedulerWithWorkers;

TEST(NcclAllReducerTest, RanksGetTheExactSum) {
#ifndef PSDB_HAVE_NCCL
  GTEST_SKIP() << "this build has no NCCL (CUDA and NCCL not found at "
                  "configure time)";
#else
  const int devices = CudaDeviceCount();
  if (devices == 0) GTEST_SKIP() << "no CUDA device on this machine";
  const int world = devices >= 2 ? 2 : 1;
  SchedulerWithWorkers cluster(world);
  std::vector<std::vector<float>> results(world);
  cluster.OnEveryRank([&](int rank) {
    AllReducerOptions o;
    o.backend = Backend::kNccl;
    o.scheduler = cluster.client(rank);
    o.rank = rank;
    o.world = world;
    o.cuda_device = rank;
    o.timeout = absl::Seconds(60);
    auto reducer = OpenAllReducer(o);
    ASSERT_OK(reducer);
    std::vector<float> data(100000);
    for (size_t i = 0; i < data.size(); ++i) {
      data[i] = static_cast<float>((rank + 1) * (i % 1000)) * 0.5f;
    }
    ASSERT_OK((*reducer)->AllReduceSum(absl::MakeSpan(data)));
    results[rank] = std::move(data);
  });
  for (size_t i = 0; i < results[0].size(); ++i) {
    float want = 0;
    for (int r = 0; r < world; ++r) {
      want += static_cast<float>((r + 1) * (i % 1000)) * 0.5f;
    }
    ASSERT_EQ(results[0][i], want) << i;
  }
  for (int r = 1; r < world; ++r) EXPECT_TRUE(results[r] == results[0]);
#endif
}

TEST(NcclAllReducerTest, NoDeviceOrNoNcclIsAClearError) {
#ifdef PSDB_HAVE_NCCL
  if (CudaDeviceCount() > 0) GTEST_SKIP() << "a CUDA device is present";
#endif
  SchedulerWithWorkers cluster(1);
  AllReducerOptions o;
  o.backend = Backend::kNccl;
  o.scheduler = cluster.client(0);
  auto reducer = OpenAllReducer(o);
  EXPECT_THAT(reducer, StatusIs(absl::StatusCode::kFailedPrecondition));
}

}  // namespace
}  // namespace psdb::collective
