// TableSpec: what a table is (name, dimension, initializer, optimizer,
// admission, TTL) and the deterministic row initialization every psdb
// component shares.
//
// Deterministic initialization: a new row's values are a pure function of
// (spec.seed, key, spec.initializer). Element j of key k is drawn from a
// counter-based stream: u = Mix64(HashKey(k, seed) + j * golden) mapped to
// [0,1); normals use Box-Muller on two such draws; truncated normals redraw
// (with the next counters) until |x - mean| <= 2 std, as TensorFlow's
// truncated_normal does. The same key therefore gets the same vector on any
// server, after any migration, in embedded or cluster mode.
//
// Thread-safety: plain values and pure functions.
#ifndef PSDB_TABLE_SPEC_H_
#define PSDB_TABLE_SPEC_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "psdb/optimizer.h"

namespace psdb {

enum class InitKind : int {
  kZeros = 0,
  kConstant = 1,         // every element = a
  kUniform = 2,          // U(a, b)
  kNormal = 3,           // N(mean = a, std = b)
  kTruncatedNormal = 4,  // N(a, b) truncated to [a - 2b, a + 2b]
};

struct InitializerSpec {
  // Default: uniform(-0.05, 0.05), Keras' Embedding default.
  InitKind kind = InitKind::kUniform;
  float a = -0.05f;
  float b = 0.05f;
};

// The largest gradient magnitude a push may carry, per element and for the
// sum of a key's duplicates in one push: beyond it the square that Adagrad,
// Adam and FTRL accumulate overflows float (sqrt(FLT_MAX) is 1.8e19).
// Larger gradients count as non-finite (NonFinitePolicy).
inline constexpr float kMaxGradient = 1e18f;

// What a pushed gradient containing NaN, Inf or an element beyond
// kMaxGradient does. Either way a stored row stays finite: an update that
// would still make a row's value or optimizer state non-finite (an
// accumulator overflowing after many huge pushes) is undone for that row
// and counted in TableStats::non_finite_updates.
enum class NonFinitePolicy : int {
  kReject = 0,  // the whole request fails with InvalidArgument, nothing applied
  kSkipRow = 1,  // rows with a non-finite gradient are left untouched
};

// What a serving (read-only) pull returns for a key that has no row.
enum class MissingRowValue : int {
  kInit = 0,   // the deterministic initial vector the row would get
  kZeros = 1,  // zeros
};

struct TableSpec {
  // [A-Za-z0-9_.-]{1,128}, not "." or ".." or "default" (RocksDB's default
  // column family; each table's column family is named after it). REQUIRED.
  std::string name;
  // Floats per row, 1..65536. REQUIRED.
  int dim = 0;
  InitializerSpec initializer;
  optim::OptimizerSpec optimizer;
  // Seed of the deterministic initializer. Default: 0
  uint64_t seed = 0;
  // A key is materialized on its N-th sighting (pull or push); before that
  // pulls get the table default and pushes are counted, not applied.
  // 0 or 1 = materialize at once. Default: 0
  uint32_t admission_threshold = 0;
  // Rows whose last update is more than this many steps before the table's
  // current step are dropped at checkpoint. 0 = never. Default: 0
  int64_t ttl_steps = 0;
  // Default: kReject
  NonFinitePolicy non_finite = NonFinitePolicy::kReject;
  // Default: kInit
  MissingRowValue serving_default = MissingRowValue::kInit;

  friend bool operator==(const TableSpec&, const TableSpec&);
};

// InvalidArgument naming the offending name unless it matches
// [A-Za-z0-9_.-]{1,128} and is not "." or ".." or "default".
absl::Status ValidateTableName(absl::string_view name);

// Name, dim, initializer parameters (b > 0 for normals, a < b for uniform)
// and optim::Validate of the optimizer.
absl::Status ValidateTableSpec(const TableSpec& spec);

// Writes key's deterministic initial vector. REQUIRES: values.size() == dim.
void InitializeRow(const TableSpec& spec, uint64_t key,
                   absl::Span<float> values);

// The row a serving pull of a missing key returns (InitializeRow or zeros).
void DefaultRow(const TableSpec& spec, uint64_t key, absl::Span<float> values);

}  // namespace psdb

#endif  // PSDB_TABLE_SPEC_H_
