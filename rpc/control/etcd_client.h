// EtcdClient: psdb's client of etcd's v3 gRPC API (KV, Txn, Lease, Watch,
// Maintenance.Status), the store of a multi-scheduler control plane
// (etcd_scheduler.h). The stubs are generated at build time from the protos
// Debian ships (golang-etcd-server-dev); no etcd type appears here.
//
//   PSDB_ASSIGN_OR_RETURN(auto etcd, EtcdClient::Open(
//       {.endpoints = {"127.0.0.1:2379", "127.0.0.1:22379"}}));
//   PSDB_ASSIGN_OR_RETURN(int64_t lease, etcd->LeaseGrant(absl::Seconds(10)));
//   PSDB_ASSIGN_OR_RETURN(EtcdTxnResult r, etcd->Txn(
//       {EtcdCompare::Absent("/psdb/c/ranks/server/0")},
//       {EtcdOp::Put("/psdb/c/ranks/server/0", "node-a", lease)}, {}));
//
// Endpoints: one channel per endpoint. A call that fails with UNAVAILABLE
// (the member is down or unreachable), or whose attempt gets no answer in
// a third of the call timeout (a member that lost its leader holds a
// request for seconds), is sent to the next endpoint, until the call's
// deadline passes; then it returns UNAVAILABLE naming each endpoint and
// why. Every call may therefore reach etcd more than once: callers write
// the same value again or compare-and-set (psdb's all do). Reads are
// linearizable (etcd's default): what one scheduler wrote, any other reads.
//
// Errors keep etcd's own codes and messages ("etcdserver: requested lease
// not found" is NOT_FOUND, a compacted revision OUT_OF_RANGE).
//
// Thread-safety: thread-safe; every method may block for up to the call
// timeout (WaitForEvents until its deadline).
#ifndef PSDB_RPC_CONTROL_ETCD_CLIENT_H_
#define PSDB_RPC_CONTROL_ETCD_CLIENT_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "rpc/wire/tls.h"

namespace psdb::rpc {

struct EtcdOptions {
  // "host:port" of each etcd member's client URL. REQUIRED: at least one.
  std::vector<std::string> endpoints;
  // TLS to etcd (its --trusted-ca-file / client certificates); plaintext
  // to a non-loopback endpoint needs tls.insecure, as for every psdb
  // channel (rpc/wire/tls.h).
  ClientTlsOptions tls;
  // Deadline of one call, fail-over included. Default: 5 s
  absl::Duration call_timeout = absl::Seconds(5);
};

// Parses "h1:p1,h2:p2" (ps-scheduler --etcd, PS_ETCD_ENDPOINTS); an
// "http://" prefix on an endpoint is accepted and dropped.
absl::StatusOr<std::vector<std::string>> ParseEtcdEndpoints(
    absl::string_view list);

struct EtcdKeyValue {
  std::string key;
  std::string value;
  // Revision of the key's creation and of its last change; etcd revisions
  // are cluster-wide, so these order every write.
  int64_t create_revision = 0;
  int64_t mod_revision = 0;
  int64_t lease = 0;  // 0 = none
};

// A read: the keys found and the store's revision at the time of the read
// (watch from revision + 1 to see every later change).
struct EtcdRange {
  std::vector<EtcdKeyValue> kvs;
  int64_t revision = 0;
};

// One condition of a transaction.
struct EtcdCompare {
  enum class Target { kCreateRevision, kModRevision, kValue };
  std::string key;
  Target target = Target::kCreateRevision;
  int64_t revision = 0;  // kCreateRevision, kModRevision
  std::string value;     // kValue
  // The key does not exist (its create revision is 0).
  static EtcdCompare Absent(std::string key);
  // The key was last changed at `mod_revision` (0 = absent).
  static EtcdCompare ModRevisionIs(std::string key, int64_t mod_revision);
  static EtcdCompare ValueIs(std::string key, std::string value);
};

// One operation of a transaction.
struct EtcdOp {
  enum class Kind { kPut, kDelete, kDeletePrefix, kGet };
  Kind kind = Kind::kPut;
  std::string key;
  std::string value;
  int64_t lease = 0;
  static EtcdOp Put(std::string key, std::string value, int64_t lease = 0);
  static EtcdOp Delete(std::string key);
  static EtcdOp DeletePrefix(std::string prefix);
  static EtcdOp Get(std::string key);
};

struct EtcdTxnResult {
  bool succeeded = false;
  // The revision after the transaction (the revision of its writes, if it
  // wrote).
  int64_t revision = 0;
  // Per kGet operation of the branch that ran, in order: the key, if found.
  std::vector<std::optional<EtcdKeyValue>> gets;
};

struct EtcdEvent {
  enum class Type { kPut, kDelete };
  Type type = Type::kPut;
  // For a delete: key and mod_revision (the deletion's revision) only.
  EtcdKeyValue kv;
};

class EtcdClient {
 public:
  // Creates the channels (connects lazily); InvalidArgument on a bad
  // endpoint.
  static absl::StatusOr<std::unique_ptr<EtcdClient>> Open(
      const EtcdOptions& options);
  ~EtcdClient();
  EtcdClient(const EtcdClient&) = delete;
  EtcdClient& operator=(const EtcdClient&) = delete;

