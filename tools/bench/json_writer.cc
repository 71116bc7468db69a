#include "tools/bench/json_writer.h"

#include <cmath>
#include <cstdint>

namespace psdb::bench {
namespace {

// Applies the number rules of json_writer.h to every number in *value.
void NormalizeNumbers(Json* value) {
  switch (value->type()) {
    case Json::value_t::object:
    case Json::value_t::array:
      for (Json& child : *value) NormalizeNumbers(&child);
      break;
    case Json::value_t::number_float: {
      const double v = value->get<double>();
      // 2^53: above it not every integer is a double, and an integer there
      // is more likely a rounded figure than a count.
      if (!std::isfinite(v)) {
        *value = nullptr;
      } else if (std::trunc(v) == v && std::fabs(v) < 0x1p53) {
        *value = static_cast<int64_t>(v);
      }
      break;
    }
    default:
      break;
  }
}

}  // namespace

std::string JsonLine(const Json& value) {
  Json normalized = value;
  NormalizeNumbers(&normalized);
  return normalized.dump(/*indent=*/-1, /*indent_char=*/' ',
                         /*ensure_ascii=*/false,
                         Json::error_handler_t::replace);
}

void WriteJson(const Json& report, std::ostream& out) {
  out << JsonLine(report) << "\n";
}

}  // namespace psdb::bench
