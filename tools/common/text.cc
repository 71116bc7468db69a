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

void AppendFloat(float v, bool json, std::string* out) {
  AppendReal(v, json, out);
}
void AppendUint(uint64_t v, std::string* out) { AppendNumber(v, out); }
void AppendInt(int64_t v, std::string* out) { AppendNumber(v, out); }

}  // namespace psdb::tools
