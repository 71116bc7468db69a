// Helpers shared by the store test binaries.
#ifndef PSDB_TESTS_STORE_STORE_TEST_UTIL_H_
#define PSDB_TESTS_STORE_STORE_TEST_UTIL_H_

#include <string>
#include <vector>

#include "psdb/store.h"
#include "psdb/table_spec.h"

namespace psdb::testing {

// dim-wide table with the given optimizer; zeros init unless told.
inline TableSpec MakeSpec(
    const std::string& name, int dim,
    optim::OptimizerKind kind = optim::OptimizerKind::kSgd, float lr = 1.0f,
    InitKind init = InitKind::kZeros) {
  TableSpec s;
  s.name = name;
  s.dim = dim;
  s.initializer = {init, init == InitKind::kZeros ? 0.0f : -0.5f,
                   init == InitKind::kZeros ? 0.0f : 0.5f};
  s.optimizer.kind = kind;
  s.optimizer.learning_rate = lr;
  s.seed = 1234;
  return s;
}

// `budget`: the memory tier's share (rows); RocksDB's 1 MiB comes on top.
inline StoreOptions SmallOptions(uint64_t budget = 1 << 20) {
  StoreOptions o;
  o.rocksdb_block_cache_bytes = 1 << 20;
  o.memory_budget_bytes = budget + o.rocksdb_block_cache_bytes;
  o.index_stripes = 8;
  return o;
}

}  // namespace psdb::testing

#endif  // PSDB_TESTS_STORE_STORE_TEST_UTIL_H_
