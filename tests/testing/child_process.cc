#include "tests/testing/child_process.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "tests/testing/test_util.h"

extern char** environ;

namespace psdb::testing {

int FreeLoopbackPort() {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
  socklen_t len = sizeof(addr);
  getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  close(fd);
  return ntohs(addr.sin_port);
}
namespace {

std::atomic<int> counter{0};

}  // namespace

absl::StatusOr<std::unique_ptr<ChildProcess>> ChildProcess::Start(
    const ChildOptions& options) {
  std::unique_ptr<ChildProcess> child(new ChildProcess());
  const char* tmp = std::getenv("TEST_TMPDIR");
  child->stderr_path_ =
      absl::StrCat(tmp != nullptr ? tmp : "/tmp", "/psdb-child-", getpid(), "-",
                   counter.fetch_add(1), ".stderr");
  int out[2];
  if (pipe(out) != 0) return absl::InternalError("pipe failed");

  // Build argv and envp before fork (no allocation in the child).
  std::vector<std::string> argv_s = {options.binary};
  argv_s.insert(argv_s.end(), options.args.begin(), options.args.end());
  std::vector<std::string> env_s;
  for (char** e = environ; *e != nullptr; ++e) {
    if (!absl::StartsWith(*e, "PS_")) env_s.emplace_back(*e);
  }
  for (const auto& [k, v] : options.env)
    env_s.push_back(absl::StrCat(k, "=", v));
  std::vector<char*> argv, envp;
  for (std::string& s : argv_s) argv.push_back(s.data());
  argv.push_back(nullptr);
  for (std::string& s : env_s) envp.push_back(s.data());
  envp.push_back(nullptr);
  const int err_fd =
      open(child->stderr_path_.c_str(), O_CREAT | O_TRUNC | O_WRONLY, 0644);
  if (err_fd < 0) return absl::InternalError("cannot create stderr file");

  const pid_t pid = fork();
  if (pid < 0) return absl::InternalError("fork failed");
  if (pid == 0) {
    dup2(out[1], 1);
    dup2(err_fd, 2);
    close(out[0]);
    close(out[1]);
    close(err_fd);
    execve(argv[0], argv.data(), envp.data());
    _exit(127);
  }
  close(out[1]);
  close(err_fd);
  child->pid_ = pid;
  child->stdout_fd_ = out[0];
  if (options.ready_prefix.empty()) return child;

  std::string buffer;
  const absl::Time deadline = absl::Now() + options.timeout;
  while (true) {
    size_t nl;
    while ((nl = buffer.find('\n')) != std::string::npos) {
      const std::string line = buffer.substr(0, nl);
      buffer.erase(0, nl + 1);
      if (absl::StartsWith(line, options.ready_prefix)) {
        child->ready_value_ = line.substr(options.ready_prefix.size());
        return child;
      }
    }
    const absl::Duration left = deadline - absl::Now();
    if (left <= absl::ZeroDuration()) {
      return absl::DeadlineExceededError(absl::StrCat(
          options.binary, " not ready in time; stderr: ", child->Stderr()));
    }
    pollfd pfd{child->stdout_fd_, POLLIN, 0};
    const int ready =
        poll(&pfd, 1, static_cast<int>(absl::ToInt64Milliseconds(left) + 1));
    if (ready <= 0) continue;
    char chunk[4096];
    const ssize_t n = read(child->stdout_fd_, chunk, sizeof(chunk));
    if (n <= 0) {
      (void)child->Wait(absl::Seconds(10));
      return absl::FailedPreconditionError(absl::StrCat(
          options.binary,
          " exited before it was ready; stderr: ", child->Stderr()));
    }
    buffer.append(chunk, static_cast<size_t>(n));
  }
}

ChildProcess::~ChildProcess() {
  if (pid_ > 0 && !exited_) {
    kill(pid_, SIGKILL);
    int status = 0;
    waitpid(pid_, &status, 0);
  }
  if (stdout_fd_ >= 0) close(stdout_fd_);
  if (!stderr_path_.empty()) unlink(stderr_path_.c_str());
}

void ChildProcess::Signal(int signal) {
  if (pid_ > 0 && !exited_) kill(pid_, signal);
}

absl::StatusOr<int> ChildProcess::Wait(absl::Duration timeout) {
  if (exited_) return status_;
  const absl::Time deadline = absl::Now() + timeout;
  absl::Duration backoff = absl::Milliseconds(1);
  while (true) {
    int status = 0;
    const pid_t r = waitpid(pid_, &status, WNOHANG);
    if (r == pid_) {
      exited_ = true;
      status_ = status;
      return status;
    }
    if (absl::Now() >= deadline) {
      return absl::DeadlineExceededError("child did not exit in time");
    }
    absl::SleepFor(backoff);  // polling a pid: there is no fd to wait on
    backoff = std::min(backoff * 2, absl::Milliseconds(50));
  }
}

std::string ChildProcess::Stderr() const {
  std::ifstream in(stderr_path_);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

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

ReservedPort::ReservedPort() {
  fd_ = socket(AF_INET, SOCK_STREAM, 0);
  const int one = 1;
  setsockopt(fd_, SOL_SOCKET, SO_REUSEPORT, &one, sizeof(one));
  setsockopt(fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  if (bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0) {
    socklen_t len = sizeof(addr);
    getsockname(fd_, reinterpret_cast<sockaddr*>(&addr), &len);
    port_ = ntohs(addr.sin_port);
  }
}

ReservedPort::~ReservedPort() {
  if (fd_ >= 0) close(fd_);
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
