// psdb.criteo_keys: the psdb keys of Criteo categorical values, computed by
// the C++ function ps-train uses (train/criteo_reader.h CategoricalKey), so
// a Python trainer on the same files gets the same keys as ps-train.
//
// Thread-safety: REQUIRES the GIL (released while the keys are computed).
#ifndef PSDB_PYTHON_SRC_CRITEO_H_
#define PSDB_PYTHON_SRC_CRITEO_H_

#include <pybind11/pybind11.h>

namespace psdb::python {

void RegisterCriteo(pybind11::module_& m);

}  // namespace psdb::python

#endif  // PSDB_PYTHON_SRC_CRITEO_H_
