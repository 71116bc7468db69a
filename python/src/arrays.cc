#include "python/src/arrays.h"

#include "absl/strings/str_cat.h"
#include "python/src/errors.h"

namespace psdb::python {
namespace {

namespace py = pybind11;

// numpy's conversion of anything array-like (lists, torch CPU tensors via
// __array__); ValueError naming `what` if there is none.
py::array AsArray(const py::handle& object, const char* what) {
  if (object.is_none()) {
    ThrowValueError(absl::StrCat(what, " is None"));
  }
  py::array array = py::array::ensure(object);
  if (!array) {
    PyErr_Clear();
    ThrowValueError(absl::StrCat(what, " is not array-like"));
  }
  return array;
}

template <typename T>
void ConvertKeys(const py::array& array, const char* what,
                 std::vector<uint64_t>* out) {
  const auto* base = static_cast<const char*>(array.data());
  const ssize_t stride = array.strides(0);
  const size_t n = static_cast<size_t>(array.shape(0));
  out->resize(n);
  for (size_t i = 0; i < n; ++i) {
    const T v = *reinterpret_cast<const T*>(base + stride * ssize_t(i));
    if constexpr (std::is_signed_v<T>) {
      if (v < 0) {
        ThrowValueError(absl::StrCat(what, "[", i, "] is negative (",
                                     static_cast<int64_t>(v),
                                     "); keys are unsigned 64-bit ids"));
      }
    }
    (*out)[i] = static_cast<uint64_t>(v);
  }
}

}  // namespace

std::string DtypeName(const py::array& array) {
  return py::str(array.dtype()).cast<std::string>();
}

KeyArray::KeyArray(const py::handle& ids, const char* what)
    : array_(AsArray(ids, what)) {
  if (array_.ndim() != 1) {
    ThrowValueError(
        absl::StrCat(what, " must be 1-D, got ", array_.ndim(), "-D"));
  }
  const py::dtype dtype = array_.dtype();
  const char kind = dtype.kind();
  if (kind != 'i' && kind != 'u') {
    ThrowValueError(absl::StrCat(what, " must be an integer array, got ",
                                 DtypeName(array_)));
  }
  if (!dtype.attr("isnative").cast<bool>()) {
    ThrowValueError(absl::StrCat(what, " must be in native byte order"));
  }
  size_ = static_cast<size_t>(array_.shape(0));
  const int width = static_cast<int>(dtype.itemsize());
  const bool contiguous =
      size_ <= 1 || array_.strides(0) == static_cast<ssize_t>(width);
  if (contiguous && width == 8) {
    data_ = static_cast<const uint64_t*>(array_.data());
    if (kind == 'i') {
      const auto* signed_data = reinterpret_cast<const int64_t*>(data_);
      for (size_t i = 0; i < size_; ++i) {
        if (signed_data[i] < 0) {
          ThrowValueError(absl::StrCat(what, "[", i, "] is negative (",
                                       signed_data[i],
                                       "); keys are unsigned 64-bit ids"));
        }
      }
    }
    return;
  }
  switch (width * (kind == 'i' ? -1 : 1)) {
    case -1:
      ConvertKeys<int8_t>(array_, what, &copy_);
      break;
    case -2:
      ConvertKeys<int16_t>(array_, what, &copy_);
      break;
    case -4:
      ConvertKeys<int32_t>(array_, what, &copy_);
      break;
    case -8:
      ConvertKeys<int64_t>(array_, what, &copy_);
      break;
    case 1:
      ConvertKeys<uint8_t>(array_, what, &copy_);
      break;
    case 2:
      ConvertKeys<uint16_t>(array_, what, &copy_);
      break;
    case 4:
      ConvertKeys<uint32_t>(array_, what, &copy_);
      break;
    case 8:
      ConvertKeys<uint64_t>(array_, what, &copy_);
      break;
    default:
      ThrowValueError(absl::StrCat(what, ": unsupported integer dtype ",
                                   DtypeName(array_)));
  }
  data_ = copy_.data();
}

FloatArray::FloatArray(const py::handle& values, const char* what)
    : array_(AsArray(values, what)) {
  if (!py::isinstance<py::array_t<float>>(array_)) {
    ThrowValueError(
        absl::StrCat(what, " must be float32, got ", DtypeName(array_)));
  }
  if (!(array_.flags() & py::array::c_style)) {
    // Strided input (a slice, a transpose): numpy makes the one copy.
    borrowed_ = false;
    array_ =
        py::array_t<float, py::array::c_style | py::array::forcecast>::ensure(
            array_);
    if (!array_) throw py::error_already_set();
  }
  data_ = static_cast<const float*>(array_.data());
  size_ = static_cast<size_t>(array_.size());
}

absl::Span<float> OutRows(const py::array& out, size_t rows, int dim) {
  if (!py::isinstance<py::array_t<float>>(out)) {
    ThrowValueError(absl::StrCat("out must be float32, got ", DtypeName(out)));
  }
  if (out.ndim() != 2 || out.shape(0) != static_cast<ssize_t>(rows) ||
      out.shape(1) != dim) {
    std::string shape;
    for (ssize_t i = 0; i < out.ndim(); ++i) {
      absl::StrAppend(&shape, i == 0 ? "" : ", ", out.shape(i));
    }
    ThrowValueError(absl::StrCat("out must have shape (", rows, ", ", dim,
                                 "), got (", shape, ")"));
  }
  if (!(out.flags() & py::array::c_style)) {
    ThrowValueError("out must be C-contiguous");
  }
  if (!out.writeable()) ThrowValueError("out is read-only");
  return {static_cast<float*>(const_cast<void*>(out.data())), rows * dim};
}

py::array_t<float> ArrayFromVector(std::vector<float>&& data, size_t rows,
                                   size_t cols) {
  auto* owned = new std::vector<float>(std::move(data));
  py::capsule owner(
      owned, [](void* p) { delete static_cast<std::vector<float>*>(p); });
  return py::array_t<float>(
      {static_cast<ssize_t>(rows), static_cast<ssize_t>(cols)},
      {static_cast<ssize_t>(cols * sizeof(float)),
       static_cast<ssize_t>(sizeof(float))},
      owned->data(), owner);
}

}  // namespace psdb::python
