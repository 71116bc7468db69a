// ThreadPool: a fixed set of worker threads running closures in FIFO order.
// ps-server runs request handlers on one sized to the machine, so gRPC's
// callback threads only parse and hand off, and a slow store call never
// blocks the transport.
//
// Thread-safety: Schedule() may be called from any thread. The destructor
// runs every closure already scheduled, then joins the workers; scheduling
// from another thread during or after destruction is a caller error.
#ifndef PSDB_RPC_SERVER_THREAD_POOL_H_
#define PSDB_RPC_SERVER_THREAD_POOL_H_

#include <deque>
#include <functional>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"

namespace psdb::rpc {

class ThreadPool {
 public:
  // REQUIRES: num_threads >= 1.
  explicit ThreadPool(int num_threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  void Schedule(std::function<void()> fn);
  int size() const { return static_cast<int>(threads_.size()); }

 private:
  void WorkLoop();

  absl::Mutex mu_;
  std::deque<std::function<void()>> queue_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<std::thread> threads_;
};

}  // namespace psdb::rpc

#endif  // PSDB_RPC_SERVER_THREAD_POOL_H_
