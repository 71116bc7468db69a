#include "python/src/errors.h"

#include <string>

namespace psdb::python {
namespace {

namespace py = pybind11;

// Owned by the module object (added as attributes); the interpreter keeps
// them alive as long as the module, which outlives every call.
PyObject* data_loss_error = nullptr;
PyObject* failed_precondition_error = nullptr;

PyObject* ExceptionFor(absl::StatusCode code) {
  switch (code) {
    case absl::StatusCode::kInvalidArgument:
    case absl::StatusCode::kOutOfRange:
      return PyExc_ValueError;
    case absl::StatusCode::kNotFound:
      return PyExc_KeyError;
    case absl::StatusCode::kUnavailable:
    case absl::StatusCode::kDeadlineExceeded:
      return PyExc_ConnectionError;
    case absl::StatusCode::kDataLoss:
      return data_loss_error;
    case absl::StatusCode::kFailedPrecondition:
      return failed_precondition_error;
    default:
      return PyExc_RuntimeError;
  }
}

}  // namespace

void RegisterErrors(py::module_& m) {
  data_loss_error = PyErr_NewExceptionWithDoc(
      "psdb.DataLossError",
      "Stored data is unreadable or lost (absl::StatusCode::kDataLoss), "
      "e.g. a corrupt checkpoint manifest.",
      PyExc_Exception, nullptr);
  failed_precondition_error = PyErr_NewExceptionWithDoc(
      "psdb.FailedPreconditionError",
      "The system is not in a state the call requires "
      "(absl::StatusCode::kFailedPrecondition), e.g. a data directory held "
      "by another process. A subclass of RuntimeError.",
      PyExc_RuntimeError, nullptr);
  if (data_loss_error == nullptr || failed_precondition_error == nullptr) {
    throw py::error_already_set();
  }
  m.attr("DataLossError") = py::handle(data_loss_error);
  m.attr("FailedPreconditionError") = py::handle(failed_precondition_error);
}

void ThrowStatus(const absl::Status& status) {
  const std::string message(status.message());
  PyErr_SetString(ExceptionFor(status.code()), message.c_str());
  throw py::error_already_set();
}

void ThrowValueError(const std::string& message) {
  throw py::value_error(message);
}

}  // namespace psdb::python
