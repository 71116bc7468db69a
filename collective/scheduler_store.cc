#include "collective/scheduler_store.h"

#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gloo/common/error.h"

namespace psdb::collective {
namespace {

[[noreturn]] void Throw(const absl::Status& status) {
  throw gloo::IoException(std::string(status.ToString()));
}

}  // namespace

SchedulerStore::SchedulerStore(rpc::SchedulerClient* scheduler,
                               std::string scope, absl::Duration timeout)
    : scheduler_(scheduler), scope_(std::move(scope)), timeout_(timeout) {
  if (!absl::EndsWith(scope_, "/")) scope_ += '/';
}

std::vector<std::string> SchedulerStore::Scoped(
    const std::vector<std::string>& keys) const {
  std::vector<std::string> scoped;
  scoped.reserve(keys.size());
  for (const std::string& key : keys) scoped.push_back(scope_ + key);
  return scoped;
}

void SchedulerStore::set(const std::string& key,
                         const std::vector<char>& data) {
  absl::Status s = scheduler_->RendezvousSet(
      scope_ + key, absl::string_view(data.data(), data.size()));
  if (!s.ok()) Throw(s);
}

std::vector<char> SchedulerStore::get(const std::string& key) {
  absl::StatusOr<std::vector<std::string>> values =
      scheduler_->RendezvousGet({scope_ + key}, timeout_);
  if (!values.ok()) Throw(values.status());
  const std::string& v = values->front();
  return std::vector<char>(v.begin(), v.end());
}

void SchedulerStore::wait(const std::vector<std::string>& keys) {
  absl::StatusOr<std::vector<std::string>> values =
      scheduler_->RendezvousGet(Scoped(keys), timeout_);
  if (!values.ok()) Throw(values.status());
}

void SchedulerStore::wait(const std::vector<std::string>& keys,
                          const std::chrono::milliseconds& timeout) {
  absl::StatusOr<std::vector<std::string>> values =
      scheduler_->RendezvousGet(Scoped(keys), absl::FromChrono(timeout));
  if (!values.ok()) Throw(values.status());
}

}  // namespace psdb::collective
