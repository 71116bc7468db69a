#include "rpc/control/rendezvous.h"

#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "util/status_macros.h"

namespace psdb::rpc {

absl::Status ValidateRendezvousKey(absl::string_view key) {
  if (key.empty() || key.size() > kMaxRendezvousKeyBytes) {
    return absl::InvalidArgumentError(absl::StrCat("rendezvous key must be 1..",
                                                   kMaxRendezvousKeyBytes,
                                                   " bytes, got ", key.size()));
  }
  for (char c : key) {
    if (!absl::ascii_isalnum(static_cast<unsigned char>(c)) && c != '_' &&
        c != '.' && c != ':' && c != '/' && c != '-') {
      return absl::InvalidArgumentError(
          absl::StrCat("rendezvous key '", absl::CHexEscape(key),
                       "' has a character outside [A-Za-z0-9_.:/-]"));
    }
  }
  for (absl::string_view segment : absl::StrSplit(key, '/')) {
    if (segment.empty() || segment == "." || segment == "..") {
      return absl::InvalidArgumentError(absl::StrCat(
          "rendezvous key '", key, "' has an empty, '.' or '..' path segment"));
    }
  }
  return absl::OkStatus();
}

absl::Status ValidateRendezvousSet(absl::string_view key,
                                   absl::string_view value) {
  PSDB_RETURN_IF_ERROR(ValidateRendezvousKey(key));
  if (value.size() > kMaxRendezvousValueBytes) {
    return absl::InvalidArgumentError(absl::StrCat(
        "rendezvous value of key '", key, "' has ", value.size(),
        " bytes, more than the ", kMaxRendezvousValueBytes, " allowed"));
  }
  return absl::OkStatus();
}

absl::Status ValidateRendezvousGet(absl::Span<const std::string> keys) {
  if (keys.empty() || keys.size() > kMaxRendezvousGetKeys) {
    return absl::InvalidArgumentError(absl::StrCat("rendezvous get needs 1..",
                                                   kMaxRendezvousGetKeys,
                                                   " keys, got ", keys.size()));
  }
  for (const std::string& key : keys) {
    PSDB_RETURN_IF_ERROR(ValidateRendezvousKey(key));
  }
  return absl::OkStatus();
}

absl::Status RendezvousTimeout(absl::Span<const std::string> missing) {
  return absl::DeadlineExceededError(
      absl::StrCat("rendezvous: timed out waiting for key(s) ",
                   absl::StrJoin(missing, ", ")));
}

absl::Status MemoryRendezvous::Set(absl::string_view key,
                                   absl::string_view value) {
  PSDB_RETURN_IF_ERROR(ValidateRendezvousSet(key, value));
  absl::MutexLock lock(&mu_);
  if (closed_) return absl::UnavailableError("scheduler is shutting down");
  auto it = entries_.find(key);
  if (it != entries_.end()) {
    if (it->second == value) return absl::OkStatus();
    return absl::AlreadyExistsError(
        absl::StrCat("rendezvous key '", key,
                     "' already holds another value (keys are written once; "
                     "scope them by job and attempt)"));
  }
  if (entries_.size() >= kMaxRendezvousEntries) {
    return absl::ResourceExhaustedError(
        absl::StrCat("rendezvous: the scheduler already holds ",
                     kMaxRendezvousEntries, " keys; '", key, "' refused"));
  }
  entries_.emplace(key, value);
  return absl::OkStatus();
}

absl::StatusOr<std::vector<std::string>> MemoryRendezvous::Get(
    absl::Span<const std::string> keys, absl::Time deadline) {
  PSDB_RETURN_IF_ERROR(ValidateRendezvousGet(keys));
  absl::MutexLock lock(&mu_);
  auto all_present = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (closed_) return true;
    for (const std::string& key : keys) {
      if (!entries_.contains(key)) return false;
    }
    return true;
  };
  mu_.AwaitWithDeadline(absl::Condition(&all_present), deadline);
  if (closed_) return absl::UnavailableError("scheduler is shutting down");
  std::vector<std::string> values, missing;
  for (const std::string& key : keys) {
    auto it = entries_.find(key);
    if (it == entries_.end()) {
      missing.push_back(key);
    } else {
      values.push_back(it->second);
    }
  }
  if (!missing.empty()) return RendezvousTimeout(missing);
  return values;
}

void MemoryRendezvous::Close() {
  absl::MutexLock lock(&mu_);
  closed_ = true;
}

}  // namespace psdb::rpc
