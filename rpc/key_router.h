// KeyRouter: which server owns a key, as ps-server and RemoteClient both see
// it. Both build it from the same static server list (rank order of
// `--servers=h1:p1,h2:p2,...`) and the same epoch, so they agree on every
// key; a server checks each request's keys against it and answers
// FAILED_PRECONDITION for keys it does not own. Placement is shard::Ring's
// (multi-probe consistent hashing, 256 vnodes per server, weight 1), with
// server id = rank.
//
// Thread-safety: immutable after construction; share freely.
#ifndef PSDB_RPC_KEY_ROUTER_H_
#define PSDB_RPC_KEY_ROUTER_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace psdb::rpc {

// Splits "h1:p1,h2:p2" into addresses; InvalidArgument on an empty entry or
// an entry without a port.
absl::StatusOr<std::vector<std::string>> ParseServerList(
    absl::string_view list);

class KeyRouter {
 public:
  // Routes over servers 0..num_servers-1 (their rank in the server list).
  // REQUIRES: num_servers >= 1.
  KeyRouter(int num_servers, uint64_t epoch);
  ~KeyRouter();
  KeyRouter(const KeyRouter&) = delete;
  KeyRouter& operator=(const KeyRouter&) = delete;

  // Rank of the server that owns `key`.
  int Owner(uint64_t key) const;
  int num_servers() const { return num_servers_; }
  uint64_t epoch() const { return epoch_; }

 private:
  struct Impl;
  int num_servers_;
  uint64_t epoch_;
  std::unique_ptr<Impl> impl_;
};

}  // namespace psdb::rpc

#endif  // PSDB_RPC_KEY_ROUTER_H_
