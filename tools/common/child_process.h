// ChildProcess: psdb's one way to run another program and watch it — the
// binaries tests start (ps-scheduler, ps-server, ps-train) and the servers
// ps-bench measures (ps-server, redis-server). It starts the program with
// extra environment variables, reads its stdout until a line starting with
// a given prefix (e.g. "listening on " for ps-server, whose rest is the
// address), keeps its stderr in a log file, and signals and waits with
// deadlines. A process that must be told its port before it starts gets a
// ReservedPort (reserved_port.h).
//
// The child sees this process's environment without its PS_* variables
// (the psdb launch settings; a child gets exactly those in `env`).
//
// Thread-safety: one thread per object.
#ifndef PSDB_TOOLS_COMMON_CHILD_PROCESS_H_
#define PSDB_TOOLS_COMMON_CHILD_PROCESS_H_

#include <signal.h>
#include <sys/types.h>

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace psdb::tools {

struct ChildOptions {
  // Path of the program. REQUIRED.
  std::string binary;
  // Its arguments (argv[1..]). Default: {}
  std::vector<std::string> args;
  // Set in the child's environment. Default: {}
  std::map<std::string, std::string> env;
  // Start() returns once stdout shows a line starting with this; the rest
  // of that line is ready_value(). Empty = return at once. Default: ""
  std::string ready_prefix;
  // How long Start() waits for ready_prefix. Default: 60 s
  absl::Duration timeout = absl::Seconds(60);
  // File for the child's stderr, and its stdout after the ready line (all
  // of it without ready_prefix); kept. Empty = a temporary file, removed
  // with the object. Default: ""
  std::string log;
  // Sent by the destructor to a child still running, which is then reaped.
  // Default: SIGKILL
  int destroy_signal = SIGKILL;
};

class ChildProcess {
 public:
  // FailedPrecondition (with the log's tail) if the child exits before it
  // is ready; DeadlineExceeded after options.timeout.
  static absl::StatusOr<std::unique_ptr<ChildProcess>> Start(
      const ChildOptions& options);
  ~ChildProcess();
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;

  const std::string& ready_value() const { return ready_value_; }
  pid_t pid() const { return pid_; }
  void Signal(int signal);
  // The wait status (as waitpid), or DeadlineExceeded.
  absl::StatusOr<int> Wait(absl::Duration timeout = absl::Seconds(60));
  // Waits; OK if the child exited with status 0, otherwise an error naming
  // the binary with the tail of its log.
  absl::Status WaitForSuccess(absl::Duration timeout);
  // SIGTERM, then WaitForSuccess(timeout).
  absl::Status Stop(absl::Duration timeout = absl::Seconds(60));
  // Everything the child wrote to its log (stderr) so far.
  std::string Stderr() const;

 private:
  ChildProcess() = default;
  std::string binary_;
  pid_t pid_ = -1;
  bool exited_ = false;
  int status_ = 0;
  int stdout_fd_ = -1;
  std::string log_path_;
  bool remove_log_ = false;
  int destroy_signal_ = SIGKILL;
  std::string ready_value_;
};

}  // namespace psdb::tools

#endif  // PSDB_TOOLS_COMMON_CHILD_PROCESS_H_
