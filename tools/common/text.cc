#include "tools/common/text.h"

#include <charconv>
#include <cmath>

namespace psdb::tools {
namespace {

template <typename T>
void AppendNumber(T v, std::string* out) {
  char buf[64];
  auto [end, ec] = std::to_chars(buf, buf + sizeof(buf), v);
  out->append(buf, end);
}

template <typename T>
void AppendReal(T v, bool json, std::string* out) {
  if (std::isfinite(v)) {
    AppendNumber(v, out);
  } else if (json) {
    out->append("null");
  } else if (std::isnan(v)) {
    out->append("nan");
  } else {
    out->append(v > 0 ? "inf" : "-inf");
  }
}

}  // namespace

void AppendJsonString(absl::string_view s, std::string* out) {
  static constexpr char kHex[] = "0123456789abcdef";
  out->push_back('"');
  for (char c : s) {
    const unsigned char u = static_cast<unsigned char>(c);
    if (c == '"' || c == '\\') {
      out->push_back('\\');
      out->push_back(c);
    } else if (c == '\n') {
      out->append("\\n");
    } else if (c == '\t') {
      out->append("\\t");
    } else if (u < 0x20) {
      out->append("\\u00");
      out->push_back(kHex[u >> 4]);
      out->push_back(kHex[u & 15]);
    } else {
      out->push_back(c);
    }
  }
  out->push_back('"');
}

std::string JsonString(absl::string_view s) {
  std::string out;
  AppendJsonString(s, &out);
  return out;
}

void AppendFloat(float v, bool json, std::string* out) {
  AppendReal(v, json, out);
}
void AppendDouble(double v, bool json, std::string* out) {
  AppendReal(v, json, out);
}
void AppendUint(uint64_t v, std::string* out) { AppendNumber(v, out); }
void AppendInt(int64_t v, std::string* out) { AppendNumber(v, out); }

}  // namespace psdb::tools
