// libFuzzer target: the row codec's decoder (store/row_codec.h).
//
// Input: one flag byte, then a row encoding. With flag bit 0 set the harness
// first writes the correct checksum into the last 4 bytes (the codec's own
// definition: low 32 bits of XXH3-64 of the preceding bytes), so mutations
// reach the checks behind the checksum instead of dying on it.
//
// Invariants: a row that decodes re-encodes to exactly the same bytes; a
// row never decodes under a shape other than the one it records; a key of 8
// bytes decodes and re-encodes to the same bytes, any other length fails.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "store/row_codec.h"
#include "tests/fuzz/fuzz_util.h"
#include "util/hash.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const bool fix_checksum = (data[0] & 1) != 0;
  std::string bytes(reinterpret_cast<const char*>(data + 1), size - 1);

  // Keys: the first 8 bytes (or fewer).
  const absl::string_view key_bytes =
      absl::string_view(bytes).substr(0, std::min<size_t>(bytes.size(), 8));
  uint64_t key = 0;
  const absl::Status key_status = psdb::DecodeKey(key_bytes, &key);
  PSDB_FUZZ_CHECK(key_status.ok() == (key_bytes.size() == 8),
                  key_status.ToString());
  if (key_status.ok()) {
    PSDB_FUZZ_CHECK(psdb::EncodeKey(key) == key_bytes, "key re-encoding");
  }

  if (fix_checksum && bytes.size() >= psdb::kRowChecksumBytes) {
    const size_t body = bytes.size() - psdb::kRowChecksumBytes;
    const uint32_t sum = static_cast<uint32_t>(
        psdb::Hash64(absl::string_view(bytes.data(), body)));
    std::memcpy(bytes.data() + body, &sum, sizeof(sum));
  }

  int dim = 0;
  int state_size = 0;
  if (!psdb::PeekRowShape(bytes, &dim, &state_size).ok()) return 0;
  psdb::RowHeader header;
  if (psdb::EncodedRowSize(dim, state_size) != bytes.size()) {
    // The recorded shape cannot fit: decoding must fail (no allocation of
    // the recorded size, which may be 2^30 floats).
    const absl::Status s =
        psdb::DecodeRow(bytes, dim, state_size, &header, {}, {});
    PSDB_FUZZ_CHECK(!s.ok(), "a row whose length contradicts its shape");
    return 0;
  }
  std::vector<float> values(static_cast<size_t>(dim));
  std::vector<float> state(static_cast<size_t>(state_size));
  const absl::Status s =
      psdb::DecodeRow(bytes, dim, state_size, &header, absl::MakeSpan(values),
                      absl::MakeSpan(state));
  if (!s.ok()) return 0;
  std::string again;
  psdb::EncodeRow(header, values, state, &again);
  PSDB_FUZZ_CHECK(again == bytes, "decoded row re-encodes to other bytes");
  // The same bytes under any other shape are refused.
  std::vector<float> more(static_cast<size_t>(dim) + 1);
  PSDB_FUZZ_CHECK(!psdb::DecodeRow(bytes, dim + 1, state_size, nullptr,
                                   absl::MakeSpan(more), absl::MakeSpan(state))
                       .ok(),
                  "row decoded under dim + 1");
  return 0;
}
