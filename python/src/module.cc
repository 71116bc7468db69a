// psdb._psdb: the extension module behind `import psdb` (python/psdb/).
// Conversions and forwarding only; every behaviour is the C++ library's.
#include <pybind11/pybind11.h>

#include "python/src/arrays.h"
#include "python/src/bench.h"
#include "python/src/cache.h"
#include "python/src/client.h"
#include "python/src/criteo.h"
#include "python/src/errors.h"
#include "python/src/table_spec.h"

PYBIND11_MODULE(_psdb, m) {
  m.doc() = "psdb's C++ core; import psdb instead.";
  psdb::python::RegisterErrors(m);
  psdb::python::RegisterTableSpec(m);
  psdb::python::RegisterClient(m);
  psdb::python::RegisterCache(m);
  psdb::python::RegisterCriteo(m);
  psdb::python::RegisterBench(m);
  // Testing hooks: whether an argument would be read in place (no copy).
  m.def("_ids_borrowed", [](pybind11::handle ids) {
    return psdb::python::KeyArray(ids).borrowed();
  });
  m.def("_floats_borrowed", [](pybind11::handle values) {
    return psdb::python::FloatArray(values, "values").borrowed();
  });
}
