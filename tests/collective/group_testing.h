// A scheduler in this process and `world` registered workers, for forming
// AllReduce groups over loopback in the collective tests.
#ifndef PSDB_TESTS_COLLECTIVE_GROUP_TESTING_H_
#define PSDB_TESTS_COLLECTIVE_GROUP_TESTING_H_

#include <functional>
#include <memory>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "rpc/control/scheduler.h"
#include "rpc/control/scheduler_client.h"
#include "tests/testing/test_util.h"

namespace psdb::collective::testing {

class SchedulerWithWorkers {
 public:
  explicit SchedulerWithWorkers(int world) {
    rpc::SchedulerOptions options;
    options.server_num = 1;
    options.worker_num = world;
    options.log = [](absl::string_view) {};
    auto server = rpc::SchedulerServer::Start(options);
    EXPECT_OK(server);
    server_ = *std::move(server);
    for (int w = 0; w < world; ++w) {
      auto client = rpc::SchedulerClient::Open({.address = server_->address()});
      EXPECT_OK(client);
      v1::RegisterRequest req;
      req.set_node_id(absl::StrCat("worker-", w));
      req.set_role(v1::NODE_ROLE_WORKER);
      auto reg = (*client)->Register(req);
      EXPECT_OK(reg);
      if (reg.ok()) {
        EXPECT_EQ(reg->rank(), w);
      }
      clients_.push_back(*std::move(client));
    }
  }

  rpc::SchedulerClient* client(int rank) { return clients_[rank].get(); }
  rpc::SchedulerServer* server() { return server_.get(); }
  int world() const { return static_cast<int>(clients_.size()); }

  // Runs fn(rank) on one thread per rank and joins them.
  void OnEveryRank(const std::function<void(int)>& fn) {
    std::vector<std::thread> threads;
    for (int r = 0; r < world(); ++r) threads.emplace_back(fn, r);
    for (std::thread& t : threads) t.join();
  }

 private:
  std::unique_ptr<rpc::SchedulerServer> server_;
  std::vector<std::unique_ptr<rpc::SchedulerClient>> clients_;
};

}  // namespace psdb::collective::testing

#endif  // PSDB_TESTS_COLLECTIVE_GROUP_TESTING_H_
