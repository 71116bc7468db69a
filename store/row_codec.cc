#include "store/row_codec.h"

#include <bit>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "util/hash.h"
#include "util/status_macros.h"

namespace psdb {
namespace {

// The encoding is little-endian; psdb targets little-endian hosts (x86-64,
// aarch64), where it is a plain memcpy.
static_assert(std::endian::native == std::endian::little,
              "row_codec assumes a little-endian host");

template <typename T>
void Put(char*& p, T v) {
  std::memcpy(p, &v, sizeof(T));
  p += sizeof(T);
}
template <typename T>
T Get(const char*& p) {
  T v;
  std::memcpy(&v, p, sizeof(T));
  p += sizeof(T);
  return v;
}

uint32_t Checksum(const char* data, size_t n) {
  return static_cast<uint32_t>(Hash64(absl::string_view(data, n)));
}

}  // namespace

size_t EncodedRowSize(int dim, int state_size) {
  return kRowHeaderBytes +
         4 * (static_cast<size_t>(dim) + static_cast<size_t>(state_size)) +
         kRowChecksumBytes;
}

void EncodeKey(uint64_t key, char* buf) {
  for (int i = 0; i < 8; ++i) {
    buf[i] = static_cast<char>(key >> (56 - 8 * i));
  }
}

std::string EncodeKey(uint64_t key) {
  std::string s(8, '\0');
  EncodeKey(key, s.data());
  return s;
}

absl::Status DecodeKey(absl::string_view bytes, uint64_t* key) {
  if (bytes.size() != 8) {
    return absl::InvalidArgumentError(
        absl::StrCat("key must be 8 bytes, got ", bytes.size()));
  }
  uint64_t k = 0;
  for (int i = 0; i < 8; ++i) {
    k = (k << 8) | static_cast<unsigned char>(bytes[i]);
  }
  *key = k;
  return absl::OkStatus();
}

void EncodeRowTo(const RowHeader& header, absl::Span<const float> values,
                 absl::Span<const float> state, char* out) {
  const size_t n = EncodedRowSize(static_cast<int>(values.size()),
                                  static_cast<int>(state.size()));
  char* p = out;
  Put<uint8_t>(p, kRowFormatVersion);
  Put<uint8_t>(p, 0);
  Put<uint16_t>(p, 0);
  Put<uint32_t>(p, static_cast<uint32_t>(values.size()));
  Put<uint32_t>(p, static_cast<uint32_t>(state.size()));
  Put<int64_t>(p, header.last_update_step);
  Put<uint64_t>(p, header.update_count);
  Put<uint64_t>(p, header.frequency);
  if (!values.empty()) std::memcpy(p, values.data(), 4 * values.size());
  p += 4 * values.size();
  if (!state.empty()) std::memcpy(p, state.data(), 4 * state.size());
  p += 4 * state.size();
  const uint32_t sum = Checksum(out, n - kRowChecksumBytes);
  Put<uint32_t>(p, sum);
}

void EncodeRow(const RowHeader& header, absl::Span<const float> values,
               absl::Span<const float> state, std::string* out) {
  out->resize(EncodedRowSize(static_cast<int>(values.size()),
                             static_cast<int>(state.size())));
  EncodeRowTo(header, values, state, out->data());
}

absl::Status PeekRowShape(absl::string_view bytes, int* dim, int* state_size) {
  if (bytes.size() < kRowHeaderBytes + kRowChecksumBytes) {
    return absl::DataLossError(
        absl::StrCat("row encoding too short: ", bytes.size(), " bytes"));
  }
  const uint8_t version = static_cast<uint8_t>(bytes[0]);
  if (version != kRowFormatVersion) {
    return absl::DataLossError(
        absl::StrCat("unknown row format version ", version));
  }
  const char* p = bytes.data() + 4;
  const uint32_t d = Get<uint32_t>(p);
  const uint32_t s = Get<uint32_t>(p);
  if (d > (1u << 30) || s > (1u << 30)) {
    return absl::DataLossError(
        absl::StrCat("row shape out of range: dim ", d, " state ", s));
  }
  *dim = static_cast<int>(d);
  *state_size = static_cast<int>(s);
  return absl::OkStatus();
}

absl::Status VerifyRow(absl::string_view bytes, int dim, int state_size) {
  const size_t expected = EncodedRowSize(dim, state_size);
  if (bytes.size() != expected) {
    return absl::DataLossError(absl::StrCat("row encoding is ", bytes.size(),
                                            " bytes, expected ", expected));
  }
  const char* p = bytes.data();
  const uint8_t version = Get<uint8_t>(p);
  if (version != kRowFormatVersion) {
    return absl::DataLossError(
        absl::StrCat("unknown row format version ", version));
  }
  // Version 1 writes zeros here; anything else is not a row this build
  // wrote (and would not re-encode to the same bytes).
  if (p[0] != 0 || p[1] != 0 || p[2] != 0) {
    return absl::DataLossError("row reserved bytes are not zero");
  }
  p += 3;
  const uint32_t d = Get<uint32_t>(p);
  const uint32_t s = Get<uint32_t>(p);
  if (d != static_cast<uint32_t>(dim) ||
      s != static_cast<uint32_t>(state_size)) {
    return absl::DataLossError(absl::StrCat("row shape dim ", d, " state ", s,
                                            ", expected dim ", dim, " state ",
                                            state_size));
  }
  const uint32_t want = Checksum(bytes.data(), expected - kRowChecksumBytes);
  const char* q = bytes.data() + expected - kRowChecksumBytes;
  const uint32_t got = Get<uint32_t>(q);
  if (want != got) {
    return absl::DataLossError("row checksum mismatch");
  }
  return absl::OkStatus();
}

bool VerifiedRowIsFinite(absl::string_view bytes, int dim, int state_size) {
  return AllFinite(bytes.data() + kRowHeaderBytes,
                   static_cast<size_t>(dim) + static_cast<size_t>(state_size));
}

void CopyVerifiedRow(absl::string_view bytes, int dim, int state_size,
                     RowHeader* header, float* values, float* state) {
  const char* p = bytes.data() + 12;  // version, reserved, dim, state_size
  RowHeader h;
  h.last_update_step = Get<int64_t>(p);
  h.update_count = Get<uint64_t>(p);
  h.frequency = Get<uint64_t>(p);
  if (header != nullptr) *header = h;
  if (values != nullptr && dim > 0) {
    std::memcpy(values, p, 4 * static_cast<size_t>(dim));
  }
  p += 4 * static_cast<size_t>(dim);
  if (state != nullptr && state_size > 0) {
    std::memcpy(state, p, 4 * static_cast<size_t>(state_size));
  }
}

absl::Status DecodeRow(absl::string_view bytes, int dim, int state_size,
                       RowHeader* header, absl::Span<float> values,
                       absl::Span<float> state) {
  PSDB_RETURN_IF_ERROR(VerifyRow(bytes, dim, state_size));
  CopyVerifiedRow(
      bytes, dim, state_size, header,
      values.size() == static_cast<size_t>(dim) ? values.data() : nullptr,
      state.size() == static_cast<size_t>(state_size) ? state.data() : nullptr);
  return absl::OkStatus();
}

}  // namespace psdb
