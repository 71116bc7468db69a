// JoinHostPort: "host:port" for gRPC and HTTP endpoints, an IPv6 host in
// brackets ("[::1]:7100"); a host already in brackets is kept as it is.
// The one place psdb spells an address from a host and a port.
//
// ListenExclusively: how every psdb gRPC server listens. gRPC binds with
// SO_REUSEPORT by default, so a second server started on a port one
// already serves would start too, and the kernel would split the
// connections between them: a worker's pushes reaching a server that
// holds other shards. psdb's servers turn it off, so that second server
// fails with "address in use" instead. (They keep SO_REUSEADDR, which
// gRPC always sets: a port held by tools/common/reserved_port.h stays
// theirs to take.)
//
// Thread-safety: pure functions; ListenExclusively writes only `builder`.
#ifndef PSDB_RPC_WIRE_ADDRESS_H_
#define PSDB_RPC_WIRE_ADDRESS_H_

#include <grpcpp/security/server_credentials.h>
#include <grpcpp/server_builder.h>

#include <memory>
#include <string>

#include "absl/strings/string_view.h"

namespace psdb::rpc {

std::string JoinHostPort(absl::string_view host, int port);

// Adds host:port (port 0: one the kernel picks) to `builder` with
// `credentials`, not shared with any other listener. Once BuildAndStart
// returns, *selected_port is the port it listens on, or 0 if it could not
// bind.
void ListenExclusively(absl::string_view host, int port,
                       std::shared_ptr<grpc::ServerCredentials> credentials,
                       grpc::ServerBuilder* builder, int* selected_port);

}  // namespace psdb::rpc

#endif  // PSDB_RPC_WIRE_ADDRESS_H_
