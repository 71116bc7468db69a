#include "tests/testing/test_util.h"

#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"

namespace psdb::testing {

ScratchDir::ScratchDir() {
  const char* base = std::getenv("TEST_TMPDIR");
  std::string tmpl =
      absl::StrCat(base != nullptr ? base : "/tmp", "/psdb-test-XXXXXX");
  char* made = mkdtemp(tmpl.data());
  if (made == nullptr) {
    ADD_FAILURE() << "mkdtemp failed for " << tmpl;
  }
  path_ = tmpl;
}

ScratchDir::~ScratchDir() {
  std::error_code ec;
  std::filesystem::remove_all(path_, ec);
}

std::string ScratchDir::Sub(absl::string_view name) const {
  return absl::StrCat(path_, "/", name);
}

bool WaitFor(const std::function<bool()>& condition, absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  absl::Duration backoff = absl::Milliseconds(1);
  while (true) {
    if (condition()) return true;
    if (absl::Now() >= deadline) return false;
    absl::SleepFor(backoff);
    backoff = std::min(backoff * 2, absl::Milliseconds(50));
  }
}

std::string BuiltBinary(absl::string_view relative_path) {
  const char* dir = std::getenv("PSDB_BINARY_DIR");
  return absl::StrCat(dir != nullptr ? dir : ".", "/", relative_path);
}

}  // namespace psdb::testing
