#include "tools/common/child_process.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"

extern char** environ;

namespace psdb::tools {
namespace {

std::atomic<int> counter{0};

}  // namespace

absl::StatusOr<std::unique_ptr<ChildProcess>> ChildProcess::Start(
    const ChildOptions& options) {
  std::unique_ptr<ChildProcess> child(new ChildProcess());
  child->binary_ = options.binary;
  child->destroy_signal_ = options.destroy_signal;
  child->log_path_ = options.log;
  if (child->log_path_.empty()) {
    const char* tmp = std::getenv("TEST_TMPDIR");
    child->log_path_ =
        absl::StrCat(tmp != nullptr ? tmp : "/tmp", "/psdb-child-", getpid(),
                     "-", counter.fetch_add(1), ".log");
    child->remove_log_ = true;
  }
  const bool wait = !options.ready_prefix.empty();
  int out[2] = {-1, -1};
  if (wait && pipe2(out, O_CLOEXEC) != 0) {
    return absl::InternalError("pipe failed");
  }

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
  const int log_fd = open(child->log_path_.c_str(),
                          O_CREAT | O_TRUNC | O_WRONLY | O_CLOEXEC, 0644);
  if (log_fd < 0) {
    if (wait) close(out[0]), close(out[1]);
    return absl::InternalError(
        absl::StrCat("cannot create ", child->log_path_));
  }

  const pid_t pid = fork();
  if (pid < 0) {
    close(log_fd);
    if (wait) close(out[0]), close(out[1]);
    return absl::InternalError("fork failed");
  }
  if (pid == 0) {
    dup2(wait ? out[1] : log_fd, STDOUT_FILENO);
    dup2(log_fd, STDERR_FILENO);
    // execvpe: a binary without a '/' is looked up on PATH (redis-server).
    execvpe(argv[0], argv.data(), envp.data());
    _exit(127);
  }
  close(log_fd);
  child->pid_ = pid;
  if (!wait) return child;
  close(out[1]);
  child->stdout_fd_ = out[0];

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
    kill(pid_, destroy_signal_);
    int status = 0;
    waitpid(pid_, &status, 0);
  }
  if (stdout_fd_ >= 0) close(stdout_fd_);
  if (remove_log_) unlink(log_path_.c_str());
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

absl::Status ChildProcess::WaitForSuccess(absl::Duration timeout) {
  absl::StatusOr<int> status = Wait(timeout);
  if (!status.ok()) {
    return absl::DeadlineExceededError(
        absl::StrCat(binary_, " still running; see ", log_path_));
  }
  if (WIFEXITED(*status) && WEXITSTATUS(*status) == 0) return absl::OkStatus();
  std::string tail = Stderr();
  if (tail.size() > 2000) tail = tail.substr(tail.size() - 2000);
  return absl::InternalError(absl::StrCat(binary_, " failed (status ", *status,
                                          "); ", log_path_, ":\n", tail));
}

absl::Status ChildProcess::Stop(absl::Duration timeout) {
  Signal(SIGTERM);
  return WaitForSuccess(timeout);
}

std::string ChildProcess::Stderr() const {
  std::ifstream in(log_path_);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace psdb::tools
