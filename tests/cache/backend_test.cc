// Backends: the CPU backend against optim::Apply (the store's math), and
// the CUDA backend against the CPU backend bit for bit. The CUDA tests skip,
// saying why, when this build has no CUDA backend or the machine no device.
#include "cache/backend.h"

#include <memory>
#include <vector>

#include "cache/cpu_backend.h"
#include "optim/optimizer.h"
#include "tests/testing/test_util.h"

namespace psdb::cache {
namespace {

constexpr int kDim = 5;

optim::OptimizerSpec AdamSpec() {
  optim::OptimizerSpec spec;
  spec.kind = optim::OptimizerKind::kAdam;
  spec.learning_rate = 0.1f;
  spec.weight_decay = 0.01f;
  return spec;
}

std::vector<float> Iota(size_t n, float start, float step) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = start + step * static_cast<float>(i);
  return v;
}

// Runs a fixed sequence on `b`: write 3 rows into slots 4, 0, 2, apply two
// gradient batches with duplicates, then read and gather.
void Exercise(CacheBackend* b, std::vector<float>* values,
              std::vector<float>* state, std::vector<float>* gathered) {
  const optim::OptimizerSpec spec = AdamSpec();
  const int ss = optim::StateSize(spec, kDim);
  ASSERT_OK(b->Allocate(6, kDim, ss));
  const std::vector<int32_t> slots = {4, 0, 2};
  std::vector<float> st(3 * ss);
  for (int r = 0; r < 3; ++r) {
    optim::InitState(spec, kDim, absl::MakeSpan(st).subspan(r * ss, ss));
  }
  ASSERT_OK(b->Write(slots, Iota(3 * kDim, -0.3f, 0.05f), st, ss));
  // Batch of 4 positions: slot 4 at positions 0 and 3, slot 2 at 1, slot 0
  // at 2.
  const std::vector<int32_t> unique = {4, 2, 0}, offsets = {0, 2, 3, 4},
                             positions = {0, 3, 1, 2};
  const optim::KernelParams p = optim::KernelParamsOf(spec);
  ASSERT_OK(b->ApplyGradients(p, unique, offsets, positions,
                              Iota(4 * kDim, 0.2f, -0.03f), 1));
  ASSERT_OK(b->ApplyGradients(p, unique, offsets, positions,
                              Iota(4 * kDim, -0.1f, 0.011f), 2));
  values->assign(3 * kDim, 0);
  state->assign(3 * ss, 0);
  ASSERT_OK(
      b->Read(slots, absl::MakeSpan(*values), absl::MakeSpan(*state), ss));
  gathered->assign(4 * kDim, 0);
  ASSERT_OK(b->Gather({2, 2, 4, 0}, absl::MakeSpan(*gathered)));
}

TEST(CpuBackendTest, AppliesTheStoresOptimizerToSummedDuplicates) {
  CpuBackend b;
  std::vector<float> values, state, gathered;
  Exercise(&b, &values, &state, &gathered);
  // The same with optim::Apply: slot 4 holds row 0 of the write.
  const optim::OptimizerSpec spec = AdamSpec();
  const int ss = optim::StateSize(spec, kDim);
  std::vector<float> w = Iota(3 * kDim, -0.3f, 0.05f), s(ss);
  optim::InitState(spec, kDim, absl::MakeSpan(s));
  std::vector<float> row(w.begin(), w.begin() + kDim);
  for (int step = 1; step <= 2; ++step) {
    const std::vector<float> g = step == 1 ? Iota(4 * kDim, 0.2f, -0.03f)
                                           : Iota(4 * kDim, -0.1f, 0.011f);
    std::vector<float> sum(g.begin(), g.begin() + kDim);       // position 0
    for (int j = 0; j < kDim; ++j) sum[j] += g[3 * kDim + j];  // position 3
    optim::Apply(spec, absl::MakeSpan(row), absl::MakeSpan(s), sum, step);
  }
  EXPECT_EQ(std::vector<float>(values.begin(), values.begin() + kDim), row);
  EXPECT_EQ(std::vector<float>(state.begin(), state.begin() + ss), s);
  EXPECT_EQ(std::vector<float>(gathered.begin() + 2 * kDim,
                               gathered.begin() + 3 * kDim),
            row);
  // Gather positions 0 and 1 both read slot 2 (row 2 of the write).
  EXPECT_EQ(
      std::vector<float>(gathered.begin(), gathered.begin() + kDim),
      std::vector<float>(gathered.begin() + kDim, gathered.begin() + 2 * kDim));
  EXPECT_EQ(std::vector<float>(gathered.begin(), gathered.begin() + kDim),
            std::vector<float>(values.begin() + 2 * kDim, values.end()));
}

TEST(CpuBackendTest, RejectsBadShapes) {
  CpuBackend b;
  EXPECT_THAT(b.Allocate(0, 4, 0),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(b.Allocate(4, 0, 0),
              StatusIs(absl::StatusCode::kInvalidArgument));
}

TEST(CudaBackendTest, MatchesTheCpuBackendBitForBit) {
  absl::StatusOr<std::unique_ptr<CacheBackend>> cuda =
      MakeBackend(BackendKind::kCuda);
  if (!cuda.ok()) {
    if (absl::IsUnimplemented(cuda.status())) {
      GTEST_SKIP() << "no CUDA backend in this build: " << cuda.status();
    }
    ASSERT_THAT(cuda, StatusIs(absl::StatusCode::kFailedPrecondition));
    GTEST_SKIP() << cuda.status().message();
  }
  CpuBackend cpu;
  std::vector<float> cv, cs, cg, gv, gs, gg;
  Exercise(&cpu, &cv, &cs, &cg);
  Exercise(cuda->get(), &gv, &gs, &gg);
  EXPECT_EQ(cv, gv);
  EXPECT_EQ(cs, gs);
  EXPECT_EQ(cg, gg);
}

}  // namespace
}  // namespace psdb::cache
