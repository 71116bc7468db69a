// Number formatting shared by psdb's tools (ps-dump's exports): shortest
// round-trip float/integer formatting (std::to_chars), so exported values
// parse back to the exact same bits. JSON documents are written with
// nlohmann_json (tools/bench/json_writer.h).
//
// Thread-safety: pure functions.
#ifndef PSDB_TOOLS_COMMON_TEXT_H_
#define PSDB_TOOLS_COMMON_TEXT_H_

#include <cstdint>
#include <string>

namespace psdb::tools {

// Appends the shortest decimal form of `v` that reads back as the same
// float. Non-finite values: "null" if json, else "nan" / "inf" / "-inf".
void AppendFloat(float v, bool json, std::string* out);
void AppendUint(uint64_t v, std::string* out);
void AppendInt(int64_t v, std::string* out);

}  // namespace psdb::tools

#endif  // PSDB_TOOLS_COMMON_TEXT_H_
