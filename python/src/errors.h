// absl::Status -> Python exception: the one mapping of the psdb module.
//
//   InvalidArgument, OutOfRange       -> ValueError
//   NotFound                          -> KeyError
//   Unavailable, DeadlineExceeded     -> ConnectionError
//   DataLoss                          -> psdb.DataLossError (an Exception)
//   FailedPrecondition                -> psdb.FailedPreconditionError (a
//                                        RuntimeError, so code that catches
//                                        RuntimeError keeps working)
//   everything else                   -> RuntimeError
// The exception's message is psdb's message, unchanged.
//
// Thread-safety: REQUIRES the GIL (raising touches interpreter state).
#ifndef PSDB_PYTHON_SRC_ERRORS_H_
#define PSDB_PYTHON_SRC_ERRORS_H_

#include <pybind11/pybind11.h>

#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace psdb::python {

// Creates psdb.DataLossError and psdb.FailedPreconditionError in `m`.
void RegisterErrors(pybind11::module_& m);

// Raises the exception for `status`. REQUIRES: !status.ok().
[[noreturn]] void ThrowStatus(const absl::Status& status);

inline void ThrowIfError(const absl::Status& status) {
  if (!status.ok()) ThrowStatus(status);
}

template <typename T>
T ValueOrThrow(absl::StatusOr<T> value) {
  if (!value.ok()) ThrowStatus(value.status());
  return *std::move(value);
}

// ValueError with `message` (argument checks done in the binding itself,
// e.g. numpy dtypes and shapes, before any C++ call).
[[noreturn]] void ThrowValueError(const std::string& message);

}  // namespace psdb::python

#endif  // PSDB_PYTHON_SRC_ERRORS_H_
