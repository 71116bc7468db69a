// ServerProcess: a real ps-server child process for tests. Starts the built
// binary with the given flags, reads its stdout until "listening on
// HOST:PORT" (with a deadline), and stops it with the signal a test asks for.
//
// Thread-safety: one thread per object.
#ifndef PSDB_TESTS_RPC_SERVER_PROCESS_H_
#define PSDB_TESTS_RPC_SERVER_PROCESS_H_

#include <sys/types.h>

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace psdb::testing {

class ServerProcess {
 public:
  // Runs `binary` with `args` (flags only, no argv[0]); waits until it
  // prints "listening on ..." or exits (FailedPrecondition with its stderr
  // tail) or `timeout` passes (DeadlineExceeded).
  static absl::StatusOr<std::unique_ptr<ServerProcess>> Start(
      const std::string& binary, const std::vector<std::string>& args,
      absl::Duration timeout = absl::Seconds(60));
  ~ServerProcess();  // SIGKILL if still running.
  ServerProcess(const ServerProcess&) = delete;
  ServerProcess& operator=(const ServerProcess&) = delete;

  // "HOST:PORT" as printed.
  const std::string& address() const { return address_; }
  int port() const { return port_; }
  pid_t pid() const { return pid_; }

  // Sends `signal`; does not wait.
  void Signal(int signal);
  // Waits for the process to exit; returns its wait status (as waitpid),
  // or DeadlineExceeded.
  absl::StatusOr<int> Wait(absl::Duration timeout = absl::Seconds(60));
  // Everything the process wrote to stderr so far (stderr goes to a file).
  std::string Stderr() const;

 private:
  ServerProcess() = default;
  pid_t pid_ = -1;
  bool exited_ = false;
  int stdout_fd_ = -1;
  std::string stderr_path_;
  std::string address_;
  int port_ = 0;
};

// A loopback port held open (bound with SO_REUSEPORT, not listening) so no
// one else takes it while a cluster's server list is built before the
// servers start; gRPC servers bind it too (they set SO_REUSEPORT).
class ReservedPort {
 public:
  ReservedPort();
  ~ReservedPort();
  ReservedPort(const ReservedPort&) = delete;
  ReservedPort& operator=(const ReservedPort&) = delete;
  int port() const { return port_; }

 private:
  int fd_ = -1;
  int port_ = 0;
};

// Runs a command line through /bin/sh; returns its exit code and output.
struct ShellResult {
  int exit_code = -1;
  std::string output;  // stdout and stderr
};
ShellResult RunShell(const std::string& command);

}  // namespace psdb::testing

#endif  // PSDB_TESTS_RPC_SERVER_PROCESS_H_
