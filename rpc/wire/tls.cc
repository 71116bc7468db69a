#include "rpc/wire/tls.h"

#include <openssl/asn1.h>
#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <stdlib.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/synchronization/mutex.h"
#include "grpcpp/security/tls_certificate_provider.h"
#include "grpcpp/security/tls_credentials_options.h"
#include "util/status_macros.h"

namespace psdb::rpc {
namespace {

// The variable gRPC 1.51 reads its cipher list from (once, process-wide).
constexpr char kGrpcCipherSuitesVariable[] = "GRPC_SSL_CIPHER_SUITES";

// Set once this process has made TLS credentials: gRPC may have read
// GRPC_SSL_CIPHER_SUITES since.
std::atomic<bool> tls_credentials_made{false};

struct CrlFree {
  void operator()(X509_CRL* crl) const { X509_CRL_free(crl); }
};
struct X509Free {
  void operator()(X509* cert) const { X509_free(cert); }
};
struct BioFree {
  void operator()(BIO* bio) const { BIO_free(bio); }
};
using CrlPtr = std::unique_ptr<X509_CRL, CrlFree>;
using X509Ptr = std::unique_ptr<X509, X509Free>;
using BioPtr = std::unique_ptr<BIO, BioFree>;

std::string NameToString(const X509_NAME* name) {
  char buf[256];
  X509_NAME_oneline(name, buf, sizeof(buf));
  return buf;
}

absl::Time AsnTimeToTime(const ASN1_TIME* t) {
  struct tm tm = {};
  if (t == nullptr || ASN1_TIME_to_tm(t, &tm) != 1) return absl::InfinitePast();
  return absl::FromUnixSeconds(timegm(&tm));
}

// Every PEM object of type `read` in `pem` (PEM_read_bio_X509 or
// PEM_read_bio_X509_CRL); false when a block is present but unparsable.
template <typename T, typename Deleter, typename Reader>
bool ReadAllPem(const std::string& pem, Reader read,
                std::vector<std::unique_ptr<T, Deleter>>* out) {
  BioPtr bio(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())));
  if (bio == nullptr) return false;
  ERR_clear_error();
  while (T* object = read(bio.get(), nullptr, nullptr, nullptr)) {
    out->emplace_back(object);
  }
  // The loop ends on "no start line" at the end of the input; anything
  // else is a damaged block.
  const unsigned long err = ERR_peek_last_error();
  ERR_clear_error();
  return err == 0 || (ERR_GET_LIB(err) == ERR_LIB_PEM &&
                      ERR_GET_REASON(err) == PEM_R_NO_START_LINE);
}

