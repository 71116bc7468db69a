// ReplicatedDense over two gloo ranks (one thread each, the group formed
// through a real in-process scheduler) and one embedded store: both
// replicas start from the store's rows, each step applies the table's own
// optimizer to the mean of the ranks' gradients (checked against
// optim::Apply by hand), rank 0's Publish writes the rows back, and a
// non-finite reduced gradient is refused on every rank with nothing
// applied.
#include "train/replicated_dense.h"

#include <memory>
#include <vector>

#include "collective/group.h"
#include "optim/optimizer.h"
#include "psdb/local_client.h"
#include "tests/collective/group_testing.h"
#include "tests/testing/test_util.h"

namespace psdb::train {
namespace {

using ::psdb::collective::testing::SchedulerWithWorkers;
using ::psdb::testing::ScratchDir;

TableSpec AdamSpec(const DenseTensor& tensor) {
  optim::OptimizerSpec adam;
  adam.kind = optim::OptimizerKind::kAdam;
  adam.learning_rate = 0.01f;
  return tensor.Spec({InitKind::kUniform, -0.5f, 0.5f}, adam, 11);
}

// Rank r's gradient of element i.
float Grad(int rank, size_t i) {
  return (rank == 0 ? 0.5f : -0.25f) * static_cast<float>(i + 1);
}

TEST(ReplicatedDenseTest, TwoRanksApplyTheMeanGradientWithTheTablesAdam) {
  ScratchDir dir;
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<LocalClient> client,
                       LocalClient::Open(dir.Sub("store")));
  // 6 floats in blocks of 4: two rows, the last zero-padded.
  const DenseTensor tensor("mlp.w0", 6, 4);
  const TableSpec spec = AdamSpec(tensor);
  ASSERT_OK(client->CreateTable(spec));
  RowBatch initial;
  ASSERT_OK(client->PullRows("mlp.w0", {0, 1}, &initial));

  SchedulerWithWorkers cluster(2);
  std::vector<std::vector<float>> after(2);
  std::vector<uint64_t> fingerprints(2);
  cluster.OnEveryRank([&](int rank) {
    collective::AllReducerOptions o;
    o.scheduler = cluster.client(rank);
    o.rank = rank;
    o.world = 2;
    o.host = "127.0.0.1";
    auto reducer = collective::OpenAllReducer(o);
    ASSERT_OK(reducer);
    auto dense =
        ReplicatedDense::Load({&tensor}, {spec}, client.get(), reducer->get());
    ASSERT_OK(dense);
    absl::Span<const float> v0 = (*dense)->values(0);
    EXPECT_TRUE(std::equal(v0.begin(), v0.end(), initial.values.begin()));
    std::vector<float> grad(6);
    for (size_t i = 0; i < 6; ++i) grad[i] = Grad(rank, i);
    ASSERT_OK((*dense)->Apply({grad}, /*step=*/1));
    absl::Span<const float> v1 = (*dense)->values(0);
    after[rank].assign(v1.begin(), v1.end());
    fingerprints[rank] = (*dense)->Fingerprint();

    // A NaN from rank 1 makes the reduced gradient non-finite on both.
    if (rank == 1) grad[2] = NAN;
    absl::Status bad = (*dense)->Apply({grad}, 2);
    EXPECT_THAT(bad, StatusIs(absl::StatusCode::kInvalidArgument));
    EXPECT_THAT(bad.message(),
                ::testing::HasSubstr("non-finite reduced gradient for block "
                                     "0 at step 2"));
    v1 = (*dense)->values(0);
    EXPECT_TRUE(std::equal(v1.begin(), v1.end(), after[rank].begin()));
    // A gradient of the wrong size is refused before any collective.
    EXPECT_THAT((*dense)->Apply({std::vector<float>(5)}, 3),
                StatusIs(absl::StatusCode::kInvalidArgument));
    if (rank == 0) ASSERT_OK((*dense)->Publish());
  });

  // By hand: the table's Adam on the mean of the two gradients, at step 1.
  RowBatch want = initial;
  for (int r = 0; r < 2; ++r) {
    std::vector<float> mean(4, 0.0f);
    for (size_t j = 0; j < 4; ++j) {
      const size_t i = r * 4 + j;
      mean[j] = i < 6 ? (Grad(0, i) + Grad(1, i)) / 2.0f : 0.0f;
    }
    const int ss = initial.state_size;
    optim::Apply(spec.optimizer, absl::MakeSpan(&want.values[r * 4], 4),
                 absl::MakeSpan(&want.state[r * ss], ss), mean, 1);
  }
  ASSERT_EQ(after[0].size(), 6u);
  for (size_t i = 0; i < 6; ++i) EXPECT_EQ(after[0][i], want.values[i]) << i;
  EXPECT_EQ(after[1], after[0]);
  EXPECT_EQ(fingerprints[1], fingerprints[0]);

  // Rank 0 published: the store holds the replicas' rows and state.
  RowBatch stored;
  ASSERT_OK(client->PullRows("mlp.w0", {0, 1}, &stored));
  EXPECT_EQ(stored.values, want.values);
  EXPECT_EQ(stored.state, want.state);
  EXPECT_EQ(stored.headers[0].last_update_step, 1);
  EXPECT_EQ(stored.headers[0].update_count, 1u);
}

TEST(ReplicatedDenseTest, ASpecThatDoesNotDescribeTheTensorIsRefused) {
  ScratchDir dir;
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<LocalClient> client,
                       LocalClient::Open(dir.Sub("store")));
  SchedulerWithWorkers cluster(1);
  collective::AllReducerOptions o;
  o.scheduler = cluster.client(0);
  o.host = "127.0.0.1";
  ASSERT_OK_AND_ASSIGN(auto reducer, collective::OpenAllReducer(o));
  const DenseTensor tensor("mlp.w0", 6, 4);
  TableSpec spec = AdamSpec(tensor);
  spec.dim = 3;
  EXPECT_THAT(
      ReplicatedDense::Load({&tensor}, {spec}, client.get(), reducer.get()),
      StatusIs(absl::StatusCode::kInvalidArgument));
}

}  // namespace
}  // namespace psdb::train
