// Transport security for ps-server, ps-scheduler and RemoteClient: gRPC TLS
// credentials from PEM files (TLS, and mutual TLS when the server requires
// client certificates), certificate revocation lists, the process's TLS 1.2
// cipher list, the certificate-expiry policy, and the plaintext policy.
//
// Policy:
//  - A server with a certificate serves TLS. One whose certificate has
//    expired refuses to start (FailedPrecondition); one that expires within
//    `cert_expiry_warning_days` logs a warning to stderr.
//  - Plaintext is allowed only when asked for (`insecure`) or when the
//    address is a loopback address (127.0.0.0/8, ::1, localhost).
//  - Revocation (`crl_file`, --tls_crl): a server refuses, in the handshake,
//    a client certificate listed in a CRL of the CA in `ca_file`. The file
//    is checked at start: it must hold at least one CRL (PEM or DER), each
//    signed by a CA of `ca_file` and current (thisUpdate <= now <
//    nextUpdate); anything else is an error naming --tls_crl, never a
//    silent no-op. Limits, from gRPC 1.51 (Debian 12): gRPC reads CRLs only
//    from an OpenSSL hashed directory, so the file's CRLs are copied into a
//    private directory under $TMPDIR (psdb-crl-XXXXXX, removed at exit)
//    and read from there; the file is read once, so a new CRL takes a
//    restart; a CRL whose nextUpdate passes while serving makes OpenSSL
//    refuse every client of that CA until a restart with a fresh one.
//    Clients do not check servers' certificates against CRLs.
//  - Ciphers (SetProcessCipherList, --tls_ciphers): gRPC 1.51 takes its
//    cipher list from the GRPC_SSL_CIPHER_SUITES variable, read once, when
//    the process makes its first TLS connection or server, and applies it to
//    every TLS connection of the process (servers and clients alike). It is
//    an OpenSSL cipher list and governs TLS 1.2 only: gRPC offers no way to
//    choose TLS 1.3 suites or to turn TLS 1.3 off, so a TLS 1.3 client still
//    connects with OpenSSL's TLS 1.3 suites (TLS_AES_256_GCM_SHA384,
//    TLS_CHACHA20_POLY1305_SHA256, TLS_AES_128_GCM_SHA256: all AEAD), while a
//    TLS 1.2 client offering no listed suite fails the handshake.
//
// Thread-safety: pure functions (they read files), except
// SetProcessCipherList, which sets an environment variable: call it from
// main before any thread starts.
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
#include "psdb/remote_options.h"

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
  // Certificate revocation list(s) of the CA in ca_file, PEM or DER: a
  // client certificate listed is refused in the handshake. Needs ca_file.
  // Default: "" (no revocation check)
  std::string crl_file;
  // Warn when the certificate expires within this many days. Default: 90
  int cert_expiry_warning_days = 90;
  // Serve plaintext on a non-loopback address. Default: false
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
// the certificate's expiry (warning or refusal) and the CRL file (see
// Revocation above) as of `now`.
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

// Checks `ciphers`, an OpenSSL TLS 1.2 cipher list ("A:B:...", the form of
// `openssl ciphers`): InvalidArgument naming --tls_ciphers when it is empty,
// when an element other than an operator (!X, -X, +X, @STRENGTH,
// @SECLEVEL=n) selects no cipher OpenSSL knows (a typo, or a TLS 1.3 suite
// name, which gRPC cannot choose: see Ciphers above), or when the whole list
// selects none.
absl::Status ValidateCipherList(absl::string_view ciphers);

// Validates `ciphers` and makes it the cipher list of every gRPC TLS
// connection this process makes or accepts (GRPC_SSL_CIPHER_SUITES).
// FailedPrecondition when this process has already made TLS credentials
// with another list in force (gRPC has read it by then).
// REQUIRES: called before other threads run (it calls setenv).
absl::Status SetProcessCipherList(absl::string_view ciphers);

}  // namespace psdb::rpc

#endif  // PSDB_RPC_WIRE_TLS_H_
