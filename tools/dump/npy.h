// Streaming writer of NumPy .npy files (format version 1.0), so exports load
// with numpy.load() and no Python on the writing side.
//
// Format (numpy.lib.format): the magic "\x93NUMPY", version bytes 1 0, a
// little-endian uint16 header length, then an ASCII Python dict literal
//   {'descr': '<f4', 'fortran_order': False, 'shape': (n, d), }
// padded with spaces and ended by '\n' so the data starts at a multiple of
// 64 bytes; then the C-order data. The row count is usually unknown until
// the end of a stream, so NpyWriter reserves a fixed 128-byte preamble
// (room for any 64-bit shape) and rewrites it with the final count in
// Finish().
//
// Thread-safety: an NpyWriter is used by one thread.
#ifndef PSDB_TOOLS_DUMP_NPY_H_
#define PSDB_TOOLS_DUMP_NPY_H_

#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"

namespace psdb::dump {

// Bytes before the data in every file NpyWriter writes.
inline constexpr size_t kNpyPreambleBytes = 128;

// The complete preamble (magic, version, length, padded dict) of a v1.0 file
// holding `rows` elements of `descr` (e.g. "<f4"), 1-d if cols == 0 else
// (rows, cols). Its size is kNpyPreambleBytes.
std::string NpyPreamble(absl::string_view descr, uint64_t rows, uint64_t cols);

class NpyWriter {
 public:
  // Creates (truncates) `path` for a 1-d (cols == 0) or 2-d array of `descr`
  // elements of `elem_bytes` bytes each.
  static absl::StatusOr<std::unique_ptr<NpyWriter>> Create(
      const std::string& path, absl::string_view descr, size_t elem_bytes,
      uint64_t cols);
  ~NpyWriter();
  NpyWriter(const NpyWriter&) = delete;
  NpyWriter& operator=(const NpyWriter&) = delete;

  // Appends one row: cols elements (1 for a 1-d array), little-endian.
  absl::Status AppendRow(const void* data);
  // Rewrites the preamble with the final row count and closes the file.
  absl::Status Finish();

  uint64_t rows() const { return rows_; }
  const std::string& path() const { return path_; }

 private:
  NpyWriter(std::string path, std::FILE* file, std::string descr,
            size_t row_bytes, uint64_t cols);
  std::string path_;
  std::FILE* file_;
  std::string descr_;
  size_t row_bytes_;
  uint64_t cols_;
  uint64_t rows_ = 0;
};

}  // namespace psdb::dump

#endif  // PSDB_TOOLS_DUMP_NPY_H_