// The CRLs of --tls_crl, each checked against the CAs of --tls_ca.
absl::StatusOr<std::vector<CrlPtr>> LoadCrls(const ServerTlsOptions& options,
                                             absl::Time now) {
  const std::string& path = options.crl_file;
  auto data = ReadFileToString(path);
  if (!data.ok()) {
    return absl::Status(data.status().code(),
                        absl::StrCat("--tls_crl: ", data.status().message()));
  }
  std::vector<CrlPtr> crls;
  const bool pem_ok = ReadAllPem(*data, PEM_read_bio_X509_CRL, &crls);
  if (crls.empty() && pem_ok) {  // no PEM block: DER?
    const unsigned char* p =
        reinterpret_cast<const unsigned char*>(data->data());
    X509_CRL* der = d2i_X509_CRL(nullptr, &p, static_cast<long>(data->size()));
    if (der != nullptr) crls.emplace_back(der);
    ERR_clear_error();
  }
  if (!pem_ok || crls.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--tls_crl '", path,
        "': not a certificate revocation list (expected PEM 'X509 CRL' "
        "blocks or one DER CRL)"));
  }
  PSDB_ASSIGN_OR_RETURN(std::string ca_pem, ReadFileToString(options.ca_file));
  std::vector<X509Ptr> cas;
  ReadAllPem(ca_pem, PEM_read_bio_X509, &cas);
  for (const CrlPtr& crl : crls) {
    const X509_NAME* issuer = X509_CRL_get_issuer(crl.get());
    bool signed_by_ca = false;
    for (const X509Ptr& ca : cas) {
      if (X509_NAME_cmp(issuer, X509_get_subject_name(ca.get())) == 0 &&
          X509_CRL_verify(crl.get(), X509_get0_pubkey(ca.get())) == 1) {
        signed_by_ca = true;
        break;
      }
    }
    ERR_clear_error();
    if (!signed_by_ca) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--tls_crl '", path, "': the CRL of ", NameToString(issuer),
          " is not signed by a CA of --tls_ca '", options.ca_file,
          "' (it would never apply)"));
    }
    const absl::Time this_update =
        AsnTimeToTime(X509_CRL_get0_lastUpdate(crl.get()));
    if (this_update > now) {
      return absl::FailedPreconditionError(
          absl::StrCat("--tls_crl '", path, "': the CRL of ",
                       NameToString(issuer), " is not valid before ",
                       absl::FormatTime(this_update, absl::UTCTimeZone())));
    }
    const ASN1_TIME* next = X509_CRL_get0_nextUpdate(crl.get());
    if (next != nullptr && AsnTimeToTime(next) <= now) {
      return absl::FailedPreconditionError(absl::StrCat(
          "--tls_crl '", path, "': the CRL of ", NameToString(issuer),
          " expired at ",
          absl::FormatTime(AsnTimeToTime(next), absl::UTCTimeZone()),
          " (its nextUpdate); OpenSSL would refuse every client of that CA"));
    }
  }
  return crls;
}

// The private hashed CRL directories this process made; removed at exit.
class CrlDirectories {
 public:
  static CrlDirectories& Get() {
    static CrlDirectories* dirs = [] {
      auto* made = new CrlDirectories();
      std::atexit([] { Get().RemoveAll(); });
      return made;
    }();
    return *dirs;
  }
  void Add(std::string dir) {
    absl::MutexLock lock(&mu_);
    dirs_.push_back(std::move(dir));
  }
  void RemoveAll() {
    absl::MutexLock lock(&mu_);
    for (const std::string& dir : dirs_) {
      std::error_code ignored;
      std::filesystem::remove_all(dir, ignored);
    }
    dirs_.clear();
  }

 private:
  absl::Mutex mu_;
  std::vector<std::string> dirs_ ABSL_GUARDED_BY(mu_);
};

