// TLS and mutual TLS with certificates made at test time by the openssl
// command: trusted clients connect; a client without a certificate, one with
// a certificate from another CA, and one trusting another CA are refused; an
// expired server certificate is refused at startup; one near expiry warns.
#include "rpc/wire/tls.h"

#include <sys/wait.h>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "rpc/client/remote_client.h"
#include "rpc/server/server.h"
#include "tests/testing/child_process.h"
#include "tests/testing/test_util.h"
#include "util/status_macros.h"

namespace psdb::rpc {
namespace {

using ::psdb::testing::BuiltBinary;
using ::psdb::testing::ChildProcess;
using ::psdb::testing::RunShell;
using ::psdb::testing::ScratchDir;
using ::psdb::testing::StartPsServer;

// Writes, under dir: ca1.{pem,key}, ca2.{pem,key}, server.{pem,key} (CA1,
// 30 days, SAN 127.0.0.1/localhost), soon.pem (CA1, 10 days),
// expired.pem (CA1, Jan 2020), client1.{pem,key} (CA1), client2.{pem,key}
// (CA2).
void MakeCertificates(const std::string& dir) {
  const std::string script = absl::StrCat(
      "set -e; cd '", dir, "';",
      "for ca in ca1 ca2; do openssl req -x509 -newkey ec -pkeyopt "
      "ec_paramgen_curve:prime256v1 -nodes "
      "-keyout $ca.key -out $ca.pem -days 30 -subj /CN=$ca; done;",
      "printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\\n' > san.ext;",
      "openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes "
      "-keyout server.key -out server.csr "
      "-subj /CN=localhost;",
      "openssl x509 -req -in server.csr -CA ca1.pem -CAkey ca1.key "
      "-set_serial 11 -days 30 -extfile san.ext -out server.pem;",
      "openssl x509 -req -in server.csr -CA ca1.pem -CAkey ca1.key "
      "-set_serial 12 -days 10 -extfile san.ext -out soon.pem;",
      "for c in 1 2; do openssl req -newkey ec -pkeyopt "
      "ec_paramgen_curve:prime256v1 -nodes "
      "-keyout client$c.key -out client$c.csr -subj /CN=client$c; "
      "openssl x509 -req -in client$c.csr -CA ca$c.pem -CAkey ca$c.key "
      "-set_serial 2$c -days 30 -out client$c.pem; done;",
      // openssl x509 cannot backdate; `openssl ca` takes explicit dates.
      "mkdir -p cadb; : > cadb/index.txt; echo 01 > cadb/serial;",
      "printf '[ca]\\ndefault_ca=c\\n[c]\\ndir=.\\ndatabase=cadb/index.txt\\n"
      "serial=cadb/serial\\nnew_certs_dir=cadb\\ndefault_md=sha256\\n"
      "policy=p\\ncopy_extensions=copy\\nunique_subject=no\\n"
      "[p]\\ncommonName=supplied\\n' > ca.cnf;",
      "openssl ca -batch -config ca.cnf -cert ca1.pem -keyfile ca1.key "
      "-in server.csr -out expired.pem -notext "
      "-startdate 20200101000000Z -enddate 20200102000000Z");
  const auto result = RunShell(script);
  ASSERT_EQ(result.exit_code, 0) << result.output;
}

class TlsTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    certs_ = new ScratchDir();
    MakeCertificates(certs_->path());
  }
  static void TearDownTestSuite() { delete certs_; }
  static std::string Cert(const std::string& name) { return certs_->Sub(name); }

  void StartServer(bool require_client_cert) {
    ASSERT_OK_AND_ASSIGN(store_, Store::Open({}, dir_.Sub("db")));
    ServerOptions options;
    options.num_threads = 1;
    options.tls.cert_file = Cert("server.pem");
    options.tls.key_file = Cert("server.key");
    options.tls.ca_file = Cert("ca1.pem");
    options.tls.require_client_cert = require_client_cert;
    ASSERT_OK_AND_ASSIGN(server_, PsServer::Start(options, store_.get()));
  }

  absl::Status ListWith(const ClientTlsOptions& tls) {
    RemoteClientOptions options;
    PSDB_ASSIGN_OR_RETURN(options.cluster,
                          ClusterMap::FromAddresses({server_->address()}));
    options.tls = tls;
    options.call_timeout = absl::Seconds(10);
    options.max_attempts = 1;
    PSDB_ASSIGN_OR_RETURN(auto client, RemoteClient::Open(options));
    return client->ListTables().status();
  }

  static ScratchDir* certs_;
  ScratchDir dir_;
  std::unique_ptr<Store> store_;
  std::unique_ptr<PsServer> server_;
};
ScratchDir* TlsTest::certs_ = nullptr;

