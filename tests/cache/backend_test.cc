// Backends: the CPU backend against optim::Apply (the store's math), and
// the CUDA backend against the CPU backend bit for bit. The CUDA tests skip,
// saying why, when this build has no CUDA backend or the machine no device.
#include "cache/backend.h"

#include <memory>
#include <string>
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

TEST(GroupPositionsByRowTest, ListsEachRowsPositionsAscending) {
  std::vector<int32_t> offsets, positions;
  // Positions 0..6 hold rows 2, 0, 2, 1, 0, 2, 0; row 3 is never named.
  GroupPositionsByRow({2, 0, 2, 1, 0, 2, 0}, 4, &offsets, &positions);
  EXPECT_EQ(offsets, (std::vector<int32_t>{0, 3, 4, 7, 7}));
  EXPECT_EQ(positions, (std::vector<int32_t>{1, 4, 6, 3, 0, 2, 5}));
  GroupPositionsByRow({}, 0, &offsets, &positions);
  EXPECT_EQ(offsets, (std::vector<int32_t>{0}));
  EXPECT_TRUE(positions.empty());
}

TEST(CpuBackendTest, RejectsBadShapes) {
  CpuBackend b;
  EXPECT_THAT(b.Allocate(0, 4, 0),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(b.Allocate(4, 0, 0),
              StatusIs(absl::StatusCode::kInvalidArgument));
}

// The CUDA backend, or null and why there is none (the caller skips):
// Unimplemented without CUDA in the build, FailedPrecondition without a
// device.
std::unique_ptr<CacheBackend> CudaBackendOrWhyNot(std::string* why) {
  absl::StatusOr<std::unique_ptr<CacheBackend>> cuda =
      MakeBackend(BackendKind::kCuda);
  if (cuda.ok()) return *std::move(cuda);
  EXPECT_TRUE(absl::IsUnimplemented(cuda.status()) ||
              absl::IsFailedPrecondition(cuda.status()))
      << cuda.status();
  *why = cuda.status().ToString();
  return nullptr;
}

TEST(CudaBackendTest, MatchesTheCpuBackendBitForBit) {
  std::string why;
  std::unique_ptr<CacheBackend> cuda = CudaBackendOrWhyNot(&why);
  if (cuda == nullptr) GTEST_SKIP() << why;
  CpuBackend cpu;
  std::vector<float> cv, cs, cg, gv, gs, gg;
  Exercise(&cpu, &cv, &cs, &cg);
  Exercise(cuda.get(), &gv, &gs, &gg);
  EXPECT_EQ(cv, gv);
  EXPECT_EQ(cs, gs);
  EXPECT_EQ(cg, gg);
}

// Every optimizer kind, with the options that take other branches of its
// row math, on the CPU and CUDA backends: many rows, duplicates in every
// batch, several steps; the two must agree bit for bit.
struct KindCase {
  const char* name;
  optim::OptimizerSpec spec;
};

std::vector<KindCase> KindCases() {
  using K = optim::OptimizerKind;
  auto spec = [](K kind) {
    optim::OptimizerSpec s;
    s.kind = kind;
    s.learning_rate = 0.05f;
    return s;
  };
  std::vector<KindCase> cases;
  cases.push_back({"sgd", spec(K::kSgd)});
  optim::OptimizerSpec s = spec(K::kSgd);
  s.weight_decay = 0.01f;
  cases.push_back({"sgd_weight_decay", s});
  cases.push_back({"momentum", spec(K::kMomentum)});
  s = spec(K::kMomentum);
  s.nesterov = true;
  cases.push_back({"nesterov", s});
  cases.push_back({"adagrad", spec(K::kAdagrad)});
  cases.push_back({"rowwise_adagrad", spec(K::kRowwiseAdagrad)});
  cases.push_back({"adam", spec(K::kAdam)});
  cases.push_back({"lazy_adam", spec(K::kLazyAdam)});
  cases.push_back({"ftrl", spec(K::kFtrl)});
  s = spec(K::kFtrl);
  s.l1 = 0.001f;
  s.l2 = 0.01f;
  cases.push_back({"ftrl_l1_l2", s});
  s = spec(K::kFtrl);
  s.lr_power = -1.0f;
  s.initial_accumulator = 1e-3f;
  s.accumulator_decay = 0.99f;
  cases.push_back({"ftrl_newton_decay", s});
  s = spec(K::kFtrl);
  s.lr_power = -0.3f;  // neither square root nor identity: powf
  cases.push_back({"ftrl_power_0_3", s});
  return cases;
}

// Writes `rows` rows into a shuffled set of slots, applies `steps` batches
// whose positions repeat rows, then reads every row and gathers one batch.
void ExerciseLarge(CacheBackend* b, const optim::OptimizerSpec& spec, int dim,
                   std::vector<float>* values, std::vector<float>* state,
                   std::vector<float>* gathered) {
  constexpr int kRows = 1000, kSlots = 1200, kBatch = 3000, kSteps = 5;
  const int ss = optim::StateSize(spec, dim);
  ASSERT_OK(b->Allocate(kSlots, dim, ss));
  std::vector<int32_t> slots(kRows);
  for (int r = 0; r < kRows; ++r) slots[r] = (r * 7 + 3) % kSlots;
  std::vector<float> st(static_cast<size_t>(kRows) * ss);
  for (int r = 0; r < kRows; ++r) {
    optim::InitState(spec, dim, absl::MakeSpan(st).subspan(r * ss, ss));
  }
  ASSERT_OK(b->Write(slots, Iota(static_cast<size_t>(kRows) * dim, -1, 1e-3f),
                     st, ss));
  const optim::KernelParams p = optim::KernelParamsOf(spec);
  for (int step = 1; step <= kSteps; ++step) {
    // Position i of the batch reads row (i * i + step) % kRows: some rows
    // many times, some never. Group the positions by row, ascending.
    std::vector<std::vector<int32_t>> by_row(kRows);
    for (int i = 0; i < kBatch; ++i) {
      by_row[(static_cast<int64_t>(i) * i + step) % kRows].push_back(i);
    }
    std::vector<int32_t> unique, offsets = {0}, positions;
    for (int r = 0; r < kRows; ++r) {
      if (by_row[r].empty()) continue;
      unique.push_back(slots[r]);
      positions.insert(positions.end(), by_row[r].begin(), by_row[r].end());
      offsets.push_back(static_cast<int32_t>(positions.size()));
    }
    std::vector<float> grads(static_cast<size_t>(kBatch) * dim);
    for (size_t k = 0; k < grads.size(); ++k) {
      grads[k] = 0.01f * static_cast<float>(
                             static_cast<int>((k * 37 + step) % 201) - 100);
    }
    ASSERT_OK(b->ApplyGradients(p, unique, offsets, positions, grads, step));
  }
  values->assign(static_cast<size_t>(kRows) * dim, 0);
  state->assign(static_cast<size_t>(kRows) * ss, 0);
  ASSERT_OK(
      b->Read(slots, absl::MakeSpan(*values), absl::MakeSpan(*state), ss));
  std::vector<int32_t> batch(kBatch);
  for (int i = 0; i < kBatch; ++i) batch[i] = slots[(i * 13) % kRows];
  gathered->assign(static_cast<size_t>(kBatch) * dim, 0);
  ASSERT_OK(b->Gather(batch, absl::MakeSpan(*gathered)));
}

class CudaBackendKindTest : public ::testing::TestWithParam<KindCase> {};

TEST_P(CudaBackendKindTest, MatchesTheCpuBackendBitForBit) {
  std::string why;
  std::unique_ptr<CacheBackend> cuda = CudaBackendOrWhyNot(&why);
  if (cuda == nullptr) GTEST_SKIP() << why;
  ASSERT_OK(optim::Validate(GetParam().spec));
  for (int dim : {1, 7, 64}) {
    SCOPED_TRACE(dim);
    CpuBackend cpu;
    std::vector<float> cv, cs, cg, gv, gs, gg;
    ExerciseLarge(&cpu, GetParam().spec, dim, &cv, &cs, &cg);
    ExerciseLarge(cuda.get(), GetParam().spec, dim, &gv, &gs, &gg);
    // Not vacuous: the steps moved the rows off their written values.
    EXPECT_NE(cv, Iota(cv.size(), -1, 1e-3f));
    EXPECT_EQ(cv, gv);
    EXPECT_EQ(cs, gs);
    EXPECT_EQ(cg, gg);
  }
}

INSTANTIATE_TEST_SUITE_P(Kinds, CudaBackendKindTest,
                         ::testing::ValuesIn(KindCases()),
                         [](const ::testing::TestParamInfo<KindCase>& info) {
                           return std::string(info.param.name);
                         });

}  // namespace
}  // namespace psdb::cache
