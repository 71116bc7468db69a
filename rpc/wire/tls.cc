#include "rpc/wire/tls.h"

#include <openssl/asn1.h>
#include <openssl/bio.h>
#include <openssl/pem.h>
#include <openssl/x509.h>

#include <cstdio>
#include <fstream>
#include <sstream>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "util/status_macros.h"

namespace psdb::rpc {

bool IsLoopbackHost(absl::string_view host) {
  if (host == "localhost" || host == "::1" || host == "[::1]") return true;
  return absl::StartsWith(host, "127.");
}

std::string HostOfAddress(absl::string_view address) {
  if (absl::StartsWith(address, "[")) {
    const size_t close = address.find(']');
    if (close != absl::string_view::npos) {
      return std::string(address.substr(1, close - 1));
    }
  }
  const size_t colon = address.rfind(':');
  if (colon == absl::string_view::npos) return std::string(address);
  // More than one colon without brackets: a bare IPv6 address.
  if (address.find(':') != colon) return std::string(address);
  return std::string(address.substr(0, colon));
}

absl::StatusOr<std::string> ReadFileToString(absl::string_view path) {
  std::ifstream in{std::string(path), std::ios::binary};
  if (!in) {
    return absl::NotFoundError(absl::StrCat("cannot open '", path, "'"));
  }
  std::ostringstream ss;
  ss << in.rdbuf();
  if (in.bad()) {
    return absl::InternalError(absl::StrCat("error reading '", path, "'"));
  }
  return ss.str();
}

absl::StatusOr<absl::Time> CertificateNotAfter(absl::string_view pem_file) {
  PSDB_ASSIGN_OR_RETURN(std::string pem, ReadFileToString(pem_file));
  BIO* bio = BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size()));
  if (bio == nullptr) return absl::InternalError("BIO_new_mem_buf failed");
  X509* cert = PEM_read_bio_X509(bio, nullptr, nullptr, nullptr);
  BIO_free(bio);
  if (cert == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat("'", pem_file, "' holds no PEM certificate"));
  }
  struct tm tm_after = {};
  const ASN1_TIME* not_after = X509_get0_notAfter(cert);
  const int ok = ASN1_TIME_to_tm(not_after, &tm_after);
  X509_free(cert);
  if (ok != 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("'", pem_file, "': unreadable notAfter"));
  }
  return absl::FromUnixSeconds(timegm(&tm_after));
}

absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> MakeServerCredentials(
    const ServerTlsOptions& options, absl::string_view host, absl::Time now) {
  if (options.cert_file.empty()) {
    if (!options.key_file.empty() || !options.ca_file.empty() ||
        options.require_client_cert) {
      return absl::InvalidArgumentError(
          "TLS options given without a server certificate (--tls_cert)");
    }
    if (!options.insecure && !IsLoopbackHost(host)) {
      return absl::FailedPreconditionError(
          absl::StrCat("refusing to serve plaintext on non-loopback address '",
                       host, "': pass --tls_cert/--tls_key, or --insecure"));
    }
    return grpc::InsecureServerCredentials();
  }
  if (options.key_file.empty()) {
    return absl::InvalidArgumentError("--tls_cert given without --tls_key");
  }
  if (options.require_client_cert && options.ca_file.empty()) {
    return absl::InvalidArgumentError(
        "--require_client_cert needs --tls_ca (the CA client certificates "
        "must chain to)");
  }
  PSDB_ASSIGN_OR_RETURN(absl::Time not_after,
                        CertificateNotAfter(options.cert_file));
  if (not_after <= now) {
    return absl::FailedPreconditionError(
        absl::StrCat("server certificate '", options.cert_file, "' expired at ",
                     absl::FormatTime(not_after, absl::UTCTimeZone())));
  }
  if (not_after - now <= absl::Hours(24) * options.cert_expiry_warning_days) {
    std::fprintf(stderr,
                 "WARNING: server certificate '%s' expires at %s, within %d "
                 "days\n",
                 options.cert_file.c_str(),
                 absl::FormatTime(not_after, absl::UTCTimeZone()).c_str(),
                 options.cert_expiry_warning_days);
  }
  PSDB_ASSIGN_OR_RETURN(std::string cert, ReadFileToString(options.cert_file));
  PSDB_ASSIGN_OR_RETURN(std::string key, ReadFileToString(options.key_file));
  grpc::SslServerCredentialsOptions ssl(
      options.require_client_cert
          ? GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY
          : GRPC_SSL_DONT_REQUEST_CLIENT_CERTIFICATE);
  if (!options.ca_file.empty()) {
    PSDB_ASSIGN_OR_RETURN(ssl.pem_root_certs,
                          ReadFileToString(options.ca_file));
    if (!options.require_client_cert) {
      ssl.client_certificate_request =
          GRPC_SSL_REQUEST_CLIENT_CERTIFICATE_AND_VERIFY;
    }
  }
  ssl.pem_key_cert_pairs.push_back({key, cert});
  return grpc::SslServerCredentials(ssl);
}

absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>>
MakeChannelCredentials(const ClientTlsOptions& options,
                       absl::string_view address) {
  if (options.ca_file.empty()) {
    if (!options.cert_file.empty()) {
      return absl::InvalidArgumentError(
          "client certificate given without a CA (--tls_ca)");
    }
    const std::string host = HostOfAddress(address);
    if (!options.insecure && !IsLoopbackHost(host)) {
      return absl::FailedPreconditionError(
          absl::StrCat("refusing plaintext to non-loopback server '", address,
                       "': give a CA (--tls_ca), or ask for --insecure"));
    }
    return grpc::InsecureChannelCredentials();
  }
  grpc::SslCredentialsOptions ssl;
  PSDB_ASSIGN_OR_RETURN(ssl.pem_root_certs, ReadFileToString(options.ca_file));
  if (!options.cert_file.empty()) {
    PSDB_ASSIGN_OR_RETURN(ssl.pem_cert_chain,
                          ReadFileToString(options.cert_file));
    PSDB_ASSIGN_OR_RETURN(ssl.pem_private_key,
                          ReadFileToString(options.key_file));
  }
  return grpc::SslCredentials(ssl);
}

absl::StatusOr<std::shared_ptr<grpc::Channel>> MakeChannel(
    const ClientTlsOptions& options, absl::string_view address,
    grpc::ChannelArguments args) {
  PSDB_ASSIGN_OR_RETURN(std::shared_ptr<grpc::ChannelCredentials> creds,
                        MakeChannelCredentials(options, address));
  if (!options.server_name_override.empty()) {
    args.SetSslTargetNameOverride(options.server_name_override);
  }
  return grpc::CreateCustomChannel(std::string(address), creds, args);
}

}  // namespace psdb::rpc