TEST_F(TlsTest, MutualTlsAdmitsOnlyClientsWithACertificateFromItsCa) {
  StartServer(/*require_client_cert=*/true);
  ClientTlsOptions good;
  good.ca_file = Cert("ca1.pem");
  good.cert_file = Cert("client1.pem");
  good.key_file = Cert("client1.key");
  EXPECT_OK(ListWith(good));

  ClientTlsOptions no_cert;
  no_cert.ca_file = Cert("ca1.pem");
  EXPECT_THAT(ListWith(no_cert), StatusIs(absl::StatusCode::kUnavailable));

  ClientTlsOptions other_ca_cert = good;
  other_ca_cert.cert_file = Cert("client2.pem");
  other_ca_cert.key_file = Cert("client2.key");
  EXPECT_THAT(ListWith(other_ca_cert),
              StatusIs(absl::StatusCode::kUnavailable));

  ClientTlsOptions trusts_other_ca = good;
  trusts_other_ca.ca_file = Cert("ca2.pem");
  EXPECT_THAT(ListWith(trusts_other_ca),
              StatusIs(absl::StatusCode::kUnavailable));

  ClientTlsOptions plaintext;
  EXPECT_THAT(ListWith(plaintext), StatusIs(absl::StatusCode::kUnavailable));
  EXPECT_OK(ListWith(good));  // still serving
}

TEST_F(TlsTest, ServerOnlyTlsAdmitsClientsThatTrustItsCa) {
  StartServer(/*require_client_cert=*/false);
  ClientTlsOptions trusting;
  trusting.ca_file = Cert("ca1.pem");
  EXPECT_OK(ListWith(trusting));
  ClientTlsOptions trusts_other_ca;
  trusts_other_ca.ca_file = Cert("ca2.pem");
  EXPECT_THAT(ListWith(trusts_other_ca),
              StatusIs(absl::StatusCode::kUnavailable));
}

TEST_F(TlsTest, CertificateExpiryPolicy) {
  ASSERT_OK_AND_ASSIGN(absl::Time not_after,
                       CertificateNotAfter(Cert("expired.pem")));
  EXPECT_EQ(not_after, absl::FromUnixSeconds(1577923200));  // 2020-01-02
  ServerTlsOptions tls;
  tls.cert_file = Cert("expired.pem");
  tls.key_file = Cert("server.key");
  EXPECT_THAT(MakeServerCredentials(tls, "127.0.0.1"),
              StatusIs(absl::StatusCode::kFailedPrecondition));

  // Expiring in 10 days: a warning with the default 90-day window, none with
  // a 5-day one.
  tls.cert_file = Cert("soon.pem");
  ::testing::internal::CaptureStderr();
  EXPECT_OK(MakeServerCredentials(tls, "127.0.0.1"));
  EXPECT_NE(::testing::internal::GetCapturedStderr().find("WARNING"),
            std::string::npos);
  tls.cert_expiry_warning_days = 5;
  ::testing::internal::CaptureStderr();
  EXPECT_OK(MakeServerCredentials(tls, "127.0.0.1"));
  EXPECT_EQ(::testing::internal::GetCapturedStderr().find("WARNING"),
            std::string::npos);
}

TEST_F(TlsTest, PsServerRefusesToStartWithAnExpiredCertificate) {
  auto server = StartPsServer({absl::StrCat("--data_dir=", dir_.Sub("expired")),
                               absl::StrCat("--tls_cert=", Cert("expired.pem")),
                               absl::StrCat("--tls_key=", Cert("server.key"))});
  ASSERT_THAT(server, StatusIs(absl::StatusCode::kFailedPrecondition));
  EXPECT_NE(server.status().message().find("expired"), std::string::npos)
      << server.status();
}

TEST(PlaintextPolicyTest, OnlyLoopbackOrInsecure) {
  ServerTlsOptions server;
  EXPECT_OK(MakeServerCredentials(server, "127.0.0.1"));
  EXPECT_OK(MakeServerCredentials(server, "::1"));
  EXPECT_OK(MakeServerCredentials(server, "localhost"));
  EXPECT_THAT(MakeServerCredentials(server, "0.0.0.0"),
              StatusIs(absl::StatusCode::kFailedPrecondition));
  server.insecure = true;
  EXPECT_OK(MakeServerCredentials(server, "0.0.0.0"));
  ClientTlsOptions client;
  EXPECT_OK(MakeChannelCredentials(client, "127.0.0.1:7000"));
  EXPECT_THAT(MakeChannelCredentials(client, "10.1.2.3:7000"),
              StatusIs(absl::StatusCode::kFailedPrecondition));
  client.insecure = true;
  EXPECT_OK(MakeChannelCredentials(client, "10.1.2.3:7000"));
  EXPECT_EQ(HostOfAddress("[::1]:7000"), "::1");
  EXPECT_EQ(HostOfAddress("h1:7000"), "h1");
}

}  // namespace
}  // namespace psdb::rpc
