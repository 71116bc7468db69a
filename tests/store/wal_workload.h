// A deterministic sequence of store operations for the write-ahead log
// tests: store_wal_helper runs it in a process that the test kills, and the
// test runs the same prefix in a store that never crashed, then compares
// rows bit for bit.
//
// Tables: "adam" (dim 8, Adam, uniform init: order-sensitive float math)
// and "sgd" (dim 4, SGD lr 1, zeros: counting). Op i is, by i:
//   i % 50 == 49   Flush (the log is truncated)
//   i == 230       DropTable("sgd") then CreateTable("sgd")
//   i % 13 == 12   PutRows of 3 "adam" rows
//   i % 17 == 16   DeleteRows of 2 "adam" keys
//   i % 19 == 18   IngestRows of 2 encoded "adam" rows (a migration's
//                  destination write)
//   otherwise      a push of 16 keys (with repeats) to "adam", then to "sgd"
// Keys are drawn from [0, kWalKeys).
//
// Thread-safety: functions of their arguments.
#ifndef PSDB_TESTS_STORE_WAL_WORKLOAD_H_
#define PSDB_TESTS_STORE_WAL_WORKLOAD_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "optim/optimizer.h"
#include "psdb/store.h"
#include "store/row_codec.h"
#include "tests/store/store_test_util.h"

namespace psdb::testing {

inline constexpr uint64_t kWalKeys = 2000;

inline uint64_t WalMix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

inline TableSpec WalAdamSpec() {
  return MakeSpec("adam", 8, optim::OptimizerKind::kAdam, 0.01f,
                  InitKind::kUniform);
}
inline TableSpec WalSgdSpec() { return MakeSpec("sgd", 4); }

inline absl::Status WalSetup(Store& store) {
  if (absl::Status s = store.CreateTable(WalAdamSpec()); !s.ok()) return s;
  return store.CreateTable(WalSgdSpec());
}

// `first_push_only`: of a push op, only its push to "adam" (what a kill
// between the op's two pushes leaves).
inline absl::Status WalOp(Store& store, int i, bool first_push_only = false) {
  const uint64_t seed = WalMix(static_cast<uint64_t>(i) + 1);
  if (i % 50 == 49) return store.Flush();
  if (i == 230) {
    if (absl::Status s = store.DropTable("sgd"); !s.ok()) return s;
    return store.CreateTable(WalSgdSpec());
  }
  if (i % 13 == 12) {
    std::vector<uint64_t> keys = {seed % kWalKeys, (seed >> 16) % kWalKeys,
                                  (seed >> 32) % kWalKeys};
    RowBatch rows;
    rows.Resize(8, optim::StateSize(WalAdamSpec().optimizer, 8), 3);
    for (size_t j = 0; j < rows.values.size(); ++j) {
      rows.values[j] = static_cast<float>(WalMix(seed + j) % 1000) / 256.0f;
    }
    for (size_t j = 0; j < rows.state.size(); ++j) {
      rows.state[j] = static_cast<float>(WalMix(seed + 77 + j) % 100) / 64.0f;
    }
    for (int r = 0; r < 3; ++r) rows.headers[r] = RowHeader{i, 3u + r, 5};
    return store.PutRows("adam", keys, rows);
  }
  if (i % 17 == 16) {
    std::vector<uint64_t> keys = {seed % kWalKeys, (seed >> 20) % kWalKeys};
    return store.DeleteRows("adam", keys).status();
  }
  if (i % 19 == 18) {
    const int dim = 8;
    const int ss = optim::StateSize(WalAdamSpec().optimizer, dim);
    std::vector<uint64_t> keys = {(seed >> 8) % kWalKeys,
                                  (seed >> 40) % kWalKeys};
    std::string bytes(2 * EncodedRowSize(dim, ss), '\0');
    for (int r = 0; r < 2; ++r) {
      std::vector<float> values(dim), state(ss);
      for (int j = 0; j < dim; ++j) {
        values[j] = static_cast<float>(WalMix(seed + 5 * r + j) % 512) / 128.0f;
      }
      for (int j = 0; j < ss; ++j) {
        state[j] = static_cast<float>(WalMix(seed + 99 + j) % 64) / 32.0f;
      }
      EncodeRowTo(RowHeader{i, 7u, 2}, values, state,
                  bytes.data() + r * EncodedRowSize(dim, ss));
    }
    return store.IngestRows("adam", keys, bytes);
  }
  std::vector<uint64_t> keys(16);
  for (int j = 0; j < 16; ++j) {
    // A skewed draw with repeats: low keys come back often.
    const uint64_t r = WalMix(seed * 31 + j);
    keys[j] = (r % 4 == 0) ? r % 20 : (r >> 8) % kWalKeys;
  }
  std::vector<float> g8(16 * 8), g4(16 * 4);
  for (size_t j = 0; j < g8.size(); ++j) {
    g8[j] =
        static_cast<float>(static_cast<int>(WalMix(seed ^ j) % 2001) - 1000) /
        1024.0f;
  }
  for (size_t j = 0; j < g4.size(); ++j) g4[j] = -1.0f;  // adds 1 per push
  if (absl::Status s = store.Push("adam", keys, g8); !s.ok()) return s;
  if (first_push_only) return absl::OkStatus();
  return store.Push("sgd", keys, g4);
}

}  // namespace psdb::testing

#endif  // PSDB_TESTS_STORE_WAL_WORKLOAD_H_
