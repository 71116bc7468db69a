#include "tests/rpc/control/etcd_cluster.h"

#include <signal.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "rpc/control/etcd_client.h"
#include "util/status_macros.h"

namespace psdb::testing {

absl::StatusOr<std::unique_ptr<EtcdCluster>> EtcdCluster::Start(
    int members, absl::Duration timeout) {
  std::unique_ptr<EtcdCluster> cluster(new EtcdCluster());
  std::vector<std::string> peers;
  std::vector<std::string> initial;
  for (int i = 0; i < members; ++i) {
    cluster->clients_.push_back(absl::StrCat("127.0.0.1:", FreeLoopbackPort()));
    peers.push_back(absl::StrCat("http://127.0.0.1:", FreeLoopbackPort()));
    initial.push_back(absl::StrCat("m", i, "=", peers.back()));
  }
  for (int i = 0; i < members; ++i) {
    ChildOptions options;
    options.binary = "/usr/bin/etcd";
    const std::string client = absl::StrCat("http://", cluster->clients_[i]);
    options.args = {
        absl::StrCat("--name=m", i),
        absl::StrCat("--data-dir=", cluster->dir_.Sub(absl::StrCat("m", i))),
        absl::StrCat("--listen-client-urls=", client),
        absl::StrCat("--advertise-client-urls=", client),
        absl::StrCat("--listen-peer-urls=", peers[i]),
        absl::StrCat("--initial-advertise-peer-urls=", peers[i]),
        absl::StrCat("--initial-cluster=", absl::StrJoin(initial, ",")),
        "--initial-cluster-state=new",
        absl::StrCat("--initial-cluster-token=psdb-test-",
                     cluster->dir_.path()),
        // Elections in a loopback cluster settle in well under a second.
        "--heartbeat-interval=50", "--election-timeout=500",
        "--log-level=info"};
    options.log = cluster->dir_.Sub(absl::StrCat("m", i, ".log"));
    PSDB_ASSIGN_OR_RETURN(std::unique_ptr<ChildProcess> member,
                          ChildProcess::Start(options));
    cluster->members_.push_back(std::move(member));
  }
  // Members listen before they serve; a connection made in between waits
  // (gRPC's connect, seconds), so wait for each member to say it serves.
  const absl::Time deadline = absl::Now() + timeout;
  for (int i = 0; i < members; ++i) {
    ChildProcess& member = *cluster->members_[i];
    if (!WaitFor(
            [&] {
              return member.Stderr().find("ready to serve client requests") !=
                     std::string::npos;
            },
            deadline - absl::Now())) {
      return absl::DeadlineExceededError(
          absl::StrCat("etcd member ", i, " not serving after ",
                       absl::FormatDuration(timeout), ": ", member.Stderr()));
    }
  }
  rpc::EtcdOptions options;
  options.endpoints = cluster->clients_;
  options.call_timeout = absl::Seconds(1);
  PSDB_ASSIGN_OR_RETURN(std::unique_ptr<rpc::EtcdClient> client,
                        rpc::EtcdClient::Open(options));
  absl::Status health = client->Health();
  while (!health.ok() && absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(50));
    health = client->Health();
  }
  if (!health.ok()) {
    return absl::DeadlineExceededError(absl::StrCat(
        "etcd did not become healthy in ", absl::FormatDuration(timeout), ": ",
        health.message(), "; member 0 log: ", cluster->members_[0]->Stderr()));
  }
  return cluster;
}

EtcdCluster::~EtcdCluster() {
  for (size_t i = 0; i < members_.size(); ++i) Kill(static_cast<int>(i));
}

std::string EtcdCluster::endpoints() const {
  return absl::StrJoin(clients_, ",");
}

void EtcdCluster::Kill(int i) {
  if (members_[i] == nullptr) return;
  members_[i]->Signal(SIGKILL);
  (void)members_[i]->Wait(absl::Seconds(30));
  members_[i].reset();
}

}  // namespace psdb::testing
