// A counting-gradient table for the store's fault tests: table "emb",
// dim 64, SGD with learning rate 1 and a zero initializer, so every push of
// gradient -1 adds exactly 1 to each value of its row, and a lost or doubled
// update shows as an exact difference from the acknowledged count.
//
// Thread-safety: functions of their arguments; use from one thread.
#ifndef PSDB_TESTS_STORE_COUNTING_TABLE_H_
#define PSDB_TESTS_STORE_COUNTING_TABLE_H_

#include <algorithm>
#include <cstdint>
#include <map>
#include <vector>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "gtest/gtest.h"
#include "psdb/store.h"
#include "tests/testing/test_util.h"

namespace psdb::testing {

inline constexpr int kDim = 64;
// dim 64, SGD: 256 B values + 24 B header + 24 B slot metadata.
inline constexpr uint64_t kSlotBytes = 304;
inline constexpr size_t kBatch = 256;
// The rows' share of the budget (SmallOptions adds RocksDB's on top).
inline constexpr uint64_t kBudget = 1 << 20;

// Acknowledged pushes per key: the value every element of its row must have.
using Counts = std::map<uint64_t, int>;

inline std::vector<uint64_t> BatchKeys(uint64_t first, size_t n) {
  std::vector<uint64_t> keys(n);
  for (size_t i = 0; i < n; ++i) keys[i] = first + i * 7919;  // scattered
  return keys;
}

// Pushes gradient -1 to `keys` of "emb"; counts them if acknowledged.
inline absl::Status PushOnes(Store& store, const std::vector<uint64_t>& keys,
                             Counts* counts) {
  const std::vector<float> grads(keys.size() * kDim, -1.0f);
  absl::Status s = store.Push("emb", keys, grads);
  if (s.ok()) {
    for (uint64_t k : keys) ++(*counts)[k];
  }
  return s;
}

// PushOnes until it is acknowledged, for up to 10 s: after a disk fault
// clears, the store's Resume() of RocksDB is rate limited. The last status.
inline absl::Status PushOnesOnceResumed(Store& store,
                                        const std::vector<uint64_t>& keys,
                                        Counts* counts) {
  absl::Status last;
  (void)WaitFor(
      [&] {
        last = PushOnes(store, keys, counts);
        return last.ok();
      },
      absl::Seconds(10));
  return last;
}

// Every acknowledged push is there exactly once: each row's values equal
// its count (pulled kBatch keys at a time).
inline void ExpectCounts(Store& store, const Counts& counts) {
  std::vector<uint64_t> keys;
  for (const auto& [k, n] : counts) keys.push_back(k);
  for (size_t b = 0; b < keys.size(); b += kBatch) {
    const std::vector<uint64_t> chunk(
        keys.begin() + b, keys.begin() + std::min(keys.size(), b + kBatch));
    std::vector<float> out(chunk.size() * kDim);
    ASSERT_OK(store.Pull("emb", chunk, absl::MakeSpan(out)));
    for (size_t i = 0; i < chunk.size(); ++i) {
      for (int j = 0; j < kDim; ++j) {
        ASSERT_EQ(out[i * kDim + j], static_cast<float>(counts.at(chunk[i])))
            << "key " << chunk[i];
      }
    }
  }
}

// No row exists for any of `keys` (ReadRows creates nothing).
inline void ExpectAbsent(Store& store, const std::vector<uint64_t>& keys) {
  RowBatch rows;
  std::vector<uint8_t> present;
  ASSERT_OK(store.ReadRows("emb", keys, &rows, &present));
  for (size_t i = 0; i < keys.size(); ++i) {
    EXPECT_EQ(present[i], 0) << "key " << keys[i];
  }
}

// The memory tier's bound: its rows' share of the budget plus the rows of
// the one call in flight (a refused eviction must not grow it).
inline uint64_t RowsBound() { return kBudget + kBatch * kSlotBytes; }

// Bytes the memory tier's rows use (Stats().memory_used_bytes also counts
// RocksDB's cache).
inline uint64_t RowBytes(const Store& store) {
  uint64_t bytes = 0;
  for (const TableStats& t : store.Stats().tables) bytes += t.memory_bytes;
  return bytes;
}

}  // namespace psdb::testing

#endif  // PSDB_TESTS_STORE_COUNTING_TABLE_H_
