// The TLS flags of psdb's servers, ps-server and ps-scheduler, defined
// once: --tls_cert, --tls_key, --tls_ca, --require_client_cert, --tls_crl,
// --tls_ciphers, --cert_expiry_warning_days and --insecure, and the TLS
// options they make (rpc/wire/tls.h says what each means).
//
// A binary's --help lists them when SetFlagsHelp (tools/common/flags_help.h)
// is given a group for "tools/common/tls_flags.cc".
//
// Thread-safety: call after absl::ParseCommandLine; ApplyTlsCiphersFlag
// before any other thread starts (it sets an environment variable).
#ifndef PSDB_TOOLS_COMMON_TLS_FLAGS_H_
#define PSDB_TOOLS_COMMON_TLS_FLAGS_H_

#include <string>

#include "absl/status/status.h"
#include "rpc/wire/tls.h"

namespace psdb::tools {

// What the server serves with: every flag above but --tls_ciphers.
rpc::ServerTlsOptions ServerTlsFromFlags();

// What the server reaches its peers with as a client (a ps-server's
// Migrate to other servers, a scheduler's calls to ps-servers, ps-server
// checkpoint's calls): servers' certificates chain to --tls_ca, and
// --tls_cert / --tls_key are presented where peers require one.
rpc::ClientTlsOptions PeerTlsFromFlags();

// --tls_ciphers as given; "" = gRPC's default list.
std::string TlsCiphersFlag();

// Sets --tls_ciphers as the process's TLS 1.2 cipher list
// (rpc::SetProcessCipherList) when it is given; OK when it is not. Call
// before anything makes a TLS connection: gRPC reads the list once.
absl::Status ApplyTlsCiphersFlag();

}  // namespace psdb::tools

#endif  // PSDB_TOOLS_COMMON_TLS_FLAGS_H_
