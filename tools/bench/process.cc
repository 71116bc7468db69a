#include "tools/bench/process.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"

namespace psdb::bench {

absl::StatusOr<std::unique_ptr<BenchProcess>> BenchProcess::Start(
    const ProcessOptions& options) {
  if (options.argv.empty()) {
    return absl::InvalidArgumentError("BenchProcess: empty argv");
  }
  const std::string log = options.log.empty() ? "/dev/null" : options.log;
  const int log_fd =
      open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (log_fd < 0) return absl::InternalError(absl::StrCat("cannot open ", log));
  int out[2] = {-1, -1};
  const bool wait = !options.ready_text.empty();
  if (wait && pipe2(out, O_CLOEXEC) != 0) {
    close(log_fd);
    return absl::InternalError("pipe");
  }
  std::vector<std::string> args = options.argv;
  std::vector<char*> cargv;
  for (std::string& a : args) cargv.push_back(a.data());
  cargv.push_back(nullptr);
  const pid_t pid = fork();
  if (pid < 0) {
    close(log_fd);
    if (wait) close(out[0]), close(out[1]);
    return absl::InternalError("fork");
  }
  if (pid == 0) {
    for (const auto& [k, v] : options.env) setenv(k.c_str(), v.c_str(), 1);
    dup2(wait ? out[1] : log_fd, STDOUT_FILENO);
    dup2(log_fd, STDERR_FILENO);
    execvp(cargv[0], cargv.data());
    _exit(127);
  }
  close(log_fd);
  std::unique_ptr<BenchProcess> child(new BenchProcess());
  child->pid_ = pid;
  child->name_ = options.argv[0];
  child->log_ = log;
  if (!wait) return child;
  close(out[1]);
  child->stdout_fd_ = out[0];
  std::string buffer;
  const absl::Time deadline = absl::Now() + options.ready_timeout;
  while (absl::Now() < deadline) {
    const size_t pos = buffer.find(options.ready_text);
    if (pos != std::string::npos) {
      const size_t eol = buffer.find('\n', pos);
      if (eol != std::string::npos) {
        child->ready_line_ = buffer.substr(pos, eol - pos);
        return child;
      }
    }
    pollfd pfd{out[0], POLLIN, 0};
    if (poll(&pfd, 1, 1000) <= 0) continue;
    char chunk[1024];
    const ssize_t n = read(out[0], chunk, sizeof(chunk));
    if (n <= 0) break;
    buffer.append(chunk, static_cast<size_t>(n));
  }
  return absl::UnavailableError(absl::StrCat(
      child->name_, " did not print '", options.ready_text, "'; see ", log));
}

BenchProcess::~BenchProcess() {
  if (pid_ > 0 && !exited_) {
    kill(pid_, SIGTERM);
    waitpid(pid_, nullptr, 0);
  }
  if (stdout_fd_ >= 0) close(stdout_fd_);
}

absl::Status BenchProcess::Wait(absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  int status = 0;
  absl::Duration backoff = absl::Milliseconds(1);
  while (true) {
    if (waitpid(pid_, &status, WNOHANG) == pid_) break;
    if (absl::Now() > deadline) {
      return absl::DeadlineExceededError(
          absl::StrCat(name_, " still running; see ", log_));
    }
    absl::SleepFor(backoff);  // a pid has no fd to wait on
    backoff = std::min(backoff * 2, absl::Milliseconds(50));
  }
  exited_ = true;
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0) return absl::OkStatus();
  std::ifstream in(log_);
  std::stringstream ss;
  ss << in.rdbuf();
  std::string tail = ss.str();
  if (tail.size() > 2000) tail = tail.substr(tail.size() - 2000);
  return absl::InternalError(absl::StrCat(name_, " failed (status ", status,
                                          "); ", log_, ":\n", tail));
}

absl::Status BenchProcess::Stop() {
  if (!exited_) kill(pid_, SIGTERM);
  return Wait(absl::Seconds(60));
}

int FreeLoopbackPort() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
  socklen_t len = sizeof(addr);
  getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  close(fd);
  return ntohs(addr.sin_port);
}

}  // namespace psdb::bench
