#include "tools/common/sibling_binary.h"

#include <unistd.h>

#include <filesystem>
#include <system_error>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace psdb::tools {

absl::StatusOr<std::string> SiblingBinary(absl::string_view name,
                                          absl::string_view dir) {
  namespace fs = std::filesystem;
  std::string beside;  // the running program, when `dir` is its directory
  fs::path where{std::string(dir)};
  if (dir.empty()) {
    std::error_code ec;
    const fs::path self = fs::read_symlink("/proc/self/exe", ec);
    if (ec) {
      return absl::InternalError(
          absl::StrCat("cannot read /proc/self/exe to find ", name,
                       " beside this program: ", ec.message()));
    }
    where = self.parent_path();
    beside = absl::StrCat(" (beside ", self.string(), ")");
  }
  const std::string path = (where / std::string(name)).string();
  std::error_code ec;
  if (!fs::is_regular_file(path, ec) || access(path.c_str(), X_OK) != 0) {
    return absl::NotFoundError(
        absl::StrCat(name, " not found: no executable file ", path, beside));
  }
  return path;
}

}  // namespace psdb::tools
