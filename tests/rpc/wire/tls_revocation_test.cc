// Certificate revocation (--tls_crl, ServerTlsOptions::crl_file) on psdb's
// gRPC servers, with certificates and CRLs made by the openssl command: a
// real ps-server and a real ps-scheduler under mutual TLS refuse the client
// whose certificate CA1's CRL lists and admit the others; without the CRL
// the same client is admitted; a CRL file that is missing, unparsable,
// signed by another CA or expired stops the start with an error naming
// --tls_crl.
#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "rpc/client/remote_client.h"
#include "rpc/server/server.h"
#include "rpc/wire/convert.h"
#include "rpc/wire/psdb.grpc.pb.h"
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

class TlsRevocationTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    certs_ = new ScratchDir();
    ASSERT_OK(MakeTestCertificates(certs_->path()));
  }
  static void TearDownTestSuite() { delete certs_; }
  static std::string Cert(const std::string& name) { return certs_->Sub(name); }

  // Trusts CA1 and presents clientN (1: valid, 3: revoked in crl.pem).
  static ClientTlsOptions Client(int n) {
    ClientTlsOptions tls;
    tls.ca_file = Cert("ca1.pem");
    tls.cert_file = Cert(absl::StrCat("client", n, ".pem"));
    tls.key_file = Cert(absl::StrCat("client", n, ".key"));
    return tls;
  }

  // Mutual TLS with CA1, revocations from `crl` (none when empty).
  static std::vector<std::string> MutualTlsFlags(const std::string& crl) {
    std::vector<std::string> flags = {
        absl::StrCat("--tls_cert=", Cert("server.pem")),
        absl::StrCat("--tls_key=", Cert("server.key")),
        absl::StrCat("--tls_ca=", Cert("ca1.pem")), "--require_client_cert"};
    if (!crl.empty()) flags.push_back(absl::StrCat("--tls_crl=", Cert(crl)));
    return flags;
  }

  static ServerTlsOptions MutualTls(const std::string& crl) {
    ServerTlsOptions tls;
    tls.cert_file = Cert("server.pem");
    tls.key_file = Cert("server.key");
    tls.ca_file = Cert("ca1.pem");
    tls.require_client_cert = true;
    if (!crl.empty()) tls.crl_file = Cert(crl);
    return tls;
  }

  // ListTables on the ps-server at `address`, one attempt.
  static absl::Status ListTablesAt(const std::string& address,
                                   const ClientTlsOptions& tls) {
    RemoteClientOptions options;
    PSDB_ASSIGN_OR_RETURN(options.cluster,
                          ClusterMap::FromAddresses({address}));
    options.tls = tls;
    options.call_timeout = absl::Seconds(10);
    options.max_attempts = 1;
    PSDB_ASSIGN_OR_RETURN(auto client, RemoteClient::Open(options));
    return client->ListTables().status();
  }

  // SchedulerService.GetStatus on the ps-scheduler at `address`.
  static absl::Status SchedulerStatusAt(const std::string& address,
                                        const ClientTlsOptions& tls) {
    PSDB_ASSIGN_OR_RETURN(auto channel, MakeChannel(tls, address));
    auto stub = v1::SchedulerService::NewStub(channel);
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() +
                     std::chrono::seconds(10));
    v1::SchedulerStatus status;
    return FromGrpcStatus(
        stub->GetStatus(&ctx, v1::GetSchedulerStatusRequest(), &status));
  }

  static ScratchDir* certs_;
  ScratchDir dir_;
};
ScratchDir* TlsRevocationTest::certs_ = nullptr;

TEST_F(TlsRevocationTest, PsServerRefusesARevokedClientCertificate) {
  std::vector<std::string> args = MutualTlsFlags("crl.pem");
  args.push_back(absl::StrCat("--data_dir=", dir_.Sub("db")));
  ASSERT_OK_AND_ASSIGN(auto server, StartPsServer(args));
  const std::string address = server->ready_value();
  EXPECT_OK(ListTablesAt(address, Client(1)));
  EXPECT_THAT(ListTablesAt(address, Client(3)),
              StatusIs(absl::StatusCode::kUnavailable));
  EXPECT_OK(ListTablesAt(address, Client(1)));  // still serving
  EXPECT_OK(server->Stop());
}

TEST_F(TlsRevocationTest, WithoutTheCrlTheSameClientIsAdmitted) {
  ASSERT_OK_AND_ASSIGN(auto store, Store::Open({}, dir_.Sub("db")));
  ServerOptions options;
  options.num_threads = 1;
  options.tls = MutualTls("");
  ASSERT_OK_AND_ASSIGN(auto server, PsServer::Start(options, store.get()));
  EXPECT_OK(ListTablesAt(server->address(), Client(3)));
}

