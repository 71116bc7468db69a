// A description of the machine a benchmark ran on, for ps-bench's report
// and BENCHMARKS.md: cores, CPU model and memory, read from /proc.
//
// Thread-safety: pure functions.
#ifndef PSDB_TOOLS_BENCH_MACHINE_H_
#define PSDB_TOOLS_BENCH_MACHINE_H_

#include <cstdint>
#include <string>

namespace psdb::bench {

struct MachineInfo {
  int cores = 0;                 // online CPUs (nproc)
  std::string cpu_model;         // /proc/cpuinfo "model name", or "unknown"
  uint64_t memory_bytes = 0;     // /proc/meminfo MemTotal
  uint64_t available_bytes = 0;  // /proc/meminfo MemAvailable
};

MachineInfo DescribeMachine();

// Appends `"machine":{"cores":C,"cpu":"...","memory_bytes":M}` to *json,
// the machine block every ps-bench scenario's --json output starts with.
void AppendMachineJson(const MachineInfo& machine, std::string* json);

}  // namespace psdb::bench

#endif  // PSDB_TOOLS_BENCH_MACHINE_H_
