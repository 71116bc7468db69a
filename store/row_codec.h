// The on-disk encoding of keys and rows in RocksDB, shared by the store,
// ps-dump and the RocksDB peer in ps-bench.
//
// Key: the 8-byte big-endian id, so RocksDB's bytewise order is numeric order.
// Value (all little-endian), format version 1:
//   u8  version (= 1)   u8 reserved (0)   u16 reserved (0)
//   u32 dim             u32 state_size
//   i64 last_update_step  u64 update_count  u64 frequency
//   f32 values[dim]     f32 state[state_size]
//   u32 checksum: low 32 bits of XXH3-64 over every preceding byte
// A value whose length, version, reserved bytes (must be 0) or checksum
// does not match decodes to DataLoss; callers add the table and key to the
// message.
//
// Thread-safety: pure functions.
#ifndef PSDB_STORE_ROW_CODEC_H_
#define PSDB_STORE_ROW_CODEC_H_

#include <cstdint>
#include <cstring>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "psdb/row.h"

namespace psdb {

inline constexpr uint8_t kRowFormatVersion = 1;
inline constexpr size_t kRowHeaderBytes = 1 + 1 + 2 + 4 + 4 + 8 + 8 + 8;
inline constexpr size_t kRowChecksumBytes = 4;

// Encoded size of a row: header + 4 * (dim + state_size) + checksum.
size_t EncodedRowSize(int dim, int state_size);

// Writes the 8-byte big-endian form of `key` into buf[0..8).
void EncodeKey(uint64_t key, char* buf);
std::string EncodeKey(uint64_t key);
// InvalidArgument unless `bytes` is exactly 8 bytes.
absl::Status DecodeKey(absl::string_view bytes, uint64_t* key);

// Appends the encoding of one row to *out (after clearing it).
void EncodeRow(const RowHeader& header, absl::Span<const float> values,
               absl::Span<const float> state, std::string* out);
// Writes the encoding of one row into out[0 .. EncodedRowSize(dim,
// state_size)), where dim = values.size() and state_size = state.size().
void EncodeRowTo(const RowHeader& header, absl::Span<const float> values,
                 absl::Span<const float> state, char* out);

// Decodes a row whose dimension must be `dim` and state size `state_size`.
// DataLoss on a length, version, reserved-byte or checksum mismatch, or a
// dim/state_size different from the expected ones.
absl::Status DecodeRow(absl::string_view bytes, int dim, int state_size,
                       RowHeader* header, absl::Span<float> values,
                       absl::Span<float> state);

// The checks of DecodeRow (length, version, shape, checksum) without
// copying anything out.
absl::Status VerifyRow(absl::string_view bytes, int dim, int state_size);
// Whether each of the n floats at `floats` (any alignment) is finite. On
// the bits, so that the compiler vectorizes it (std::isfinite is a quiet
// float comparison, which it must not vectorize without -fno-trapping-math):
// a float is finite unless its exponent is all ones, and adding 1 to such an
// exponent carries into bit 31. The store checks every updated row with it.
inline bool AllFinite(const void* floats, size_t n) {
  const char* p = static_cast<const char*>(floats);
  uint32_t carry = 0;
  for (size_t i = 0; i < n; ++i) {
    uint32_t bits;
    std::memcpy(&bits, p + 4 * i, 4);
    carry |= (bits & 0x7f800000u) + 0x00800000u;
  }
  return (carry & 0x80000000u) == 0;
}

// Whether every value and state float of a row VerifyRow accepted (with the
// same dim and state_size) is finite.
bool VerifiedRowIsFinite(absl::string_view bytes, int dim, int state_size);
// Copies out a row that VerifyRow accepted with the same dim and
// state_size: the header, dim values and state_size state floats.
// REQUIRES: VerifyRow(bytes, dim, state_size).ok().
void CopyVerifiedRow(absl::string_view bytes, int dim, int state_size,
                     RowHeader* header, float* values, float* state);

// Reads only the dims recorded in an encoding (for tools that do not know
// the spec). DataLoss if the encoding is too short or its version unknown.
absl::Status PeekRowShape(absl::string_view bytes, int* dim, int* state_size);

}  // namespace psdb

#endif  // PSDB_STORE_ROW_CODEC_H_
