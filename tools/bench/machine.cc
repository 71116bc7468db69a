#include "tools/bench/machine.h"

#include <unistd.h>

#include <fstream>
#include <string>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"

namespace psdb::bench {
namespace {

// "MemTotal:       24596452 kB" -> bytes.
uint64_t MeminfoBytes(absl::string_view line) {
  std::vector<absl::string_view> parts =
      absl::StrSplit(line, ' ', absl::SkipEmpty());
  uint64_t kib = 0;
  if (parts.size() >= 2 && absl::SimpleAtoi(parts[1], &kib)) return kib * 1024;
  return 0;
}

}  // namespace

MachineInfo DescribeMachine() {
  MachineInfo m;
  m.cores = static_cast<int>(sysconf(_SC_NPROCESSORS_ONLN));
  m.cpu_model = "unknown";
  std::ifstream cpuinfo("/proc/cpuinfo");
  for (std::string line; std::getline(cpuinfo, line);) {
    if (absl::StartsWith(line, "model name")) {
      const size_t colon = line.find(':');
      if (colon != std::string::npos) {
        m.cpu_model = std::string(absl::StripAsciiWhitespace(
            absl::string_view(line).substr(colon + 1)));
      }
      break;
    }
  }
  std::ifstream meminfo("/proc/meminfo");
  for (std::string line; std::getline(meminfo, line);) {
    if (absl::StartsWith(line, "MemTotal:"))
      m.memory_bytes = MeminfoBytes(line);
    if (absl::StartsWith(line, "MemAvailable:")) {
      m.available_bytes = MeminfoBytes(line);
    }
  }
  return m;
}

Json MachineJson(const MachineInfo& machine) {
  return Json{{"cores", machine.cores},
              {"cpu", machine.cpu_model},
              {"memory_bytes", machine.memory_bytes}};
}

}  // namespace psdb::bench
