#include "tools/common/tls_flags.h"

#include "absl/flags/flag.h"

ABSL_FLAG(std::string, tls_cert, "", "PEM server certificate chain.");
ABSL_FLAG(std::string, tls_key, "", "PEM private key of --tls_cert.");
ABSL_FLAG(std::string, tls_ca, "", "PEM CA that client certificates chain to.");
ABSL_FLAG(bool, require_client_cert, false,
          "Mutual TLS: refuse clients without a certificate from --tls_ca.");
ABSL_FLAG(std::string, tls_crl, "",
          "PEM or DER certificate revocation list(s) of --tls_ca: a client "
          "certificate listed is refused in the handshake. Checked at start "
          "(signed by a --tls_ca CA, current); read once.");
ABSL_FLAG(std::string, tls_ciphers, "",
          "OpenSSL TLS 1.2 cipher list A:B:... for every TLS connection of "
          "this process (GRPC_SSL_CIPHER_SUITES); a TLS 1.2 client offering "
          "none is refused. TLS 1.3 uses OpenSSL's suites (gRPC cannot "
          "choose them). Empty = gRPC's default.");
ABSL_FLAG(int, cert_expiry_warning_days, 90,
          "Warn when the server certificate expires within this many days.");
ABSL_FLAG(bool, insecure, false,
          "Allow plaintext on a non-loopback address: listening on one, and "
          "reaching peers, etcd or the scheduler at one.");

namespace psdb::tools {

rpc::ServerTlsOptions ServerTlsFromFlags() {
  rpc::ServerTlsOptions tls;
  tls.cert_file = absl::GetFlag(FLAGS_tls_cert);
  tls.key_file = absl::GetFlag(FLAGS_tls_key);
  tls.ca_file = absl::GetFlag(FLAGS_tls_ca);
  tls.require_client_cert = absl::GetFlag(FLAGS_require_client_cert);
  tls.crl_file = absl::GetFlag(FLAGS_tls_crl);
  tls.cert_expiry_warning_days = absl::GetFlag(FLAGS_cert_expiry_warning_days);
  tls.insecure = absl::GetFlag(FLAGS_insecure);
  return tls;
}

rpc::ClientTlsOptions PeerTlsFromFlags() {
  rpc::ClientTlsOptions tls;
  tls.ca_file = absl::GetFlag(FLAGS_tls_ca);
  tls.cert_file = absl::GetFlag(FLAGS_tls_cert);
  tls.key_file = absl::GetFlag(FLAGS_tls_key);
  tls.insecure = absl::GetFlag(FLAGS_insecure);
  return tls;
}

std::string TlsCiphersFlag() { return absl::GetFlag(FLAGS_tls_ciphers); }

absl::Status ApplyTlsCiphersFlag() {
  const std::string ciphers = TlsCiphersFlag();
  if (ciphers.empty()) return absl::OkStatus();
  return rpc::SetProcessCipherList(ciphers);
}

}  // namespace psdb::tools
