// Shared helpers for psdb's GoogleTest suites: status assertions, scratch
// directories that clean up after themselves, and waiting on a condition
// with a deadline (tests never sleep to wait).
//
// Thread-safety: ScratchDir is not shared across threads; WaitFor may be
// called from any thread.
#ifndef PSDB_TESTS_TESTING_TEST_UTIL_H_
#define PSDB_TESTS_TESTING_TEST_UTIL_H_

#include <functional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

#define PSDB_TEST_CONCAT_INNER_(a, b) a##b
#define PSDB_TEST_CONCAT_(a, b) PSDB_TEST_CONCAT_INNER_(a, b)

#define ASSERT_OK(expr)                                             \
  do {                                                              \
    const ::absl::Status psdb_s_ = ::psdb::testing::ToStatus(expr); \
    ASSERT_TRUE(psdb_s_.ok()) << psdb_s_;                           \
  } while (0)
#define EXPECT_OK(expr)                                             \
  do {                                                              \
    const ::absl::Status psdb_s_ = ::psdb::testing::ToStatus(expr); \
    EXPECT_TRUE(psdb_s_.ok()) << psdb_s_;                           \
  } while (0)

#define ASSERT_OK_AND_ASSIGN(lhs, expr) \
  ASSERT_OK_AND_ASSIGN_IMPL_(PSDB_TEST_CONCAT_(psdb_sor_, __LINE__), lhs, expr)
#define ASSERT_OK_AND_ASSIGN_IMPL_(sor, lhs, expr) \
  auto sor = (expr);                               \
  ASSERT_TRUE(sor.ok()) << sor.status();           \
  lhs = std::move(sor).value()

namespace psdb::testing {

inline absl::Status ToStatus(const absl::Status& s) { return s; }
template <typename T>
absl::Status ToStatus(const absl::StatusOr<T>& s) {
  return s.status();
}

}  // namespace psdb::testing

// Matches a status (or StatusOr) with the given code.
MATCHER_P(StatusIs, code, "") {
  const absl::Status s = ::psdb::testing::ToStatus(arg);
  if (s.code() == code) return true;
  *result_listener << "status is " << s;
  return false;
}

namespace psdb::testing {

// A fresh directory under $TEST_TMPDIR (or /tmp), removed with its contents
// when the object goes out of scope.
class ScratchDir {
 public:
  ScratchDir();
  ~ScratchDir();
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;

  const std::string& path() const { return path_; }
  // path() + "/" + name.
  std::string Sub(absl::string_view name) const;

 private:
  std::string path_;
};

// Polls `condition` until it returns true or `timeout` passes; returns
// whether it became true. Polling backs off from 1 ms to 50 ms.
bool WaitFor(const std::function<bool()>& condition,
             absl::Duration timeout = absl::Seconds(30));

// Path of a binary built by this CMake tree (e.g. "tools/ps-server"), from
// the PSDB_BINARY_DIR environment variable CTest sets.
std::string BuiltBinary(absl::string_view relative_path);

}  // namespace psdb::testing

#endif  // PSDB_TESTS_TESTING_TEST_UTIL_H_
