// Status propagation helpers shared by every psdb module.
//
// PSDB_RETURN_IF_ERROR(expr): evaluates an absl::Status expression and returns
// it from the enclosing function when it is not OK.
// PSDB_ASSIGN_OR_RETURN(lhs, expr): evaluates an absl::StatusOr<T> expression;
// returns its status when not OK, otherwise moves the value into `lhs`
// (which may be a declaration, e.g. `auto x`).
//
// Thread-safety: macros only; no state.
#ifndef PSDB_UTIL_STATUS_MACROS_H_
#define PSDB_UTIL_STATUS_MACROS_H_

#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

#define PSDB_RETURN_IF_ERROR(expr)               \
  do {                                           \
    ::absl::Status psdb_status_ = (expr);        \
    if (!psdb_status_.ok()) return psdb_status_; \
  } while (0)

#define PSDB_STATUS_CONCAT_INNER_(a, b) a##b
#define PSDB_STATUS_CONCAT_(a, b) PSDB_STATUS_CONCAT_INNER_(a, b)

#define PSDB_ASSIGN_OR_RETURN(lhs, expr)                                     \
  PSDB_ASSIGN_OR_RETURN_IMPL_(PSDB_STATUS_CONCAT_(psdb_statusor_, __LINE__), \
                              lhs, expr)

#define PSDB_ASSIGN_OR_RETURN_IMPL_(statusor, lhs, expr)   \
  auto statusor = (expr);                                  \
  if (!statusor.ok()) return std::move(statusor).status(); \
  lhs = std::move(statusor).value()

namespace psdb {

// Prepends `context` to the message of a non-OK status, keeping its code.
absl::Status Annotate(const absl::Status& status, absl::string_view context);

}  // namespace psdb

#endif  // PSDB_UTIL_STATUS_MACROS_H_
