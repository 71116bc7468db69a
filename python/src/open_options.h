// psdb.open's keyword arguments: StoreOptions fields (psdb/store.h) for
// local: URLs; RemoteClientOptions fields (rpc/client/remote_client.h) for
// servers: and scheduler: URLs, durations as seconds (call_timeout_s, ...)
// and the TLS fields prefixed tls_ (tls_ca_file, ...). max_batch_keys
// applies to both. Unset options keep the C++ defaults.
//
// Thread-safety: REQUIRES the GIL.
#ifndef PSDB_PYTHON_SRC_OPEN_OPTIONS_H_
#define PSDB_PYTHON_SRC_OPEN_OPTIONS_H_

#include <pybind11/pybind11.h>

#include <string>

#include "psdb/store.h"
#include "rpc/client/remote_client.h"

namespace psdb::python {

struct OpenOptions {
  StoreOptions local;
  rpc::RemoteClientOptions remote;
};

// ValueError on an unknown option or one that does not apply to the URL's
// scheme; TypeError on a value of the wrong type.
OpenOptions ParseOpenOptions(const std::string& url,
                             const pybind11::kwargs& kwargs);

}  // namespace psdb::python

#endif  // PSDB_PYTHON_SRC_OPEN_OPTIONS_H_
