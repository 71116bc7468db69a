#include "tests/rpc/server_process.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "tests/testing/test_util.h"

namespace psdb::testing {

absl::StatusOr<std::unique_ptr<ServerProcess>> ServerProcess::Start(
    const std::string& binary, const std::vector<std::string>& args,
    absl::Duration timeout) {
  static int counter = 0;
  std::unique_ptr<ServerProcess> p(new ServerProcess());
  p->stderr_path_ = absl::StrCat(::testing::TempDir(), "/ps-server-", getpid(),
                                 "-", counter++, ".stderr");
  int out[2];
  if (pipe2(out, O_CLOEXEC) != 0) return absl::InternalError("pipe failed");
  std::vector<std::string> argv_s = {binary};
  argv_s.insert(argv_s.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (std::string& a : argv_s) argv.push_back(a.data());
  argv.push_back(nullptr);
  const pid_t pid = fork();
  if (pid < 0) return absl::InternalError("fork failed");
  if (pid == 0) {
    dup2(out[1], STDOUT_FILENO);
    const int err =
        open(p->stderr_path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (err >= 0) dup2(err, STDERR_FILENO);
    // The child must not inherit a blocked SIGTERM from gtest threads.
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, nullptr);
    execv(binary.c_str(), argv.data());
    _exit(127);
  }
  close(out[1]);
  p->pid_ = pid;
  p->stdout_fd_ = out[0];

  std::string buffer;
  const absl::Time deadline = absl::Now() + timeout;
  while (true) {
    const size_t pos = buffer.find("listening on ");
    if (pos != std::string::npos) {
      const size_t eol = buffer.find('\n', pos);
      if (eol != std::string::npos) {
        p->address_ = buffer.substr(pos + 13, eol - pos - 13);
        const size_t colon = p->address_.rfind(':');
        if (colon == std::string::npos ||
            !absl::SimpleAtoi(p->address_.substr(colon + 1), &p->port_)) {
          return absl::InternalError(
              absl::StrCat("unparsable address '", p->address_, "'"));
        }
        return p;
      }
    }
    const int64_t left_ms = absl::ToInt64Milliseconds(deadline - absl::Now());
    if (left_ms <= 0) {
      return absl::DeadlineExceededError(absl::StrCat(
          "ps-server did not start in time; stderr: ", p->Stderr()));
    }
    pollfd pfd{p->stdout_fd_, POLLIN, 0};
    if (poll(&pfd, 1, static_cast<int>(left_ms)) <= 0) continue;
    char chunk[4096];
    const ssize_t n = read(p->stdout_fd_, chunk, sizeof(chunk));
    if (n <= 0) {
      int status = 0;
      waitpid(p->pid_, &status, 0);
      p->exited_ = true;
      return absl::FailedPreconditionError(
          absl::StrCat("ps-server exited (status ", status,
                       ") before listening; stderr: ", p->Stderr()));
    }
    buffer.append(chunk, static_cast<size_t>(n));
  }
}

ServerProcess::~ServerProcess() {
  if (!exited_ && pid_ > 0) {
    kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
  }
  if (stdout_fd_ >= 0) close(stdout_fd_);
  if (!stderr_path_.empty()) unlink(stderr_path_.c_str());
}

void ServerProcess::Signal(int signal) {
  if (!exited_) kill(pid_, signal);
}

absl::StatusOr<int> ServerProcess::Wait(absl::Duration timeout) {
  int status = 0;
  const bool done = WaitFor(
      [&] {
        const pid_t r = waitpid(pid_, &status, WNOHANG);
        return r == pid_;
      },
      timeout);
  if (!done) return absl::DeadlineExceededError("ps-server did not exit");
  exited_ = true;
  return status;
}

std::string ServerProcess::Stderr() const {
  std::ifstream in(stderr_path_);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
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

ShellResult RunShell(const std::string& command) {
  ShellResult result;
  FILE* f = popen((command + " 2>&1").c_str(), "r");
  if (f == nullptr) return result;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof(buf), f)) > 0) result.output.append(buf, n);
  const int status = pclose(f);
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return result;
}

}  // namespace psdb::testing
