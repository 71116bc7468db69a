// CPU time a process has used, for ps-bench figures that hold on a shared
// machine: with every core busy, a phase's wall time follows its CPU time
// over the share of the cores it got, and the CPU time is what the code
// costs (docs/benchmarks/migrate.md).
//
// Thread-safety: pure functions.
#ifndef PSDB_TOOLS_BENCH_PROCESS_CPU_H_
#define PSDB_TOOLS_BENCH_PROCESS_CPU_H_

#include <sys/types.h>

#include "absl/status/statusor.h"

namespace psdb::bench {

// CPU seconds (user + system) used so far by process `pid`, all of its
// threads, those that have exited included (clock_getcpuclockid); 0: this
// process. NotFound if there is no such process.
absl::StatusOr<double> ProcessCpuSeconds(pid_t pid = 0);

}  // namespace psdb::bench

#endif  // PSDB_TOOLS_BENCH_PROCESS_CPU_H_
