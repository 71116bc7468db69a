#include "python/src/criteo.h"

#include <pybind11/numpy.h>

#include <cstdint>

#include "absl/strings/str_cat.h"
#include "python/src/errors.h"
#include "train/criteo_reader.h"

namespace psdb::python {
namespace {

namespace py = pybind11;

// values: (n, fields) uint64 hex values; present: (n, fields) bool. Column
// f is categorical field first_field + f.
py::array_t<uint64_t> CriteoKeys(
    const py::array_t<uint64_t, py::array::c_style | py::array::forcecast>&
        values,
    const py::array_t<bool, py::array::c_style | py::array::forcecast>& present,
    int first_field) {
  if (values.ndim() != 2 || present.ndim() != 2 ||
      values.shape(0) != present.shape(0) ||
      values.shape(1) != present.shape(1)) {
    ThrowValueError("values and present must be 2-D arrays of one shape");
  }
  const size_t rows = static_cast<size_t>(values.shape(0));
  const size_t fields = static_cast<size_t>(values.shape(1));
  if (first_field < 0 || first_field + fields > 26) {
    ThrowValueError(absl::StrCat("fields ", first_field, "..",
                                 first_field + fields - 1,
                                 " are not Criteo's categorical fields 0..25"));
  }
  py::array_t<uint64_t> out({rows, fields});
  const uint64_t* v = values.data();
  const bool* p = present.data();
  uint64_t* o = out.mutable_data();
  {
    py::gil_scoped_release release;
    for (size_t i = 0; i < rows * fields; ++i) {
      o[i] = train::CategoricalKey(first_field + static_cast<int>(i % fields),
                                   v[i], p[i]);
    }
  }
  return out;
}

}  // namespace

void RegisterCriteo(py::module_& m) {
  m.def("criteo_keys", &CriteoKeys, py::arg("values"), py::arg("present"),
        py::arg("first_field") = 0,
        "The psdb keys of Criteo categorical values: values (n, fields) "
        "uint64 hex values, present (n, fields) bool (a missing value gets "
        "its field's 'missing' key); column f is field first_field + f. The "
        "keys ps-train's reader gives (train/criteo_reader.h).");
}

}  // namespace psdb::python