// `crls` written as an OpenSSL hashed directory (HASH.r0, HASH.r1, ... per
// issuer name hash), the only form gRPC 1.51 reads CRLs in.
absl::StatusOr<std::string> WriteCrlDirectory(const std::vector<CrlPtr>& crls) {
  const char* tmp = std::getenv("TMPDIR");
  std::string dir =
      absl::StrCat(tmp != nullptr && *tmp ? tmp : "/tmp", "/psdb-crl-XXXXXX");
  if (mkdtemp(dir.data()) == nullptr) {
    return absl::InternalError(
        absl::StrCat("--tls_crl: cannot make a directory ", dir));
  }
  CrlDirectories::Get().Add(dir);
  std::map<unsigned long, int> next_suffix;
  for (const CrlPtr& crl : crls) {
    int ok = 0;
    const unsigned long hash = X509_NAME_hash_ex(X509_CRL_get_issuer(crl.get()),
                                                 nullptr, nullptr, &ok);
    const std::string file =
        absl::StrFormat("%s/%08lx.r%d", dir, hash, next_suffix[hash]++);
    BioPtr out(BIO_new_file(file.c_str(), "w"));
    if (ok != 1 || out == nullptr ||
        PEM_write_bio_X509_CRL(out.get(), crl.get()) != 1) {
      ERR_clear_error();
      return absl::InternalError(
          absl::StrCat("--tls_crl: cannot write ", file));
    }
  }
  return dir;
}

}  // namespace

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
        !options.crl_file.empty() || options.require_client_cert) {
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
  if (!options.crl_file.empty() && options.ca_file.empty()) {
    return absl::InvalidArgumentError(
        "--tls_crl needs --tls_ca (the CA whose revocations it lists; "
        "clients are checked against it)");
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
  std::string root;
  if (!options.ca_file.empty()) {
    PSDB_ASSIGN_OR_RETURN(root, ReadFileToString(options.ca_file));
  }
  std::string crl_directory;
  if (!options.crl_file.empty()) {
    PSDB_ASSIGN_OR_RETURN(std::vector<CrlPtr> crls, LoadCrls(options, now));
    PSDB_ASSIGN_OR_RETURN(crl_directory, WriteCrlDirectory(crls));
  }
  // gRPC's TlsServerCredentials: the one credentials API of gRPC 1.51 that
  // takes a CRL directory. Certificates are given once (static provider).
  auto provider =
      std::make_shared<grpc::experimental::StaticDataCertificateProvider>(
          root,
          std::vector<grpc::experimental::IdentityKeyCertPair>{{key, cert}});
  grpc::experimental::TlsServerCredentialsOptions tls(provider);
  tls.watch_identity_key_cert_pairs();
  if (!root.empty()) tls.watch_root_certs();
  tls.set_cert_request_type(
      options.require_client_cert
          ? GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY
      : root.empty() ? GRPC_SSL_DONT_REQUEST_CLIENT_CERTIFICATE
                     : GRPC_SSL_REQUEST_CLIENT_CERTIFICATE_AND_VERIFY);
  if (!crl_directory.empty()) tls.set_crl_directory(crl_directory);
  tls_credentials_made = true;
  return grpc::experimental::TlsServerCredentials(tls);
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
  tls_credentials_made = true;
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

absl::Status ValidateCipherList(absl::string_view ciphers) {
  if (ciphers.empty()) {
    return absl::InvalidArgumentError(
        "--tls_ciphers is empty: give an OpenSSL cipher list such as "
        "ECDHE-ECDSA-AES256-GCM-SHA384:ECDHE-RSA-AES256-GCM-SHA384");
  }
  std::unique_ptr<SSL_CTX, void (*)(SSL_CTX*)> ctx(SSL_CTX_new(TLS_method()),
                                                   SSL_CTX_free);
  if (ctx == nullptr) return absl::InternalError("SSL_CTX_new failed");
  for (absl::string_view element : absl::StrSplit(ciphers, ':')) {
    if (element.empty() || element[0] == '!' || element[0] == '-' ||
        element[0] == '+' || element[0] == '@') {
      continue;  // an operator on what the others select
    }
    const bool known =
        SSL_CTX_set_cipher_list(ctx.get(), std::string(element).c_str()) == 1;
    ERR_clear_error();
    if (!known) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--tls_ciphers: '", element,
          "' selects no TLS 1.2 cipher suite OpenSSL knows (see `openssl "
          "ciphers -v`; TLS 1.3 suites such as TLS_AES_128_GCM_SHA256 "
          "cannot be chosen through gRPC)"));
    }
  }
  const bool any =
      SSL_CTX_set_cipher_list(ctx.get(), std::string(ciphers).c_str()) == 1;
  ERR_clear_error();
  if (!any) {
    return absl::InvalidArgumentError(
        absl::StrCat("--tls_ciphers '", ciphers, "' selects no cipher suite"));
  }
  return absl::OkStatus();
}

absl::Status SetProcessCipherList(absl::string_view ciphers) {
  PSDB_RETURN_IF_ERROR(ValidateCipherList(ciphers));
  const char* current = std::getenv(kGrpcCipherSuitesVariable);
  if (tls_credentials_made && (current == nullptr || current != ciphers)) {
    return absl::FailedPreconditionError(
        "--tls_ciphers set after this process made TLS credentials: gRPC "
        "reads its cipher list once, at its first TLS connection");
  }
  setenv(kGrpcCipherSuitesVariable, std::string(ciphers).c_str(),
         /*overwrite=*/1);
  return absl::OkStatus();
}

}  // namespace psdb::rpc
