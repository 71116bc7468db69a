// BenchDir: the scratch directory a ps-bench scenario writes into: the
// --dir the user gave (created if missing, kept afterwards), or a fresh
// $TMPDIR/ps-bench-<scenario>-XXXXXX (/tmp without TMPDIR) that is removed
// with its contents when the BenchDir is destroyed.
//
// Thread-safety: not thread-safe; one owner.
#ifndef PSDB_TOOLS_BENCH_BENCH_DIR_H_
#define PSDB_TOOLS_BENCH_BENCH_DIR_H_

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace psdb::bench {

class BenchDir {
 public:
  // `given` empty: a fresh temporary directory named after `scenario`.
  // Internal error naming the path if it cannot be made.
  static absl::StatusOr<BenchDir> Make(const std::string& given,
                                       absl::string_view scenario);
  BenchDir(BenchDir&& other) noexcept;
  BenchDir& operator=(BenchDir&&) = delete;
  BenchDir(const BenchDir&) = delete;
  BenchDir& operator=(const BenchDir&) = delete;
  ~BenchDir();

  const std::string& path() const { return path_; }

 private:
  BenchDir(std::string path, bool remove)
      : path_(std::move(path)), remove_(remove) {}
  std::string path_;
  bool remove_ = false;  // a temporary directory of ours
};

}  // namespace psdb::bench

#endif  // PSDB_TOOLS_BENCH_BENCH_DIR_H_
