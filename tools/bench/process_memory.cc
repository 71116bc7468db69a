#include "tools/bench/process_memory.h"

#include <fstream>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace psdb::bench {

absl::StatusOr<ProcessMemory> ReadProcessMemory(pid_t pid) {
  const std::string path =
      pid == 0 ? "/proc/self/status" : absl::StrCat("/proc/", pid, "/status");
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot read ", path));
  ProcessMemory m;
  std::string line;
  while (std::getline(in, line)) {
    // "VmHWM:\t  123456 kB"
    const std::vector<absl::string_view> kv =
        absl::StrSplit(line, absl::MaxSplits(':', 1));
    if (kv.size() != 2) continue;
    absl::string_view v = absl::StripAsciiWhitespace(kv[1]);
    const bool kb = absl::ConsumeSuffix(&v, " kB");
    uint64_t n = 0;
    if (!absl::SimpleAtoi(v, &n)) continue;
    if (kb) n <<= 10;
    if (kv[0] == "VmRSS") m.rss_bytes = n;
    if (kv[0] == "VmHWM") m.peak_rss_bytes = n;
    if (kv[0] == "RssAnon") m.rss_anon_bytes = n;
    if (kv[0] == "RssFile") m.rss_file_bytes = n;
    if (kv[0] == "Threads") m.threads = static_cast<int>(n);
  }
  return m;
}

absl::Status ResetPeakRss() {
  std::ofstream out("/proc/self/clear_refs");
  out << "5";
  out.flush();
  if (!out) {
    return absl::UnavailableError("cannot write 5 to /proc/self/clear_refs");
  }
  return absl::OkStatus();
}

}  // namespace psdb::bench
