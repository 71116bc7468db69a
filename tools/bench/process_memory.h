// What a process holds in memory, read from /proc/<pid>/status: for
// ps-bench's peak-RSS lines (the store's and ps-server's memory against
// StoreOptions::memory_budget_bytes, docs/operations/memory.md).
//
// Thread-safety: pure functions (ResetPeakRss changes the calling process's
// VmHWM, which other threads' readings then see).
#ifndef PSDB_TOOLS_BENCH_PROCESS_MEMORY_H_
#define PSDB_TOOLS_BENCH_PROCESS_MEMORY_H_

#include <sys/types.h>

#include <cstdint>

#include "absl/status/statusor.h"

namespace psdb::bench {

struct ProcessMemory {
  uint64_t rss_bytes = 0;       // VmRSS: resident now
  uint64_t peak_rss_bytes = 0;  // VmHWM: the most resident since start (or
                                // since ResetPeakRss)
  uint64_t rss_anon_bytes = 0;  // RssAnon: heap, stacks, anonymous maps
  uint64_t rss_file_bytes = 0;  // RssFile: mapped files (mmap'd SSTs, code)
  int threads = 0;              // Threads
};

// The process `pid`'s figures (0: this process). NotFound if it is gone.
absl::StatusOr<ProcessMemory> ReadProcessMemory(pid_t pid = 0);

// Sets this process's VmHWM back to its VmRSS (Linux: "5" written to
// /proc/self/clear_refs), so that the next peak is that of what runs next.
absl::Status ResetPeakRss();

}  // namespace psdb::bench

#endif  // PSDB_TOOLS_BENCH_PROCESS_MEMORY_H_
