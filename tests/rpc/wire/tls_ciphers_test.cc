// The TLS 1.2 cipher list (--tls_ciphers, SetProcessCipherList) on real
// ps-server and ps-scheduler processes, probed with `openssl s_client`: a
// TLS 1.2 client offering only a suite outside the list fails the
// handshake, one offering a listed suite gets it, and without the flag the
// same outside suite is accepted (so the refusal is the flag's). TLS 1.3
// clients, gRPC's own included, still connect (gRPC 1.51 cannot restrict
// TLS 1.3 suites: rpc/wire/tls.h). A list OpenSSL does not accept stops the
// start with an error naming the flag.
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "rpc/client/remote_client.h"
#include "rpc/wire/tls.h"
#include "tests/testing/certificates.h"
#include "tests/testing/child_process.h"
#include "tests/testing/test_util.h"
#include "util/status_macros.h"

namespace psdb::rpc {
namespace {

using ::psdb::testing::BuiltBinary;
using ::psdb::testing::ChildOptions;
using ::psdb::testing::ChildProcess;
using ::psdb::testing::MakeTestCertificates;
using ::psdb::testing::PsSchedulerOptions;
using ::psdb::testing::ReservedPort;
using ::psdb::testing::RunShell;
using ::psdb::testing::ScratchDir;
using ::psdb::testing::ShellResult;
using ::psdb::testing::StartPsServer;
using ::testing::HasSubstr;

// The list the servers are given, and a suite outside it that gRPC's
// default list holds; both fit the tests' EC (ECDSA) server certificate.
constexpr char kListed[] = "ECDHE-ECDSA-AES256-GCM-SHA384";
constexpr char kOutside[] = "ECDHE-ECDSA-AES128-GCM-SHA256";

class TlsCiphersTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    certs_ = new ScratchDir();
    ASSERT_OK(MakeTestCertificates(certs_->path()));
  }
  static void TearDownTestSuite() { delete certs_; }
  static std::string Cert(const std::string& name) { return certs_->Sub(name); }

  // Server TLS flags, with --tls_ciphers=kListed when `restrict`.
  static std::vector<std::string> TlsFlags(bool restrict) {
    std::vector<std::string> flags = {
        absl::StrCat("--tls_cert=", Cert("server.pem")),
        absl::StrCat("--tls_key=", Cert("server.key"))};
    if (restrict) flags.push_back(absl::StrCat("--tls_ciphers=", kListed));
    return flags;
  }

  // A handshake with `address` offering only `protocol_and_ciphers`
  // (e.g. "-tls1_2 -cipher X"), verifying the server against CA1.
  static ShellResult Handshake(const std::string& address,
                               const std::string& protocol_and_ciphers) {
    return RunShell(absl::StrCat("openssl s_client -connect ", address, " ",
                                 protocol_and_ciphers, " -alpn h2 -CAfile '",
                                 Cert("ca1.pem"),
                                 "' -verify_return_error < /dev/null"));
  }

  // Listed suite accepted, outside one refused (TLS 1.2); TLS 1.3 accepted.
  static void ExpectOnlyListedTls12Suite(const std::string& address) {
    const ShellResult listed =
        Handshake(address, absl::StrCat("-tls1_2 -cipher ", kListed));
    EXPECT_EQ(listed.exit_code, 0) << listed.output;
    EXPECT_THAT(listed.output,
                HasSubstr(absl::StrCat("TLSv1.2, Cipher is ", kListed)));
    const ShellResult outside =
        Handshake(address, absl::StrCat("-tls1_2 -cipher ", kOutside));
    EXPECT_NE(outside.exit_code, 0) << outside.output;
    // gRPC closes the connection without an alert; nothing is agreed.
    EXPECT_THAT(outside.output, HasSubstr("New, (NONE), Cipher is (NONE)"));
    const ShellResult tls13 = Handshake(address, "-tls1_3");
    EXPECT_EQ(tls13.exit_code, 0) << tls13.output;
    EXPECT_THAT(tls13.output, HasSubstr("New, TLSv1.3"));
  }

  static ScratchDir* certs_;
  ScratchDir dir_;
};
ScratchDir* TlsCiphersTest::certs_ = nullptr;

TEST_F(TlsCiphersTest, PsServerRefusesATls12ClientOfferingOnlyUnlistedSuites) {
  std::vector<std::string> args = TlsFlags(/*restrict=*/true);
  args.push_back(absl::StrCat("--data_dir=", dir_.Sub("db")));
  ASSERT_OK_AND_ASSIGN(auto server, StartPsServer(args));
  ExpectOnlyListedTls12Suite(server->ready_value());

  // psdb's own client (TLS 1.3) is served.
  RemoteClientOptions options;
  ASSERT_OK_AND_ASSIGN(options.cluster,
                       ClusterMap::FromAddresses({server->ready_value()}));
  options.tls.ca_file = Cert("ca1.pem");
  options.max_attempts = 1;
  ASSERT_OK_AND_ASSIGN(auto client, RemoteClient::Open(options));
  EXPECT_OK(client->ListTables().status());
  EXPECT_OK(server->Stop());
}

