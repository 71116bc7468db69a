#include "tools/bench/bench_dir.h"

#include <stdlib.h>

#include <cstdlib>
#include <filesystem>
#include <system_error>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace psdb::bench {

absl::StatusOr<BenchDir> BenchDir::Make(const std::string& given,
                                        absl::string_view scenario) {
  if (!given.empty()) {
    std::error_code ec;
    std::filesystem::create_directories(given, ec);
    if (ec) {
      return absl::InternalError(
          absl::StrCat("cannot create ", given, ": ", ec.message()));
    }
    return BenchDir(given, /*remove=*/false);
  }
  const char* base = std::getenv("TMPDIR");
  std::string tmpl = absl::StrCat(base != nullptr ? base : "/tmp", "/ps-bench-",
                                  scenario, "-XXXXXX");
  if (mkdtemp(tmpl.data()) == nullptr) {
    return absl::InternalError(absl::StrCat("mkdtemp ", tmpl, " failed"));
  }
  return BenchDir(std::move(tmpl), /*remove=*/true);
}

BenchDir::BenchDir(BenchDir&& other) noexcept
    : path_(std::move(other.path_)), remove_(other.remove_) {
  other.remove_ = false;
}

BenchDir::~BenchDir() {
  if (!remove_) return;
  std::error_code ec;
  std::filesystem::remove_all(path_, ec);
}

}  // namespace psdb::bench
