// Shared pieces of the VocabCache tests: a real store on a scratch
// directory, a deterministic workload, the reference run without a cache,
// and a bit-for-bit comparison of two stores' rows.
#ifndef PSDB_TESTS_CACHE_VOCAB_CACHE_TESTING_H_
#define PSDB_TESTS_CACHE_VOCAB_CACHE_TESTING_H_

#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "absl/types/span.h"
#include "psdb/local_client.h"
#include "psdb/vocab_cache.h"
#include "tests/testing/test_util.h"
#include "util/hash.h"

namespace psdb::cache::testing {

inline TableSpec MakeSpec(const std::string& name, int dim,
                          optim::OptimizerKind kind) {
  TableSpec spec;
  spec.name = name;
  spec.dim = dim;
  spec.seed = 42;
  spec.optimizer.kind = kind;
  spec.optimizer.learning_rate = 0.05f;
  spec.optimizer.weight_decay = 0.001f;
  return spec;
}

// Batch t of table `salt`: `size` ids from a skewed vocabulary of `vocab`,
// with duplicates.
inline std::vector<uint64_t> MakeIds(int t, int size, int vocab, int salt = 0) {
  std::vector<uint64_t> ids(size);
  for (int i = 0; i < size; ++i) {
    const uint64_t r =
        Mix64(static_cast<uint64_t>(t) * 1000003 + i * 31 + salt);
    // Squaring a uniform draw favours small ids.
    const double u = static_cast<double>(r >> 11) * 0x1.0p-53;
    ids[i] = 1000 + static_cast<uint64_t>(u * u * vocab) + salt * 100000;
  }
  return ids;
}

// The trainer's gradient: a function of the rows it was served (so a wrong
// row changes everything after it), the position and the step.
inline std::vector<float> MakeGrads(absl::Span<const float> rows, int dim,
                                    int t) {
  std::vector<float> g(rows.size());
  for (size_t i = 0; i < rows.size(); ++i) {
    g[i] = 0.5f * rows[i] + 0.01f * static_cast<float>((i + t) % 7 + 1);
  }
  return g;
}

// A LocalClient on its own scratch directory.
struct TestStore {
  ::psdb::testing::ScratchDir dir;
  std::unique_ptr<LocalClient> client;
};

inline std::unique_ptr<TestStore> OpenStore(
    const std::vector<TableSpec>& specs) {
  auto s = std::make_unique<TestStore>();
  auto c = LocalClient::Open(s->dir.Sub("db"));
  if (!c.ok()) {
    ADD_FAILURE() << c.status();
    return nullptr;
  }
  s->client = std::move(c).value();
  for (const TableSpec& spec : specs) {
    absl::Status st = s->client->CreateTable(spec);
    if (!st.ok()) ADD_FAILURE() << st;
  }
  return s;
}

// Expects every row of `keys` to be bit-identical in the two stores:
// values, optimizer state and header (without its frequency unless
// `frequency`: a push-through cache's fetches are not the trainer's pulls).
inline void ExpectSameRows(ParameterClient* a, ParameterClient* b,
                           const std::string& table,
                           const std::vector<uint64_t>& keys,
                           bool frequency = true) {
  RowBatch ra, rb;
  ASSERT_OK(a->PullRows(table, keys, &ra));
  ASSERT_OK(b->PullRows(table, keys, &rb));
  ASSERT_EQ(ra.values.size(), rb.values.size());
  ASSERT_EQ(ra.state.size(), rb.state.size());
  int bad = 0;
  for (size_t i = 0; i < keys.size() && bad < 5; ++i) {
    const bool values_same =
        std::memcmp(ra.values.data() + i * ra.dim,
                    rb.values.data() + i * rb.dim, 4 * ra.dim) == 0;
    const bool state_same =
        ra.state_size == 0 || std::memcmp(ra.state.data() + i * ra.state_size,
                                          rb.state.data() + i * rb.state_size,
                                          4 * ra.state_size) == 0;
    const bool header_same =
        ra.headers[i].last_update_step == rb.headers[i].last_update_step &&
        ra.headers[i].update_count == rb.headers[i].update_count &&
        (!frequency || ra.headers[i].frequency == rb.headers[i].frequency);
    if (!values_same || !state_same || !header_same) {
      ++bad;
      ADD_FAILURE() << "table " << table << " key " << keys[i] << ": values "
                    << (values_same ? "same" : "differ") << ", state "
                    << (state_same ? "same" : "differ") << ", header ("
                    << ra.headers[i].last_update_step << ","
                    << ra.headers[i].update_count << ","
                    << ra.headers[i].frequency << ") vs ("
                    << rb.headers[i].last_update_step << ","
                    << rb.headers[i].update_count << ","
                    << rb.headers[i].frequency << ")";
    }
  }
}

}  // namespace psdb::cache::testing

#endif  // PSDB_TESTS_CACHE_VOCAB_CACHE_TESTING_H_
