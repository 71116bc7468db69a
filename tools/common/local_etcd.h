// LocalEtcd: real etcd members (Debian's /usr/bin/etcd) on loopback, one
// cluster, started and stopped by this process: what the control-plane
// tests and `ps-bench control` run psdb's etcd backend against. Each
// member's data and log live under a directory the caller owns; client and
// peer ports are picked free and held for the object's life
// (reserved_port.h), so nothing else takes them while a member starts.
//
//   PSDB_ASSIGN_OR_RETURN(auto etcd, LocalEtcd::Start({.dir = d, .members =
//   3})); etcd->endpoints();   // "127.0.0.1:p1,127.0.0.1:p2,127.0.0.1:p3"
//   etcd->Kill(0);       // SIGKILL one member; the other two keep quorum
//
// Thread-safety: one thread per object.
#ifndef PSDB_TOOLS_COMMON_LOCAL_ETCD_H_
#define PSDB_TOOLS_COMMON_LOCAL_ETCD_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "tools/common/child_process.h"
#include "tools/common/reserved_port.h"

namespace psdb::tools {

struct LocalEtcdOptions {
  // Where member i keeps m<i>/ (data) and m<i>.log. REQUIRED.
  std::string dir;
  // Members of the one cluster. Default: 1
  int members = 1;
  // How long Start waits for every member to serve. Default: 60 s
  absl::Duration timeout = absl::Seconds(60);
  // Default: "/usr/bin/etcd"
  std::string binary = "/usr/bin/etcd";
};

class LocalEtcd {
 public:
  // Starts the members and returns once each logs that it serves clients
  // (a member listens before it serves; a connection made in between
  // stalls). DeadlineExceeded with the log after options.timeout.
  static absl::StatusOr<std::unique_ptr<LocalEtcd>> Start(
      const LocalEtcdOptions& options);
  ~LocalEtcd();  // SIGKILLs what still runs.
  LocalEtcd(const LocalEtcd&) = delete;
  LocalEtcd& operator=(const LocalEtcd&) = delete;

  // "127.0.0.1:port,..." of every member (ps-scheduler --etcd).
  std::string endpoints() const;
  const std::vector<std::string>& endpoint_list() const { return clients_; }
  int size() const { return static_cast<int>(clients_.size()); }
  // SIGKILLs member i and reaps it (no-op when already killed).
  void Kill(int i);

 private:
  LocalEtcd() = default;
  std::vector<std::string> clients_;                  // host:port per member
  std::vector<std::unique_ptr<ReservedPort>> ports_;  // clients' and peers'
  std::vector<std::unique_ptr<ChildProcess>> members_;
};

}  // namespace psdb::tools

#endif  // PSDB_TOOLS_COMMON_LOCAL_ETCD_H_