  const EtcdOptions& options() const;

  // The key, or nullopt; `revision` gets the store's revision.
  absl::StatusOr<std::optional<EtcdKeyValue>> Get(absl::string_view key,
                                                  int64_t* revision = nullptr);
  // Every key starting with `prefix`, in key order.
  absl::StatusOr<EtcdRange> GetPrefix(absl::string_view prefix);
  // The newest mod revision among the keys starting with `prefix` (0 when
  // there are none), without reading their values.
  absl::StatusOr<int64_t> NewestModRevision(absl::string_view prefix);
  // Returns the revision of the write.
  absl::StatusOr<int64_t> Put(absl::string_view key, absl::string_view value,
                              int64_t lease = 0);
  // Returns how many keys were deleted.
  absl::StatusOr<int64_t> Delete(absl::string_view key);
  absl::StatusOr<EtcdTxnResult> Txn(const std::vector<EtcdCompare>& compares,
                                    const std::vector<EtcdOp>& success,
                                    const std::vector<EtcdOp>& failure);

  // A lease of `ttl` (whole seconds, at least 1); returns its id.
  absl::StatusOr<int64_t> LeaseGrant(absl::Duration ttl);
  // Renews the lease once; returns its remaining TTL. NOT_FOUND once the
  // lease has expired or was revoked (its keys are gone).
  absl::StatusOr<absl::Duration> LeaseKeepAlive(int64_t lease);
  // Revokes the lease, deleting its keys. OK if it was already gone.
  absl::Status LeaseRevoke(int64_t lease);

  // Blocks until a change to `key` (or, with `prefix`, any key starting
  // with it) at a revision >= start_revision exists, and returns the
  // changes etcd delivered together, in revision order (at least one).
  // DEADLINE_EXCEEDED at `deadline`; OUT_OF_RANGE when start_revision was
  // compacted (read again, then watch from the read's revision + 1).
  absl::StatusOr<std::vector<EtcdEvent>> WaitForEvents(absl::string_view key,
                                                       bool prefix,
                                                       int64_t start_revision,
                                                       absl::Time deadline);

  // Asks every endpoint at once for its status (Maintenance.Status, at
  // most a second): OK when at least one answers and knows a leader;
  // otherwise UNAVAILABLE naming each endpoint and what it said.
  absl::Status Health();

 private:
  class Impl;
  explicit EtcdClient(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// The end of the key range that holds exactly the keys starting with
// `prefix` (etcd's range_end for a prefix).
std::string EtcdPrefixEnd(absl::string_view prefix);

}  // namespace psdb::rpc

#endif  // PSDB_RPC_CONTROL_ETCD_CLIENT_H_
