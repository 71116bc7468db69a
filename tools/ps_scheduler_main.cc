// ps-scheduler: forms a psdb cluster (rpc/control/scheduler.h). Settings come
// from the PS_* variables or the same-named flags (rpc/control/node_config.h):
//
//   PS_SERVER_NUM=2 PS_WORKER_NUM=2 PS_SCHED_PORT=7100 ps-scheduler
//   ps-scheduler --server_num=2 --worker_num=0 --sched_host=0.0.0.0
//                --sched_port=7100 --insecure   (one command line)
//
// Prints "scheduler listening on HOST:PORT" once it serves (after "metrics
// on HOST:PORT" with --metrics_port: Prometheus text at /metrics,
// rpc/control/scheduler_metrics.h), then one line
// per assignment on stderr ("server node id:<id> addr:<host:port> assigned
// rank 0", "cluster ready: 2 servers, 2 workers, epoch 1", deaths,
// recoveries). SIGTERM or SIGINT stops it (exit 0); a bad or missing
// setting exits 1 at once with the reason. With PS_ENABLE_RECOVERY=1 and
// PS_RECOVERY_PATH=DIR the membership is saved under DIR after every change
// and reloaded at start, so a restarted scheduler carries on with the
// running nodes (they reconnect on their own).
#include <signal.h>

#include <cstdio>
#include <iostream>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/status/status.h"
#include "rpc/control/node_config_flags.h"
#include "rpc/control/scheduler.h"

ABSL_FLAG(int, heartbeat_interval_ms, 1000, "How often nodes beat.");
ABSL_FLAG(int, heartbeat_timeout_ms, 5000,
          "A node silent this long is marked dead.");
ABSL_FLAG(std::string, tls_cert, "", "PEM server certificate chain.");
ABSL_FLAG(std::string, tls_key, "", "PEM private key of --tls_cert.");
ABSL_FLAG(std::string, tls_ca, "", "PEM CA that client certificates chain to.");
ABSL_FLAG(bool, require_client_cert, false,
          "Mutual TLS: refuse clients without a certificate from --tls_ca.");
ABSL_FLAG(bool, insecure, false,
          "Allow plaintext on a non-loopback --sched_host.");
ABSL_FLAG(int, metrics_port, -1,
          "Serve Prometheus metrics over HTTP at /metrics on this port; "
          "0 picks a free one, -1 = off.");
ABSL_FLAG(std::string, metrics_host, "",
          "Address the metrics endpoint binds; default --sched_host.");

namespace {

int Fail(const absl::Status& status) {
  std::fprintf(stderr, "ps-scheduler: %s\n", status.ToString().c_str());
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "ps-scheduler --server_num=N --worker_num=M --sched_port=P "
      "[--sched_host=H] (or PS_SERVER_NUM, PS_WORKER_NUM, PS_SCHED_PORT, "
      "PS_SCHED_HOST)");
  absl::ParseCommandLine(argc, argv);

  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  auto config =
      psdb::rpc::NodeConfigFromEnvAndFlags(psdb::rpc::NodeRoleKind::kScheduler);
  if (!config.ok()) return Fail(config.status());
  psdb::rpc::SchedulerOptions options;
  options.host = config->sched_host;
  options.port = config->sched_port;
  options.server_num = *config->server_num;
  options.worker_num = *config->worker_num;
  if (config->enable_recovery) options.recovery_path = config->recovery_path;
  options.heartbeat_interval =
      absl::Milliseconds(absl::GetFlag(FLAGS_heartbeat_interval_ms));
  options.heartbeat_timeout =
      absl::Milliseconds(absl::GetFlag(FLAGS_heartbeat_timeout_ms));
  options.tls.cert_file = absl::GetFlag(FLAGS_tls_cert);
  options.tls.key_file = absl::GetFlag(FLAGS_tls_key);
  options.tls.ca_file = absl::GetFlag(FLAGS_tls_ca);
  options.tls.require_client_cert = absl::GetFlag(FLAGS_require_client_cert);
  options.tls.insecure = absl::GetFlag(FLAGS_insecure);
  options.metrics_port = absl::GetFlag(FLAGS_metrics_port);
  options.metrics_host = absl::GetFlag(FLAGS_metrics_host);

  auto server = psdb::rpc::SchedulerServer::Start(options);
  if (!server.ok()) return Fail(server.status());
  std::fprintf(stderr, "ps-scheduler: waiting for %d servers and %d workers\n",
               options.server_num, options.worker_num);
  if ((*server)->metrics_port() >= 0) {
    std::cout << "metrics on " << (*server)->metrics_address() << std::endl;
  }
  std::cout << "scheduler listening on " << (*server)->address() << std::endl;

  int signal_number = 0;
  sigwait(&signals, &signal_number);
  std::fprintf(stderr, "ps-scheduler: signal %d, shutting down\n",
               signal_number);
  (*server)->Shutdown();
  server->reset();
  std::fprintf(stderr, "ps-scheduler: stopped cleanly\n");
  return 0;
}
