#include "tools/bench/process_cpu.h"

#include <time.h>

#include <cerrno>
#include <cstring>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace psdb::bench {

absl::StatusOr<double> ProcessCpuSeconds(pid_t pid) {
  clockid_t clock = CLOCK_PROCESS_CPUTIME_ID;
  if (pid != 0) {
    if (const int err = clock_getcpuclockid(pid, &clock); err != 0) {
      return absl::NotFoundError(
          absl::StrCat("CPU clock of process ", pid, ": ", std::strerror(err)));
    }
  }
  timespec ts;
  if (clock_gettime(clock, &ts) != 0) {
    return absl::NotFoundError(
        absl::StrCat("CPU time of process ", pid, ": ", std::strerror(errno)));
  }
  return static_cast<double>(ts.tv_sec) +
         static_cast<double>(ts.tv_nsec) * 1e-9;
}

}  // namespace psdb::bench
