// A real Prometheus (Debian's /usr/bin/prometheus) scrapes a live PsServer
// with deploy/prometheus/prometheus-static.yml, changed only in its
// scrape_interval (1 s) and its targets file (this server's metrics
// address), and a psdb metric is read back through Prometheus's HTTP query
// API: the Pull count is exactly the pulls sent.
#include <unistd.h>

#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "grpcpp/grpcpp.h"
#include "manifest/manifest.h"
#include "psdb/store.h"
#include "rpc/server/server.h"
#include "rpc/wire/psdb.grpc.pb.h"
#include "tests/testing/child_process.h"
#include "tests/testing/test_util.h"

namespace psdb::rpc {
namespace {

using ::psdb::testing::ChildOptions;
using ::psdb::testing::ChildProcess;
using ::psdb::testing::ReservedPort;
using ::psdb::testing::RunShell;
using ::psdb::testing::ScratchDir;
using ::psdb::testing::WaitFor;

constexpr char kPrometheus[] = "/usr/bin/prometheus";

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void WriteFile(const std::string& path, const std::string& text) {
  std::ofstream out(path);
  out << text;
}

// The first sample's value in a /api/v1/query answer
// ({"status":"success","data":{"result":[{"metric":{...},"value":[t,"v"]}]}});
// "" when there is no sample yet.
std::string FirstValue(const std::string& json) {
  const size_t v = json.find("\"value\":[");
  if (v == std::string::npos) return "";
  const size_t open = json.find(",\"", v);
  const size_t close = json.find('"', open + 2);
  if (open == std::string::npos || close == std::string::npos) return "";
  return json.substr(open + 2, close - open - 2);
}

TEST(MetricsPrometheusTest, PrometheusReadsAPsdbMetricWithDeploysConfig) {
  if (access(kPrometheus, X_OK) != 0) {
    GTEST_SKIP() << kPrometheus
                 << " is missing: install Debian's prometheus package "
                    "(./dev.sh deps does)";
  }
  ScratchDir dir;
  ASSERT_OK_AND_ASSIGN(auto store, Store::Open({}, dir.Sub("db")));
  ServerOptions options;
  options.num_threads = 2;
  options.metrics_port = 0;
  ASSERT_OK_AND_ASSIGN(auto server, PsServer::Start(options, store.get()));
  auto stub = v1::ParameterService::NewStub(grpc::CreateChannel(
      server->address(), grpc::InsecureChannelCredentials()));
  {
    TableSpec spec;
    spec.name = "emb";
    spec.dim = 2;
    v1::CreateTableRequest req;
    *req.mutable_spec() = TableSpecToProto(spec);
    v1::CreateTableResponse resp;
    grpc::ClientContext ctx;
    ASSERT_TRUE(stub->CreateTable(&ctx, req, &resp).ok());
  }
  constexpr int kPulls = 11;
  for (int i = 0; i < kPulls; ++i) {
    v1::PullRequest req;
    req.set_table("emb");
    req.add_keys(static_cast<uint64_t>(i));
    v1::PullResponse resp;
    grpc::ClientContext ctx;
    ASSERT_TRUE(stub->Pull(&ctx, req, &resp).ok());
  }

  // deploy's config, with only the interval and the targets changed.
  const std::string deploy =
      absl::StrCat(PSDB_SOURCE_DIR, "/deploy/prometheus/");
  const std::string config = ReadFile(deploy + "prometheus-static.yml");
  ASSERT_NE(config.find("scrape_interval: 15s"), std::string::npos);
  ASSERT_NE(config.find("psdb-targets.json"), std::string::npos);
  WriteFile(dir.Sub("prometheus.yml"),
            absl::StrReplaceAll(
                config, {{"scrape_interval: 15s", "scrape_interval: 1s"}}));
  WriteFile(dir.Sub("psdb-targets.json"),
            absl::StrCat("[{\"targets\": [\"", server->metrics_address(),
                         "\"], \"labels\": {\"app\": \"psdb-server\"}}]\n"));

  const ReservedPort web_port;
  ChildOptions prom;
  prom.binary = kPrometheus;
  prom.args = {
      absl::StrCat("--config.file=", dir.Sub("prometheus.yml")),
      absl::StrCat("--storage.tsdb.path=", dir.Sub("tsdb")),
      absl::StrCat("--web.listen-address=127.0.0.1:", web_port.port())};
  prom.destroy_signal = SIGTERM;
  ASSERT_OK_AND_ASSIGN(auto prometheus, ChildProcess::Start(prom));

  const std::string query = absl::StrCat(
      "curl -sf --max-time 5 -G http://127.0.0.1:", web_port.port(),
      "/api/v1/query --data-urlencode "
      "'query=psdb_server_requests_total{method=\"Pull\",code=\"OK\"}'");
  std::string answer;
  const bool seen = WaitFor(
      [&] {
        answer = RunShell(query, /*merge_stderr=*/false).output;
        return FirstValue(answer) == absl::StrCat(kPulls);
      },
      absl::Seconds(90));
  EXPECT_TRUE(seen) << "last answer: " << answer << "\nprometheus log tail: "
                    << prometheus->Stderr().substr(
                           prometheus->Stderr().size() > 3000
                               ? prometheus->Stderr().size() - 3000
                               : 0);
  // Scraped by deploy's job, with the target's labels.
  EXPECT_NE(answer.find("\"job\":\"psdb-static\""), std::string::npos)
      << answer;
  EXPECT_NE(answer.find("\"app\":\"psdb-server\""), std::string::npos)
      << answer;

  ASSERT_OK(prometheus->Stop(absl::Seconds(30)));
  server->Shutdown(absl::Seconds(5));
}

}  // namespace
}  // namespace psdb::rpc
