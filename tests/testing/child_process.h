// The one way tests run real processes and reserve ports.
//
// ChildProcess: a real psdb binary run by a test (ps-scheduler, ps-server,
// ps-train). Starts it with extra environment variables, reads its stdout
// until a line starting with a given prefix (e.g. "listening on " for
// ps-server, whose rest is the address), keeps its stderr in a file, and
// signals / waits with deadlines. FreeLoopbackPort and ReservedPort give
// ports to processes that must be told theirs before they start; RunShell
// runs a command line.
//
// Thread-safety: one thread per object.
#ifndef PSDB_TESTS_TESTING_CHILD_PROCESS_H_
#define PSDB_TESTS_TESTING_CHILD_PROCESS_H_

#include <sys/types.h>

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace psdb::testing {

// A loopback TCP port that was free a moment ago (bound, read, closed), for
// processes that must be told their port before they start.
int FreeLoopbackPort();

struct ChildOptions {
  std::string binary;
  std::vector<std::string> args;
  // Set in the child's environment (in addition to the test's). Any PS_*
  // variable of the test's own environment is removed first.
  std::map<std::string, std::string> env;
  // Start() returns once stdout shows a line starting with this; the rest
  // of that line is ready_value(). Empty = return at once.
  std::string ready_prefix;
  absl::Duration timeout = absl::Seconds(60);
};

class ChildProcess {
 public:
  // FailedPrecondition (with the stderr tail) if the child exits before it
  // is ready; DeadlineExceeded after options.timeout.
  static absl::StatusOr<std::unique_ptr<ChildProcess>> Start(
      const ChildOptions& options);
  ~ChildProcess();  // SIGKILL and reap if still running.
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;

  const std::string& ready_value() const { return ready_value_; }
  pid_t pid() const { return pid_; }
  void Signal(int signal);
  // The wait status (as waitpid), or DeadlineExceeded.
  absl::StatusOr<int> Wait(absl::Duration timeout = absl::Seconds(60));
  // Everything written to stderr so far.
  std::string Stderr() const;

 private:
  ChildProcess() = default;
  pid_t pid_ = -1;
  bool exited_ = false;
  int status_ = 0;
  int stdout_fd_ = -1;
  std::string stderr_path_;
  std::string ready_value_;
};

// A ps-scheduler on loopback `port` for a cluster of `servers` servers and
// `workers` workers, heartbeats every 200 ms; ready_value() is its address.
// Callers may add to args and env before starting it.
ChildOptions PsSchedulerOptions(int port, int servers, int workers);

// A ps-server that joins the scheduler on loopback `sched_port` as
// `node_id`, its store in `data_dir`, 2 handler threads, then `extra_args`;
// ready_value() is its address.
ChildOptions ClusterServerOptions(int sched_port, const std::string& node_id,
                                  const std::string& data_dir,
                                  std::vector<std::string> extra_args = {});

// The built tools/ps-server with `args`, ready once it prints "listening on
// HOST:PORT": ready_value() is then its address.
absl::StatusOr<std::unique_ptr<ChildProcess>> StartPsServer(
    std::vector<std::string> args, absl::Duration timeout = absl::Seconds(60));

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

// Runs a command line through /bin/sh; returns its exit code and output:
// stdout, and stderr too unless `merge_stderr` is false (then stderr goes
// where the test's goes).
struct ShellResult {
  int exit_code = -1;
  std::string output;
};
ShellResult RunShell(const std::string& command, bool merge_stderr = true);

}  // namespace psdb::testing

#endif  // PSDB_TESTS_TESTING_CHILD_PROCESS_H_
