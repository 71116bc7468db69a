// BenchProcess: a child process a benchmark scenario runs (ps-server,
// redis-server, ps-scheduler, ps-train): its argv, extra environment
// variables, its output in a log file, optionally a wait until its stdout
// shows a readiness line, and SIGTERM and reaping when it is destroyed.
// FreeLoopbackPort gives a port to a process that must be told its port.
//
// Thread-safety: one thread per object.
#ifndef PSDB_TOOLS_BENCH_PROCESS_H_
#define PSDB_TOOLS_BENCH_PROCESS_H_

#include <sys/types.h>

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace psdb::bench {

struct ProcessOptions {
  // The program (a path, or a name looked up on PATH) and its arguments.
  // REQUIRED: non-empty.
  std::vector<std::string> argv;
  // Set in the child's environment, on top of this process's. Default: {}
  std::map<std::string, std::string> env;
  // File that receives the child's stderr, and its stdout unless
  // ready_text is set (then stdout is read by Start). Empty = /dev/null.
  // Default: ""
  std::string log;
  // Start returns once a stdout line contains this text (ready_line() is
  // that line from the text on), or fails after ready_timeout. Empty = return
  // at once. Default: ""
  std::string ready_text;
  absl::Duration ready_timeout = absl::Seconds(60);
};

class BenchProcess {
 public:
  static absl::StatusOr<std::unique_ptr<BenchProcess>> Start(
      const ProcessOptions& options);
  ~BenchProcess();  // SIGTERM and reap if still running.
  BenchProcess(const BenchProcess&) = delete;
  BenchProcess& operator=(const BenchProcess&) = delete;

  // The stdout line that contained ready_text, from that text on ("" without
  // one), e.g. "listening on 127.0.0.1:7000".
  const std::string& ready_line() const { return ready_line_; }
  // Waits for the child to exit: OK if it exited 0, otherwise an error with
  // the tail of its log; DeadlineExceeded after `timeout`.
  absl::Status Wait(absl::Duration timeout);
  // SIGTERM, then Wait(60 s).
  absl::Status Stop();

 private:
  BenchProcess() = default;
  pid_t pid_ = -1;
  bool exited_ = false;
  int stdout_fd_ = -1;
  std::string name_;
  std::string log_;
  std::string ready_line_;
};

// A loopback TCP port that was free a moment ago (bound, read, closed).
int FreeLoopbackPort();

}  // namespace psdb::bench

#endif  // PSDB_TOOLS_BENCH_PROCESS_H_
