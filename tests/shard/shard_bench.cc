// psdb_shard_bench: owner lookup and partitioning of 4096-key batches, the
// per-request cost of routing in RemoteClient. Run a Release build:
//   cmake --build build/release --target psdb_shard_bench &&
//   build/release/tests/shard/psdb_shard_bench
#include <cstdint>
#include <random>
#include <vector>

#include "benchmark/benchmark.h"
#include "shard/partitioner.h"
#include "shard/ring.h"

namespace psdb {
namespace {

constexpr size_t kBatch = 4096;

Ring MakeRing(int servers) {
  std::vector<RingMember> members;
  for (int i = 0; i < servers; ++i) members.push_back({i, 1.0f});
  return Ring::Create(RingOptions(), members).value();
}

// A batch of kBatch keys; `distinct` of them different (the rest repeat),
// like a recommendation batch where hot ids recur.
std::vector<uint64_t> Batch(size_t distinct) {
  std::mt19937_64 rng(7);
  std::vector<uint64_t> pool(distinct);
  for (uint64_t& k : pool) k = rng();
  std::vector<uint64_t> keys(kBatch);
  for (size_t i = 0; i < kBatch; ++i) keys[i] = pool[rng() % distinct];
  return keys;
}

void BM_OwnerLookup(benchmark::State& state) {
  const Ring ring = MakeRing(state.range(0));
  const std::vector<uint64_t> keys = Batch(kBatch);
  for (auto _ : state) {
    for (uint64_t key : keys) benchmark::DoNotOptimize(ring.OwnerIndex(key));
  }
  state.SetItemsProcessed(state.iterations() * kBatch);
}
BENCHMARK(BM_OwnerLookup)->Arg(10)->Arg(100)->Arg(1000);

void BM_OwnerIndicesBatch(benchmark::State& state) {
  const Ring ring = MakeRing(state.range(0));
  const std::vector<uint64_t> keys = Batch(kBatch);
  std::vector<uint32_t> out(kBatch);
  for (auto _ : state) {
    ring.OwnerIndices(keys, absl::MakeSpan(out));
    benchmark::DoNotOptimize(out.data());
  }
  state.SetItemsProcessed(state.iterations() * kBatch);
}
BENCHMARK(BM_OwnerIndicesBatch)->Arg(10)->Arg(100)->Arg(1000);

// Args: servers, distinct keys in the batch, deduplicate.
void BM_Partition(benchmark::State& state) {
  const Ring ring = MakeRing(state.range(0));
  const std::vector<uint64_t> keys = Batch(state.range(1));
  const bool dedup = state.range(2) != 0;
  Partitioner partitioner;
  for (auto _ : state) {
    benchmark::DoNotOptimize(partitioner.Partition(ring, keys, dedup).ok());
  }
  state.SetItemsProcessed(state.iterations() * kBatch);
}
BENCHMARK(BM_Partition)
    ->Args({10, 4096, 1})
    ->Args({10, 1024, 1})
    ->Args({10, 4096, 0})
    ->Args({1000, 4096, 1})
    ->Args({1000, 1024, 1});

// Partition + scatter of 16-float rows: the client side of a Pull.
void BM_PartitionScatterDim16(benchmark::State& state) {
  const Ring ring = MakeRing(state.range(0));
  const std::vector<uint64_t> keys = Batch(1024);
  Partitioner partitioner;
  std::vector<float> sent(kBatch * 16, 1.0f), out(kBatch * 16);
  for (auto _ : state) {
    (void)partitioner.Partition(ring, keys);
    (void)partitioner.Scatter<float>(
        absl::MakeConstSpan(sent.data(), partitioner.num_sent() * 16), 16,
        absl::MakeSpan(out));
    benchmark::DoNotOptimize(out.data());
  }
  state.SetItemsProcessed(state.iterations() * kBatch);
}
BENCHMARK(BM_PartitionScatterDim16)->Arg(10)->Arg(1000);

// Partition + summing the duplicates' 16-float gradients: the client side
// of a Push.
void BM_PartitionGatherSumDim16(benchmark::State& state) {
  const Ring ring = MakeRing(state.range(0));
  const std::vector<uint64_t> keys = Batch(1024);
  Partitioner partitioner;
  std::vector<float> grads(kBatch * 16, 1.0f), sent(kBatch * 16);
  for (auto _ : state) {
    (void)partitioner.Partition(ring, keys);
    (void)partitioner.GatherSum<float>(
        grads, 16, absl::MakeSpan(sent.data(), partitioner.num_sent() * 16));
    benchmark::DoNotOptimize(sent.data());
  }
  state.SetItemsProcessed(state.iterations() * kBatch);
}
BENCHMARK(BM_PartitionGatherSumDim16)->Arg(10)->Arg(1000);

void BM_RingCreate(benchmark::State& state) {
  std::vector<RingMember> members;
  for (int i = 0; i < state.range(0); ++i) members.push_back({i, 1.0f});
  for (auto _ : state) {
    benchmark::DoNotOptimize(Ring::Create(RingOptions(), members).ok());
  }
}
BENCHMARK(BM_RingCreate)->Arg(10)->Arg(1000)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace psdb

BENCHMARK_MAIN();
