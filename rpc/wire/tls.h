// Transport security for ps-server and RemoteClient: gRPC SSL credentials
// from PEM files (TLS, and mutual TLS when the server requires client
// certificates), the certificate-expiry policy, and the plaintext policy.
//
// Policy:
//  - A server with a certificate serves TLS. One whose certificate has
//    expired refuses to start (FailedPrecondition); one that expires within
//    `cert_expiry_warning_days` logs a warning to stderr.
//  - Plaintext is allowed only when asked for (`insecure`) or when the
//    address is a loopback address (127.0.0.0/8, ::1, localhost).
//
// Thread-safety: pure functions (they read files).
#ifndef PSDB_RPC_WIRE_TLS_H_
#define PSDB_RPC_WIRE_TLS_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "grpcpp/channel.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "grpcpp/security/server_credentials.h"
#include "grpcpp/support/channel_arguments.h"

namespace psdb::rpc {

struct ServerTlsOptions {
  // PEM certificate chain of the server. Empty = no TLS. Default: ""
  std::string cert_file;
  // PEM private key of the certificate. Default: ""
  std::string key_file;
  // PEM CA bundle that client certificates must chain to. Default: ""
  std::string ca_file;
  // Mutual TLS: refuse clients without a certificate signed by ca_file.
  // Default: false
  bool require_client_cert = false;
  // Warn when the certificate expires within this many days. Default: 90
  int cert_expiry_warning_days = 90;
  // Serve plaintext on a non-loopback address. Default: false
  bool insecure = false;
};

struct ClientTlsOptions {
  // PEM CA bundle the server's certificate must chain to. Empty = plaintext.
  // Default: ""
  std::string ca_file;
  // PEM client certificate and key, for servers that require one (mTLS).
  // Default: ""
  std::string cert_file;
  std::string key_file;
  // Name to check the server certificate against instead of the host in
  // the address (e.g. "localhost" when dialing 127.0.0.1). Default: ""
  std::string server_name_override;
  // Talk plaintext to a non-loopback address. Default: false
  bool insecure = false;
};

// True for 127.0.0.0/8, ::1, [::1] and localhost.
bool IsLoopbackHost(absl::string_view host);
// The host part of "host:port" / "[v6]:port".
std::string HostOfAddress(absl::string_view address);

// notAfter of the first certificate in a PEM file (OpenSSL X509 API).
absl::StatusOr<absl::Time> CertificateNotAfter(absl::string_view pem_file);

// Reads a whole file; NotFound / Internal naming it on failure.
absl::StatusOr<std::string> ReadFileToString(absl::string_view path);

// Server credentials for serving on `host` under the policy above. Checks
// the certificate's expiry (warning or refusal) as of `now`.
absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> MakeServerCredentials(
    const ServerTlsOptions& options, absl::string_view host,
    absl::Time now = absl::Now());

// Channel credentials for dialing `address` under the policy above.
absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>>
MakeChannelCredentials(const ClientTlsOptions& options,
                       absl::string_view address);

// A channel to `address` with MakeChannelCredentials's credentials, `args`
// and, when options.server_name_override is set, that name checked against
// the server's certificate: how every psdb client dials (RemoteClient, the
// scheduler client, cluster checkpoints). Connects lazily.
absl::StatusOr<std::shared_ptr<grpc::Channel>> MakeChannel(
    const ClientTlsOptions& options, absl::string_view address,
    grpc::ChannelArguments args = {});

}  // namespace psdb::rpc

#endif  // PSDB_RPC_WIRE_TLS_H_
