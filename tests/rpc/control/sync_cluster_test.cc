// Sync (BSP) training on real processes: ps-scheduler, 2 ps-servers started
// with --sync_mode=sync that join through the scheduler, and 2 workers
// (in-process RemoteClients from the scheduler's map). The rows after each
// step equal one application of the mean of the two workers' gradients,
// exactly, and a pull of step s+1 sees all of step s.
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <map>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "optim/optimizer.h"
#include "psdb/table_spec.h"
#include "rpc/client/cluster_worker.h"
#include "rpc/client/remote_client.h"
#include "rpc/control/scheduler_client.h"
#include "tests/testing/child_process.h"
#include "tests/testing/test_util.h"

namespace psdb::rpc {
namespace {

using ::psdb::testing::ChildProcess;
using ::psdb::testing::ClusterServerOptions;
using ::psdb::testing::PsSchedulerOptions;
using ::psdb::testing::ReservedPort;
using ::psdb::testing::ScratchDir;
using ::testing::HasSubstr;

constexpr int kDim = 3;

TableSpec Spec() {
  TableSpec spec;
  spec.name = "emb";
  spec.dim = kDim;
  spec.seed = 42;
  spec.optimizer.kind = optim::OptimizerKind::kAdam;
  spec.optimizer.learning_rate = 0.05f;
  return spec;
}

// One worker's push of a step: keys (with duplicates) and gradients.
struct Batch {
  std::vector<uint64_t> keys;
  std::vector<float> grads;
};

Batch MakeBatch(int worker, int step) {
  Batch b;
  // Overlapping key sets, a duplicate, and keys only one worker touches;
  // enough keys that both servers own some.
  for (uint64_t k = 0; k < 12; ++k) {
    if ((k + worker) % 3 == 0) continue;
    b.keys.push_back(k * 1000003 + 17);
  }
  b.keys.push_back(b.keys.front());
  for (size_t i = 0; i < b.keys.size() * kDim; ++i) {
    b.grads.push_back(
        0.125f * static_cast<float>((i * 7 + worker * 5 + step) % 11) - 0.5f);
  }
  return b;
}

class SyncClusterTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const int port = sched_port_.port();
    auto sched = ChildProcess::Start(PsSchedulerOptions(port, 2, 2));
    ASSERT_OK(sched);
    sched_ = *std::move(sched);
    sched_address_ = sched_->ready_value();

    // Workers register first; the servers join and block until the cluster
    // is complete, so they are started concurrently.
    for (int w = 0; w < 2; ++w) {
      SchedulerClientOptions so;
      so.address = sched_address_;
      auto c = SchedulerClient::Open(so);
      ASSERT_OK(c);
      v1::RegisterRequest r;
      r.set_node_id(absl::StrCat("worker-", w));
      r.set_role(v1::NODE_ROLE_WORKER);
      auto reg = (*c)->Register(r);
      ASSERT_OK(reg);
      worker_rank_.push_back(reg->rank());
      (*c)->StartHeartbeats();
      workers_.push_back(*std::move(c));
    }
    std::vector<absl::StatusOr<std::unique_ptr<ChildProcess>>> started(2);
    std::vector<std::thread> threads;
    for (int s = 0; s < 2; ++s) {
      threads.emplace_back([&, s] {
        started[s] = ChildProcess::Start(ClusterServerOptions(
            port, absl::StrCat("server-", s), dir_.Sub(absl::StrCat("s", s)),
            {"--sync_mode=sync"}));
      });
    }
    for (auto& t : threads) t.join();
    for (auto& s : started) {
      ASSERT_OK(s);
      servers_.push_back(*std::move(s));
    }
    for (int w = 0; w < 2; ++w) {
      RemoteClientOptions ro;
      ro.push_to_every_server = true;
      auto client =
          OpenSchedulerRemoteClient(sched_address_, ro, absl::Seconds(60));
      ASSERT_OK(client);
      clients_.push_back(*std::move(client));
    }
  }

  ScratchDir dir_;
  const ReservedPort sched_port_;
  std::unique_ptr<ChildProcess> sched_;
  std::string sched_address_;
  std::vector<std::unique_ptr<SchedulerClient>> workers_;
  std::vector<int> worker_rank_;
  std::vector<std::unique_ptr<ChildProcess>> servers_;
  std::vector<std::unique_ptr<RemoteClient>> clients_;
};

