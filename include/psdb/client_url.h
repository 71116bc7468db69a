// OpenParameterClient: the one call a trainer makes to get its
// ParameterClient; only the URL changes between embedded and cluster mode
// (DESIGN.md):
//   "local:./psdb-data"        LocalClient on an in-process Store
//   "servers:h1:p1,h2:p2,..."  RemoteClient over a static server list
//   "servers:h1:p1|h1b:p1,..." the same with read-only replicas of a server
//                              ('|'): reads spread and fail over, writes
//                              refused (docs/cluster.md)
//   "scheduler:host:port"      RemoteClient routed by ps-scheduler's map
//                              (waits up to 5 min for the cluster to form;
//                              joins as a worker when PS_ROLE=worker,
//                              docs/cluster.md)
//   "scheduler:h1:p1,h2:p2"    the same with several schedulers sharing etcd:
//                              calls fail over between them
//
// Thread-safety: pure function; the returned client is thread-safe.
#ifndef PSDB_CLIENT_URL_H_
#define PSDB_CLIENT_URL_H_

#include <memory>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "psdb/parameter_client.h"
#include "psdb/remote_options.h"
#include "psdb/store_options.h"

namespace psdb::rpc {

// `remote` supplies everything but the server list (TLS, deadlines) for
// "servers:" and "scheduler:" URLs; `local` the store options for "local:"
// URLs. InvalidArgument on any other scheme.
absl::StatusOr<std::unique_ptr<ParameterClient>> OpenParameterClient(
    absl::string_view url, const RemoteOptions& remote = {},
    const StoreOptions& local = {});

}  // namespace psdb::rpc

#endif  // PSDB_CLIENT_URL_H_