TEST_F(TlsRevocationTest, DerCrlIsReadToo) {
  ASSERT_OK_AND_ASSIGN(auto store, Store::Open({}, dir_.Sub("db")));
  ServerOptions options;
  options.num_threads = 1;
  options.tls = MutualTls("crl.der");
  ASSERT_OK_AND_ASSIGN(auto server, PsServer::Start(options, store.get()));
  EXPECT_THAT(ListTablesAt(server->address(), Client(3)),
              StatusIs(absl::StatusCode::kUnavailable));
  EXPECT_OK(ListTablesAt(server->address(), Client(1)));
}

TEST_F(TlsRevocationTest, PsSchedulerRefusesARevokedClientCertificate) {
  // Held while the scheduler binds it: a port merely found free could
  // meanwhile go to another test's server.
  const ReservedPort port;
  ChildOptions options = PsSchedulerOptions(port.port(), 1, 0);
  for (std::string& flag : MutualTlsFlags("crl.pem")) {
    options.args.push_back(std::move(flag));
  }
  ASSERT_OK_AND_ASSIGN(auto scheduler, ChildProcess::Start(options));
  const std::string address = scheduler->ready_value();
  EXPECT_OK(SchedulerStatusAt(address, Client(1)));
  EXPECT_THAT(SchedulerStatusAt(address, Client(3)),
              StatusIs(absl::StatusCode::kUnavailable));
  EXPECT_OK(SchedulerStatusAt(address, Client(1)));
  EXPECT_OK(scheduler->Stop());
}

TEST_F(TlsRevocationTest, ABadCrlIsAnErrorNamingTheFlag) {
  ASSERT_TRUE(
      RunShell(absl::StrCat("echo 'not a CRL' > '", dir_.Sub("junk.pem"), "'"))
          .exit_code == 0);
  struct Case {
    std::string crl;
    absl::StatusCode code;
    std::string says;
  };
  const std::vector<Case> cases = {
      {dir_.Sub("missing.pem"), absl::StatusCode::kNotFound, "cannot open"},
      {dir_.Sub("junk.pem"), absl::StatusCode::kInvalidArgument,
       "not a certificate revocation list"},
      {Cert("ca2_crl.pem"), absl::StatusCode::kInvalidArgument,
       "is not signed by a CA of --tls_ca"},
      {Cert("expired_crl.pem"), absl::StatusCode::kFailedPrecondition,
       "expired at 2020-01-02"},
  };
  for (const Case& c : cases) {
    ServerTlsOptions tls = MutualTls("");
    tls.crl_file = c.crl;
    const auto made = MakeServerCredentials(tls, "127.0.0.1");
    EXPECT_THAT(made, StatusIs(c.code)) << c.crl;
    EXPECT_THAT(made.status().message(), HasSubstr("--tls_crl")) << c.crl;
    EXPECT_THAT(made.status().message(), HasSubstr(c.says)) << c.crl;
  }
  ServerTlsOptions no_ca = MutualTls("crl.pem");
  no_ca.ca_file.clear();
  no_ca.require_client_cert = false;
  EXPECT_THAT(MakeServerCredentials(no_ca, "127.0.0.1"),
              StatusIs(absl::StatusCode::kInvalidArgument));

  // The binaries stop at start (--dry_run reads the TLS files as a start
  // does) with exit 1 and the flag named.
  const std::vector<std::string> commands = {
      absl::StrCat(BuiltBinary("tools/ps-server"),
                   " --dry_run --data_dir=", dir_.Sub("db")),
      absl::StrCat(BuiltBinary("tools/ps-scheduler"),
                   " --dry_run --server_num=1 --worker_num=0 "
                   "--sched_host=127.0.0.1 --sched_port=7100")};
  for (std::string command : commands) {
    for (const std::string& flag : MutualTlsFlags("")) {
      absl::StrAppend(&command, " ", flag);
    }
    const ShellResult junk =
        RunShell(absl::StrCat(command, " --tls_crl=", dir_.Sub("junk.pem")));
    EXPECT_EQ(junk.exit_code, 1) << command << ": " << junk.output;
    EXPECT_THAT(junk.output, HasSubstr("--tls_crl")) << command;
    EXPECT_THAT(junk.output, HasSubstr("not a certificate revocation list"))
        << command;
    // A good CRL passes the same check.
    const ShellResult good =
        RunShell(absl::StrCat(command, " --tls_crl=", Cert("crl.pem")));
    EXPECT_EQ(good.exit_code, 0) << command << ": " << good.output;
  }
}

}  // namespace
}  // namespace psdb::rpc
