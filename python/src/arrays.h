// numpy arrays as spans for the C++ calls, without copies where the layout
// allows (STYLE.md 13: convert and forward).
//
//  - KeyArray: any 1-D integer array (or sequence numpy converts to one) as
//    uint64 keys. A C-contiguous uint64 or int64 array is used in place
//    (int64 is checked for negatives, which are not keys); other integer
//    widths and strided arrays are converted into an owned copy.
//  - FloatArray: a float32 array (any shape) read in place when
//    C-contiguous, else copied; other dtypes are refused, never converted,
//    so a float64 gradient is a ValueError rather than a silent cast.
//  - OutRows: the caller's `out` array, which must be C-contiguous,
//    writeable float32 of shape (rows, dim).
//
// Thread-safety: construct with the GIL held. The spans stay valid without
// the GIL for as long as the object lives (it holds a reference to the
// array), so the C++ call can run with the GIL released.
#ifndef PSDB_PYTHON_SRC_ARRAYS_H_
#define PSDB_PYTHON_SRC_ARRAYS_H_

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <cstdint>
#include <string>
#include <vector>

#include "absl/types/span.h"

namespace psdb::python {

class KeyArray {
 public:
  // ValueError naming `what` unless `ids` is a 1-D integer array of
  // non-negative values.
  explicit KeyArray(const pybind11::handle& ids, const char* what = "ids");

  absl::Span<const uint64_t> span() const { return {data_, size_}; }
  size_t size() const { return size_; }
  // True when the keys are the caller's buffer (for tests of zero-copy).
  bool borrowed() const { return copy_.empty() && size_ > 0; }

 private:
  pybind11::array array_;  // keeps a borrowed buffer alive
  std::vector<uint64_t> copy_;
  const uint64_t* data_ = nullptr;
  size_t size_ = 0;
};

class FloatArray {
 public:
  // ValueError naming `what` unless `values` is a float32 array.
  FloatArray(const pybind11::handle& values, const char* what);

  absl::Span<const float> span() const { return {data_, size_}; }
  // True when the floats are the caller's buffer (for tests of zero-copy).
  bool borrowed() const { return borrowed_; }
  int ndim() const { return static_cast<int>(array_.ndim()); }
  int64_t shape(int i) const { return array_.shape(i); }

 private:
  pybind11::array array_;
  bool borrowed_ = true;
  const float* data_ = nullptr;
  size_t size_ = 0;
};

// ValueError unless `out` is a writeable C-contiguous float32 array of shape
// (rows, dim); returns its buffer.
absl::Span<float> OutRows(const pybind11::array& out, size_t rows, int dim);

// A new C-contiguous float32 array of shape (rows, cols) whose buffer is
// `*data`, moved in (no copy); the array owns it.
pybind11::array_t<float> ArrayFromVector(std::vector<float>&& data, size_t rows,
                                         size_t cols);

// The dtype of a numpy array as numpy prints it ("float64", "int32", ...).
std::string DtypeName(const pybind11::array& array);

}  // namespace psdb::python

#endif  // PSDB_PYTHON_SRC_ARRAYS_H_
