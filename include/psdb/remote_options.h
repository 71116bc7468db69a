// RemoteOptions: how a client reaches ps-server processes over gRPC (the
// "servers:" and "scheduler:" URLs of psdb/client_url.h): deadlines,
// retries, replica fail-over, batch splitting, synchronous pushes and TLS.
// Where the servers are comes from the URL.
//
// Thread-safety: plain values.
#ifndef PSDB_REMOTE_OPTIONS_H_
#define PSDB_REMOTE_OPTIONS_H_

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

#include "absl/time/time.h"

namespace psdb::rpc {

struct ClientTlsOptions {
  // PEM CA bundle the server's certificate must chain to. Empty = plaintext.
  // Default: ""
  std::string ca_file;
  // PEM client certificate and key, for servers that require one (mTLS).
  // Default: ""
  std::string cert_file;
  std::string key_file;
  // Name to check the server certificate against instead of the host in
  // the address (e.g. "localhost" when dialing 127.0.0.1). Default: ""
  std::string server_name_override;
  // Talk plaintext to a non-loopback address. Default: false
  bool insecure = false;
};

struct RemoteOptions {
  // Deadline of one call, retries included. Default: 30 s
  absl::Duration call_timeout = absl::Seconds(30);
  // Attempts of an idempotent call on UNAVAILABLE. Default: 5
  int max_attempts = 5;
  // Backoff before the first retry, doubling up to max_backoff.
  // Default: 20 ms, 1 s
  absl::Duration initial_backoff = absl::Milliseconds(20);
  absl::Duration max_backoff = absl::Seconds(1);
  // A server with replicas: the longest one attempt waits for a replica
  // before the request moves to another one (the last untried replica
  // gets the rest of call_timeout), so a replica that hangs rather than
  // refusing connections costs this once per replica_avoid_time.
  // Default: 2 s
  absl::Duration replica_attempt_timeout = absl::Seconds(2);
  // How long requests avoid a replica after it failed; then it is tried
  // again. Default: 5 s
  absl::Duration replica_avoid_time = absl::Seconds(5);
  // Most keys one RPC carries; larger sub-batches are split. Must not exceed
  // the servers' --max_batch_keys. Default: 65536
  size_t max_batch_keys = 65536;
  // Synchronous (BSP) servers (ps-server --sync_mode=sync,
  // docs/cluster.md): every Push sends one request to every server, an
  // empty one where the server owns none of the keys, so each server counts
  // this worker's push of the step. Pushes then need an explicit step and a
  // worker id (below). A server in the other mode refuses the push with
  // FailedPrecondition naming both modes, and applies nothing.
  // Default: false
  bool push_to_every_server = false;
  // The worker id every push carries, in place of PushOptions::worker_id:
  // a cluster worker's rank (a "scheduler:" URL's worker sets it). Unset = each
  // push's own PushOptions::worker_id. Default: unset
  std::optional<int32_t> worker_id;
  // TLS towards the servers (and the scheduler). Default: plaintext
  ClientTlsOptions tls;
};

}  // namespace psdb::rpc

#endif  // PSDB_REMOTE_OPTIONS_H_
