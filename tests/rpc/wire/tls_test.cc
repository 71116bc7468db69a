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
#include "tests/testing/certificates.h"
#include "tests/testing/child_process.h"
#include "tests/testing/test_util.h"
#include "util/status_macros.h"

namespace psdb::rpc {
namespace {

using ::psdb::testing::BuiltBinary;
using ::psdb::testing::ChildProcess;
using ::psdb::testing::MakeTestCertificates;
using ::psdb::testing::ScratchDir;
using ::psdb::testing::StartPsServer;

class TlsTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    certs_ = new ScratchDir();
    ASSERT_OK(MakeTestCertificates(certs_->path()));
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
