#include "tests/testing/child_process.h"

#include <sys/wait.h>

#include <cstdio>
#include <utility>

#include "absl/strings/str_cat.h"
#include "tests/testing/test_util.h"

namespace psdb::testing {

ChildOptions PsSchedulerOptions(int port, int servers, int workers) {
  ChildOptions options;
  options.binary = BuiltBinary("tools/ps-scheduler");
  options.env = {{"PS_SERVER_NUM", absl::StrCat(servers)},
                 {"PS_WORKER_NUM", absl::StrCat(workers)},
                 {"PS_SCHED_PORT", absl::StrCat(port)}};
  options.args = {"--heartbeat_interval_ms=200"};
  options.ready_prefix = "scheduler listening on ";
  return options;
}

ChildOptions ClusterServerOptions(int sched_port, const std::string& node_id,
                                  const std::string& data_dir,
                                  std::vector<std::string> extra_args) {
  ChildOptions options;
  options.binary = BuiltBinary("tools/ps-server");
  options.env = {{"PS_SCHED_HOST", "127.0.0.1"},
                 {"PS_SCHED_PORT", absl::StrCat(sched_port)},
                 {"PS_NODE_ID", node_id}};
  options.args = {absl::StrCat("--data_dir=", data_dir), "--threads=2"};
  options.args.insert(options.args.end(), extra_args.begin(), extra_args.end());
  options.ready_prefix = "listening on ";
  return options;
}

absl::StatusOr<std::unique_ptr<ChildProcess>> StartPsServer(
    std::vector<std::string> args, absl::Duration timeout) {
  ChildOptions options;
  options.binary = BuiltBinary("tools/ps-server");
  options.args = std::move(args);
  options.ready_prefix = "listening on ";
  options.timeout = timeout;
  return ChildProcess::Start(options);
}

ShellResult RunShell(const std::string& command, bool merge_stderr) {
  ShellResult result;
  FILE* f = popen((merge_stderr ? command + " 2>&1" : command).c_str(), "r");
  if (f == nullptr) return result;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof(buf), f)) > 0) result.output.append(buf, n);
  const int status = pclose(f);
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return result;
}

}  // namespace psdb::testing