TEST_F(SyncClusterTest, StepEqualsOneApplicationOfTheMeanGradient) {
  const TableSpec spec = Spec();
  ASSERT_OK(clients_[0]->CreateTable(spec));
  ASSERT_OK(clients_[1]->CreateTable(spec));  // idempotent

  // Every key any worker touches, and its initial row (values + state).
  std::map<uint64_t, std::pair<std::vector<float>, std::vector<float>>> rows;
  for (int step = 1; step <= 2; ++step) {
    for (int w = 0; w < 2; ++w) {
      for (uint64_t k : MakeBatch(w, step).keys) rows[k];
    }
  }
  std::vector<uint64_t> all;
  for (auto& [k, row] : rows) all.push_back(k);
  RowBatch initial;
  ASSERT_OK(clients_[0]->PullRows("emb", all, &initial));
  for (size_t i = 0; i < all.size(); ++i) {
    auto& [value, state] = rows[all[i]];
    value.assign(initial.values.begin() + i * kDim,
                 initial.values.begin() + (i + 1) * kDim);
    state.assign(initial.state.begin() + i * initial.state_size,
                 initial.state.begin() + (i + 1) * initial.state_size);
  }

  for (int step = 1; step <= 2; ++step) {
    // Expected: per key, each worker's duplicates summed, the two workers'
    // sums averaged, the optimizer applied once.
    std::map<uint64_t, std::vector<float>> per_worker[2];
    for (int w = 0; w < 2; ++w) {
      const Batch b = MakeBatch(worker_rank_[w], step);
      for (size_t i = 0; i < b.keys.size(); ++i) {
        auto [it, fresh] = per_worker[w].try_emplace(
            b.keys[i], std::vector<float>(kDim, 0.0f));
        for (int j = 0; j < kDim; ++j) it->second[j] += b.grads[i * kDim + j];
      }
    }
    for (auto& [k, row] : rows) {
      std::vector<float> g(kDim, 0.0f);
      bool touched = false;
      for (int w = 0; w < 2; ++w) {
        auto it = per_worker[w].find(k);
        if (it == per_worker[w].end()) continue;
        touched = true;
        for (int j = 0; j < kDim; ++j) g[j] += it->second[j];
      }
      if (!touched) continue;
      for (float& x : g) x /= 2.0f;
      optim::Apply(spec.optimizer, absl::MakeSpan(row.first),
                   absl::MakeSpan(row.second), g, step);
    }

    // Worker 0 pushes first: nothing is applied until worker 1 has pushed.
    std::vector<float> before(all.size() * kDim);
    ASSERT_OK(clients_[0]->Pull("emb", all, absl::MakeSpan(before), {}));
    const Batch b0 = MakeBatch(worker_rank_[0], step);
    PushOptions p0;
    p0.step = step;
    p0.worker_id = worker_rank_[0];
    ASSERT_OK(clients_[0]->Push("emb", b0.keys, b0.grads, p0));
    std::vector<float> held(all.size() * kDim);
    ASSERT_OK(clients_[1]->Pull("emb", all, absl::MakeSpan(held), {}));
    EXPECT_EQ(held, before) << "step " << step << " applied early";

    const Batch b1 = MakeBatch(worker_rank_[1], step);
    PushOptions p1;
    p1.step = step;
    p1.worker_id = worker_rank_[1];
    ASSERT_OK(clients_[1]->Push("emb", b1.keys, b1.grads, p1));
    // BSP: both workers finish the step before either pulls for the next.
    absl::Status clock0;
    std::thread t([&] {
      clock0 = workers_[0]->StepClock(step, 0, absl::Seconds(60)).status();
    });
    ASSERT_OK(workers_[1]->StepClock(step, 0, absl::Seconds(60)));
    t.join();
    ASSERT_OK(clock0);

    for (int w = 0; w < 2; ++w) {
      std::vector<float> got(all.size() * kDim);
      ASSERT_OK(clients_[w]->Pull("emb", all, absl::MakeSpan(got), {}));
      for (size_t i = 0; i < all.size(); ++i) {
        for (int j = 0; j < kDim; ++j) {
          EXPECT_EQ(got[i * kDim + j], rows[all[i]].first[j])
              << "step " << step << " key " << all[i] << " [" << j
              << "] seen by worker " << w;
        }
      }
    }
  }

  // A worker that pushes a step already applied is told so.
  const Batch late = MakeBatch(0, 1);
  PushOptions p;
  p.step = 1;
  p.worker_id = 0;
  absl::Status s = clients_[0]->Push("emb", late.keys, late.grads, p);
  EXPECT_THAT(s, StatusIs(absl::StatusCode::kFailedPrecondition));
  EXPECT_THAT(std::string(s.message()), HasSubstr("arrived after step 2"));

  for (auto& server : servers_) {
    server->Signal(SIGTERM);
    ASSERT_OK_AND_ASSIGN(int status, server->Wait());
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0)
        << server->Stderr();
    EXPECT_THAT(server->Stderr(), HasSubstr("of 2 servers, epoch 1"));
  }
}

}  // namespace
}  // namespace psdb::rpc
