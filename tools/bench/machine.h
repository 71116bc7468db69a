// A description of the machine a benchmark ran on, for ps-bench's report
// and BENCHMARKS.md: cores, CPU model and memory, read from /proc.
//
// Thread-safety: pure functions.
#ifndef PSDB_TOOLS_BENCH_MACHINE_H_
#define PSDB_TOOLS_BENCH_MACHINE_H_

#include <cstdint>
#include <string>

#include "tools/bench/json_writer.h"

namespace psdb::bench {

struct MachineInfo {
  int cores = 0;                 // online CPUs (nproc)
  std::string cpu_model;         // /proc/cpuinfo "model name", or "unknown"
  uint64_t memory_bytes = 0;     // /proc/meminfo MemTotal
  uint64_t available_bytes = 0;  // /proc/meminfo MemAvailable
};

MachineInfo DescribeMachine();

// {"cores":C,"cpu":"...","memory_bytes":M}: the "machine" block every
// ps-bench scenario's --json report starts with (after "scenario").
Json MachineJson(const MachineInfo& machine);

}  // namespace psdb::bench

#endif  // PSDB_TOOLS_BENCH_MACHINE_H_
