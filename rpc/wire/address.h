// JoinHostPort: "host:port" for gRPC and HTTP endpoints, an IPv6 host in
// brackets ("[::1]:7100"); a host already in brackets is kept as it is.
// The one place psdb spells an address from a host and a port.
//
// Thread-safety: a pure function.
#ifndef PSDB_RPC_WIRE_ADDRESS_H_
#define PSDB_RPC_WIRE_ADDRESS_H_

#include <string>

#include "absl/strings/string_view.h"

namespace psdb::rpc {

std::string JoinHostPort(absl::string_view host, int port);

}  // namespace psdb::rpc

#endif  // PSDB_RPC_WIRE_ADDRESS_H_