TEST_F(TlsCiphersTest, WithoutTheFlagTheOutsideSuiteIsAccepted) {
  std::vector<std::string> args = TlsFlags(/*restrict=*/false);
  args.push_back(absl::StrCat("--data_dir=", dir_.Sub("db")));
  ASSERT_OK_AND_ASSIGN(auto server, StartPsServer(args));
  const ShellResult outside = Handshake(
      server->ready_value(), absl::StrCat("-tls1_2 -cipher ", kOutside));
  EXPECT_EQ(outside.exit_code, 0) << outside.output;
  EXPECT_THAT(outside.output,
              HasSubstr(absl::StrCat("TLSv1.2, Cipher is ", kOutside)));
  EXPECT_OK(server->Stop());
}

TEST_F(TlsCiphersTest,
       PsSchedulerRefusesATls12ClientOfferingOnlyUnlistedSuites) {
  // Held while the scheduler binds it (see tls_revocation_test.cc).
  const ReservedPort port;
  ChildOptions options = PsSchedulerOptions(port.port(), 1, 0);
  for (std::string& flag : TlsFlags(/*restrict=*/true)) {
    options.args.push_back(std::move(flag));
  }
  ASSERT_OK_AND_ASSIGN(auto scheduler, ChildProcess::Start(options));
  ExpectOnlyListedTls12Suite(scheduler->ready_value());
  EXPECT_OK(scheduler->Stop());
}

TEST(CipherListTest, OpenSslMustKnowEveryElement) {
  EXPECT_OK(ValidateCipherList(kListed));
  EXPECT_OK(ValidateCipherList("HIGH:!aNULL:!MD5:@STRENGTH"));
  // The seeds' cipher_list (MindSpore's config.json), its typo mended.
  EXPECT_OK(ValidateCipherList(
      "ECDHE-RSA-AES128-GCM-SHA256:ECDHE-ECDSA-AES128-GCM-SHA256:"
      "ECDHE-RSA-AES256-GCM-SHA384:ECDHE-ECDSA-AES256-GCM-SHA384:"
      "DHE-RSA-AES128-GCM-SHA256:DHE-DSS-AES128-GCM-SHA256:"
      "DHE-RSA-AES256-GCM-SHA384:DHE-DSS-AES256-GCM-SHA384:"
      "DHE-PSK-AES128-GCM-SHA256:DHE-PSK-AES256-GCM-SHA384:"
      "DHE-PSK-CHACHA20-POLY1305:ECDHE-RSA-CHACHA20-POLY1305:"
      "ECDHE-PSK-CHACHA20-POLY1305:DHE-RSA-AES128-CCM:DHE-RSA-AES256-CCM:"
      "DHE-RSA-CHACHA20-POLY1305:DHE-PSK-AES128-CCM:DHE-PSK-AES256-CCM:"
      "ECDHE-ECDSA-AES128-CCM:ECDHE-ECDSA-AES256-CCM:"
      "ECDHE-ECDSA-CHACHA20-POLY1305"));
  // The seeds' list as printed has "ECDHE-R SA-...": named, not skipped.
  const absl::Status typo = ValidateCipherList(
      "ECDHE-R SA-AES128-GCM-SHA256:ECDHE-ECDSA-AES128-GCM-SHA256");
  EXPECT_THAT(typo, StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(typo.message(), HasSubstr("'ECDHE-R SA-AES128-GCM-SHA256'"));
  EXPECT_THAT(typo.message(), HasSubstr("--tls_ciphers"));
  EXPECT_THAT(ValidateCipherList("TLS_AES_128_GCM_SHA256"),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(ValidateCipherList(""),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(ValidateCipherList("!aNULL"),
              StatusIs(absl::StatusCode::kInvalidArgument));
}

TEST_F(TlsCiphersTest, TooLateOnceTheProcessMadeTlsCredentials) {
  ClientTlsOptions tls;
  tls.ca_file = Cert("ca1.pem");
  ASSERT_OK(MakeChannelCredentials(tls, "127.0.0.1:1").status());
  EXPECT_THAT(SetProcessCipherList(kListed),
              StatusIs(absl::StatusCode::kFailedPrecondition));
  EXPECT_EQ(std::getenv("GRPC_SSL_CIPHER_SUITES"), nullptr);
}

TEST(CipherListTest, BinariesStopAtABadListNamingTheFlag) {
  for (const std::string& binary :
       {BuiltBinary("tools/ps-server"), BuiltBinary("tools/ps-scheduler")}) {
    const ShellResult result = RunShell(absl::StrCat(
        binary, " --dry_run --tls_ciphers=ECDHE-ECDSA-AES256-GCM-SHA38"));
    EXPECT_EQ(result.exit_code, 1) << binary << ": " << result.output;
    EXPECT_THAT(result.output,
                HasSubstr("--tls_ciphers: 'ECDHE-ECDSA-AES256-GCM-SHA38'"))
        << binary;
  }
}

}  // namespace
}  // namespace psdb::rpc
