// The one JSON writer of ps-bench's --json reports. A scenario builds its
// report as a Json value (nlohmann::ordered_json, Debian's
// nlohmann-json3-dev: objects keep their keys in the order they were added,
// which is the order a reader sees) and writes it with WriteJson; no report
// writes JSON text by hand.
//
// What WriteJson and JsonLine write, for every report:
// - one line, without spaces (`{"a":1,"b":[2.5,null]}`); WriteJson ends it
//   with '\n';
// - a non-finite number (NaN: not measured; +-inf) as null;
// - a finite double with an integral value below 2^53 in magnitude as an
//   integer ("2", not "2.0"): counts, byte sizes and round numbers read the
//   same whether they were computed in integers or in doubles;
// - any other double in the shortest form that reads back as the same
//   double, so a reader that recomputes a ratio from the printed figures
//   gets the printed ratio bit for bit;
// - strings with JSON's escapes; bytes that are not UTF-8 become U+FFFD.
//
// Thread-safety: pure functions.
#ifndef PSDB_TOOLS_BENCH_JSON_WRITER_H_
#define PSDB_TOOLS_BENCH_JSON_WRITER_H_

#include <ostream>
#include <string>

#include "nlohmann/json.hpp"

namespace psdb::bench {

using Json = nlohmann::ordered_json;

// `value` as one line by the rules above, without a trailing newline.
std::string JsonLine(const Json& value);

// JsonLine(report) and '\n' on `out`: a scenario's whole --json output.
void WriteJson(const Json& report, std::ostream& out);

}  // namespace psdb::bench

#endif  // PSDB_TOOLS_BENCH_JSON_WRITER_H_
