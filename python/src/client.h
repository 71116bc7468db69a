// psdb.Client: a ParameterClient opened from a URL (psdb/client_url.h)
// behind a lock that makes close() safe. Every call releases the GIL and
// holds the lock shared while C++ runs; close() takes it exclusively, so it
// waits for calls in flight, and later calls raise ValueError("client is
// closed") instead of touching a destroyed client. Vocab caches opened over
// the client register here and are destroyed (not flushed) before it.
//
// Thread-safety: thread-safe; Python threads may share one Client (the
// ParameterClient is thread-safe and the GIL is released in every call, so
// they overlap).
#ifndef PSDB_PYTHON_SRC_CLIENT_H_
#define PSDB_PYTHON_SRC_CLIENT_H_

#include <pybind11/pybind11.h>

#include <memory>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "psdb/parameter_client.h"

namespace psdb::python {

// Something that uses the client and must go before it (a vocab cache).
class ClientDependent {
 public:
  virtual ~ClientDependent() = default;
  // Releases everything that refers to the client. Called under the
  // client's exclusive lock, without the GIL.
  virtual void Detach() = 0;
};

class ClientHandle {
 public:
  ClientHandle(std::string url, std::unique_ptr<ParameterClient> client);
  ~ClientHandle();
  ClientHandle(const ClientHandle&) = delete;
  ClientHandle& operator=(const ClientHandle&) = delete;

  // Runs f(ParameterClient&) with the GIL released and the client open;
  // ValueError("client is closed") after Close(). REQUIRES: the GIL.
  template <typename F>
  auto Call(F&& f) {
    using Result = std::invoke_result_t<F, ParameterClient&>;
    std::optional<Result> result;
    {
      pybind11::gil_scoped_release nogil;
      absl::ReaderMutexLock lock(&mu_);
      if (client_ != nullptr) result.emplace(f(*client_));
    }
    if (!result.has_value()) throw pybind11::value_error("client is closed");
    return *std::move(result);
  }

  // Destroys the dependents, then the client. Idempotent. REQUIRES: the GIL.
  void Close();
  bool closed() const;
  const std::string& url() const { return url_; }

  // `dependent` is detached by Close() if it still exists then.
  void AddDependent(std::weak_ptr<ClientDependent> dependent);

  // The table's dim, from a cache filled by GetTable (ValueOrThrow errors).
  // Forget() drops a table's entry (after drop_table, or when a pull found
  // the cached dim wrong because another client recreated the table).
  int Dim(const std::string& table);
  void Forget(const std::string& table);

 private:
  const std::string url_;
  mutable absl::Mutex mu_;
  std::unique_ptr<ParameterClient> client_ ABSL_GUARDED_BY(mu_);
  std::vector<std::weak_ptr<ClientDependent>> dependents_ ABSL_GUARDED_BY(mu_);

  absl::Mutex dims_mu_;
  absl::flat_hash_map<std::string, int> dims_ ABSL_GUARDED_BY(dims_mu_);
};

// Registers psdb.Client, psdb.Rows and psdb.open.
void RegisterClient(pybind11::module_& m);

}  // namespace psdb::python

#endif  // PSDB_PYTHON_SRC_CLIENT_H_
