#include "tools/common/local_etcd.h"

#include <signal.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace psdb::tools {

absl::StatusOr<std::unique_ptr<LocalEtcd>> LocalEtcd::Start(
    const LocalEtcdOptions& options) {
  if (options.dir.empty() || options.members < 1) {
    return absl::InvalidArgumentError(
        "LocalEtcd needs a directory and at least one member");
  }
  std::unique_ptr<LocalEtcd> etcd(new LocalEtcd());
  std::vector<std::string> peers;
  std::vector<std::string> initial;
  auto hold = [&etcd]() -> absl::StatusOr<int> {
    etcd->ports_.push_back(std::make_unique<ReservedPort>());
    if (etcd->ports_.back()->port() == 0) {
      return absl::UnavailableError("LocalEtcd: no free loopback port");
    }
    return etcd->ports_.back()->port();
  };
  for (int i = 0; i < options.members; ++i) {
    absl::StatusOr<int> client = hold();
    if (!client.ok()) return client.status();
    absl::StatusOr<int> peer = hold();
    if (!peer.ok()) return peer.status();
    etcd->clients_.push_back(absl::StrCat("127.0.0.1:", *client));
    peers.push_back(absl::StrCat("http://127.0.0.1:", *peer));
    initial.push_back(absl::StrCat("m", i, "=", peers.back()));
  }
  for (int i = 0; i < options.members; ++i) {
    ChildOptions child;
    child.binary = options.binary;
    const std::string client = absl::StrCat("http://", etcd->clients_[i]);
    child.args = {
        absl::StrCat("--name=m", i),
        absl::StrCat("--data-dir=", options.dir, "/m", i),
        absl::StrCat("--listen-client-urls=", client),
        absl::StrCat("--advertise-client-urls=", client),
        absl::StrCat("--listen-peer-urls=", peers[i]),
        absl::StrCat("--initial-advertise-peer-urls=", peers[i]),
        absl::StrCat("--initial-cluster=", absl::StrJoin(initial, ",")),
        "--initial-cluster-state=new",
        absl::StrCat("--initial-cluster-token=psdb-", options.dir),
        // Elections in a loopback cluster settle in well under a second.
        "--heartbeat-interval=50", "--election-timeout=500",
        // Old revisions go, as in deploy/etcd.yaml: watchers must cope.
        "--auto-compaction-mode=periodic", "--auto-compaction-retention=1h"};
    child.log = absl::StrCat(options.dir, "/m", i, ".log");
    absl::StatusOr<std::unique_ptr<ChildProcess>> member =
        ChildProcess::Start(child);
    if (!member.ok()) return member.status();
    etcd->members_.push_back(*std::move(member));
  }
  const absl::Time deadline = absl::Now() + options.timeout;
  for (int i = 0; i < options.members; ++i) {
    ChildProcess& member = *etcd->members_[i];
    absl::Duration backoff = absl::Milliseconds(5);
    while (member.Stderr().find("ready to serve client requests") ==
           std::string::npos) {
      if (absl::StatusOr<int> exited = member.Wait(absl::ZeroDuration());
          exited.ok()) {
        return absl::FailedPreconditionError(
            absl::StrCat("etcd member ", i, " exited (wait status ", *exited,
                         ") before serving: ", member.Stderr()));
      }
      if (absl::Now() >= deadline) {
        return absl::DeadlineExceededError(absl::StrCat(
            "etcd member ", i, " not serving after ",
            absl::FormatDuration(options.timeout), ": ", member.Stderr()));
      }
      absl::SleepFor(backoff);
      backoff = std::min(backoff * 2, absl::Milliseconds(50));
    }
  }
  return etcd;
}

LocalEtcd::~LocalEtcd() {
  // members_ is shorter than clients_ when Start failed part way.
  for (size_t i = 0; i < members_.size(); ++i) Kill(static_cast<int>(i));
}

std::string LocalEtcd::endpoints() const {
  return absl::StrJoin(clients_, ",");
}

void LocalEtcd::Kill(int i) {
  if (i < 0 || i >= static_cast<int>(members_.size()) ||
      members_[i] == nullptr) {
    return;
  }
  members_[i]->Signal(SIGKILL);
  (void)members_[i]->Wait(absl::Seconds(30));
  members_[i].reset();
}

}  // namespace psdb::tools
