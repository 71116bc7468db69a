// TableSpec in Python: psdb.TableSpec (a read-only view of a C++ TableSpec)
// and the keyword arguments of Client.create_table. Enum names
// ("adagrad", "truncated_normal", "skip_row", ...) are converted by
// manifest/manifest.h's TableSpecToProto / TableSpecFromProto, the one place
// psdb names them; the keyword defaults are read from a default-constructed
// TableSpec, so Python never restates a C++ default.
//
// Thread-safety: REQUIRES the GIL.
#ifndef PSDB_PYTHON_SRC_TABLE_SPEC_H_
#define PSDB_PYTHON_SRC_TABLE_SPEC_H_

#include <pybind11/pybind11.h>

#include <cstdint>
#include <string>

#include "psdb/table_spec.h"
#include "python/src/client.h"

namespace psdb::python {

// create_table's arguments, as Python passed them.
struct TableSpecArgs {
  std::string name;
  int64_t dim = 0;
  std::string optimizer;
  double learning_rate, momentum;
  bool nesterov;
  double initial_accumulator, beta1, beta2, epsilon, l1, l2, lr_power,
      weight_decay, accumulator_decay;
  std::string initializer;
  double init_a, init_b;
  uint64_t seed;
  int64_t admission_threshold, ttl_steps;
  std::string non_finite, serving_default;
};

// ValueError on unknown names and out-of-range integers; ranges of the
// values themselves are checked by the store (ValidateTableSpec).
TableSpec TableSpecFromArgs(const TableSpecArgs& args);

// The float32 `f` as the shortest double that rounds back to it (0.01f ->
// 0.01, not 0.009999999776482582), for defaults and attributes.
double ShortestDouble(float f);

// Registers psdb.TableSpec.
void RegisterTableSpec(pybind11::module_& m);
// Defines Client.create_table, its defaults read from TableSpec{}.
void RegisterCreateTable(
    pybind11::class_<ClientHandle, std::shared_ptr<ClientHandle>>& client);

}  // namespace psdb::python

#endif  // PSDB_PYTHON_SRC_TABLE_SPEC_H_
