// Conversions between psdb's C++ types and the wire messages of
// rpc/wire/psdb.proto, and between absl::Status and grpc::Status. This is the
// only place in psdb where grpc::Status appears next to absl::Status (STYLE.md
// 2).
//
// Float payloads: rows travel as packed little-endian float32 bytes. psdb
// only builds on little-endian hosts (static_assert in convert.cc), so the
// conversion is a memcpy.
//
// Thread-safety: pure functions.
#ifndef PSDB_RPC_WIRE_CONVERT_H_
#define PSDB_RPC_WIRE_CONVERT_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "grpcpp/support/status.h"
#include "psdb/parameter_client.h"
#include "psdb/row.h"
#include "psdb/table_spec.h"
#include "rpc/wire/psdb.pb.h"

namespace psdb::rpc {

// Trailing-metadata key of the server's epoch on FAILED_PRECONDITION.
inline constexpr char kServerEpochMetadataKey[] = "psdb-server-epoch";

grpc::Status ToGrpcStatus(const absl::Status& status);
absl::Status FromGrpcStatus(const grpc::Status& status);

// TableSpec <-> psdb.v1.TableSpec: manifest/manifest.h (TableSpecToProto,
// TableSpecFromProto).

// Floats <-> packed little-endian bytes.
void FloatsToBytes(absl::Span<const float> values, std::string* out);
// InvalidArgument naming `what` unless bytes.size() == 4 * out.size().
absl::Status BytesToFloats(absl::string_view bytes, absl::Span<float> out,
                           absl::string_view what);

// RowBatch <-> RowBlock.
void ToProto(const RowBatch& rows, v1::RowBlock* out);
// InvalidArgument unless the block holds exactly `n` consistent rows.
absl::Status FromProto(const v1::RowBlock& block, size_t n, RowBatch* out);

void ToProto(const StoreStats& stats, v1::StatsResponse* out);
StoreStats FromProto(const v1::StatsResponse& proto);

void ToProto(const CheckpointInfo& info, v1::CheckpointResponse* out);
CheckpointInfo FromProto(const v1::CheckpointResponse& proto);

}  // namespace psdb::rpc

#endif  // PSDB_RPC_WIRE_CONVERT_H_
