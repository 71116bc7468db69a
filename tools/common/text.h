// Text formatting shared by psdb's tools: JSON string quoting and
// shortest round-trip float/integer formatting (std::to_chars), so exported
// values parse back to the exact same bits.
//
// Thread-safety: pure functions.
#ifndef PSDB_TOOLS_COMMON_TEXT_H_
#define PSDB_TOOLS_COMMON_TEXT_H_

#include <cstdint>
#include <string>

#include "absl/strings/string_view.h"

namespace psdb::tools {

// Appends `s` as a JSON string literal (with quotes), escaping '"', '\\' and
// control characters.
void AppendJsonString(absl::string_view s, std::string* out);
std::string JsonString(absl::string_view s);

// Appends the shortest decimal form of `v` that reads back as the same
// float. Non-finite values: "null" if json, else "nan" / "inf" / "-inf".
void AppendFloat(float v, bool json, std::string* out);
// Same for a double (for benchmark figures).
void AppendDouble(double v, bool json, std::string* out);
void AppendUint(uint64_t v, std::string* out);
void AppendInt(int64_t v, std::string* out);

}  // namespace psdb::tools

#endif  // PSDB_TOOLS_COMMON_TEXT_H_
