// How tests run real processes: ChildProcess is tools/common/
// child_process.h's (the one launcher, shared with ps-bench) and
// ReservedPort, a port held for a server told it before it starts,
// tools/common/reserved_port.h's; here are the test-side builders for
// psdb's binaries and RunShell for command lines.
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
#include "tools/common/child_process.h"
#include "tools/common/reserved_port.h"

namespace psdb::testing {

using ::psdb::tools::ChildOptions;
using ::psdb::tools::ChildProcess;
using ::psdb::tools::ReservedPort;

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
