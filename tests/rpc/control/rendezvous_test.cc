// The scheduler's rendezvous store (rpc/control/rendezvous.h) through
// SchedulerClient over loopback gRPC, on both backends: the in-process
// Scheduler and EtcdScheduler on a real etcd (two schedulers sharing it:
// what one was told, the other answers).
#include "rpc/control/rendezvous.h"

#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "rpc/control/scheduler.h"
#include "rpc/control/scheduler_client.h"
#include "tests/rpc/control/etcd_cluster.h"
#include "tests/testing/test_util.h"

namespace psdb::rpc {
namespace {

using ::psdb::testing::EtcdCluster;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

enum class Backend { kMemory, kEtcd };

class RendezvousTest : public ::testing::TestWithParam<Backend> {
 protected:
  void SetUp() override {
    SchedulerOptions options;
    options.server_num = 1;
    options.worker_num = 2;
    options.log = [](absl::string_view) {};
    if (GetParam() == Backend::kEtcd) {
      ASSERT_OK_AND_ASSIGN(etcd_, EtcdCluster::Start(1));
      options.etcd_endpoints = etcd_->endpoint_list();
      options.cluster = "rdv";
      options.heartbeat_interval = absl::Milliseconds(200);
      options.lease_ttl = absl::Seconds(2);
    }
    ASSERT_OK_AND_ASSIGN(a_, SchedulerServer::Start(options));
    // With etcd a second scheduler serves the same state; in process the
    // second client talks to the same scheduler.
    if (GetParam() == Backend::kEtcd) {
      ASSERT_OK_AND_ASSIGN(b_, SchedulerServer::Start(options));
    }
    ASSERT_OK_AND_ASSIGN(ca_,
                         SchedulerClient::Open({.address = a_->address()}));
    ASSERT_OK_AND_ASSIGN(
        cb_, SchedulerClient::Open(
                 {.address = (b_ != nullptr ? b_ : a_)->address()}));
  }

  std::unique_ptr<EtcdCluster> etcd_;
  std::unique_ptr<SchedulerServer> a_, b_;
  std::unique_ptr<SchedulerClient> ca_, cb_;
};

TEST_P(RendezvousTest, SetThenGetReturnsValuesInOrder) {
  const std::string binary("\0\x01\xff addr", 8);
  ASSERT_OK(ca_->RendezvousSet("job/1/gloo/0", binary));
  ASSERT_OK(ca_->RendezvousSet("job/1/gloo/1", "second"));
  ASSERT_OK_AND_ASSIGN(
      std::vector<std::string> values,
      cb_->RendezvousGet({"job/1/gloo/1", "job/1/gloo/0"}, absl::Seconds(5)));
  EXPECT_THAT(values, ElementsAre("second", binary));
}

TEST_P(RendezvousTest, GetWaitsForAKeyWrittenLater) {
  std::thread writer([&] {
    // The reader is (very likely) already waiting; either order must work.
    ASSERT_OK(cb_->RendezvousSet("job/2/nccl/id", "unique-id"));
  });
  ASSERT_OK_AND_ASSIGN(
      std::vector<std::string> values,
      ca_->RendezvousGet({"job/2/nccl/id"}, absl::Seconds(20)));
  writer.join();
  EXPECT_THAT(values, ElementsAre("unique-id"));
}

TEST_P(RendezvousTest, KeysAreWrittenOnce) {
  ASSERT_OK(ca_->RendezvousSet("job/3/k", "v1"));
  // The same value again (a re-sent call) is fine.
  EXPECT_OK(cb_->RendezvousSet("job/3/k", "v1"));
  absl::Status other = cb_->RendezvousSet("job/3/k", "v2");
  EXPECT_THAT(other, StatusIs(absl::StatusCode::kAlreadyExists));
  EXPECT_THAT(other.message(), HasSubstr("'job/3/k' already holds another"));
  ASSERT_OK_AND_ASSIGN(std::vector<std::string> values,
                       ca_->RendezvousGet({"job/3/k"}, absl::Seconds(5)));
  EXPECT_THAT(values, ElementsAre("v1"));
}

TEST_P(RendezvousTest, TimeoutNamesTheMissingKeys) {
  ASSERT_OK(ca_->RendezvousSet("job/4/here", "x"));
  absl::StatusOr<std::vector<std::string>> r = ca_->RendezvousGet(
      {"job/4/here", "job/4/absent", "job/4/gone"}, absl::Milliseconds(300));
  EXPECT_THAT(r, StatusIs(absl::StatusCode::kDeadlineExceeded));
  EXPECT_EQ(r.status().message(),
            "rendezvous: timed out waiting for key(s) job/4/absent, "
            "job/4/gone");
}

TEST_P(RendezvousTest, BadKeysAndValuesAreRefusedAndChangeNothing) {
  for (const std::string& key :
       {std::string(""), std::string(257, 'k'), std::string("a b"),
        std::string("a//b"), std::string("/a"), std::string("a/../b"),
        std::string("a/./b"), std::string("a/")}) {
    EXPECT_THAT(ca_->RendezvousSet(key, "v"),
                StatusIs(absl::StatusCode::kInvalidArgument))
        << "'" << key << "'";
  }
  absl::Status big = ca_->RendezvousSet(
      "job/5/big", std::string(kMaxRendezvousValueBytes + 1, 'x'));
  EXPECT_THAT(big, StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(big.message(), HasSubstr("more than the 1048576 allowed"));
  // Exactly the limit is fine.
  EXPECT_OK(ca_->RendezvousSet("job/5/max",
                               std::string(kMaxRendezvousValueBytes, 'y')));
  EXPECT_THAT(ca_->RendezvousGet({}, absl::Seconds(1)),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(ca_->RendezvousGet({"ok", "bad key"}, absl::Seconds(1)),
              StatusIs(absl::StatusCode::kInvalidArgument));
  // The refused big value left nothing behind.
  EXPECT_THAT(ca_->RendezvousGet({"job/5/big"}, absl::Milliseconds(100)),
              StatusIs(absl::StatusCode::kDeadlineExceeded));
}

INSTANTIATE_TEST_SUITE_P(Backends, RendezvousTest,
                         ::testing::Values(Backend::kMemory, Backend::kEtcd),
                         [](const auto& info) {
                           return info.param == Backend::kMemory
                                      ? std::string("Memory")
                                      : std::string("Etcd");
                         });

// The in-process store's bound on how many keys it holds.
TEST(MemoryRendezvousTest, RefusesKeysBeyondTheLimitAndClosesWaiters) {
  MemoryRendezvous store;
  for (size_t i = 0; i < kMaxRendezvousEntries; ++i) {
    ASSERT_OK(store.Set(absl::StrCat("k/", i), "v"));
  }
  absl::Status full = store.Set("k/one-more", "v");
  EXPECT_THAT(full, StatusIs(absl::StatusCode::kResourceExhausted));
  // Re-writing a held key with its value still answers OK.
  EXPECT_OK(store.Set("k/0", "v"));
  std::thread closer([&] { store.Close(); });
  EXPECT_THAT(store.Get({"never"}, absl::Now() + absl::Seconds(30)),
              StatusIs(absl::StatusCode::kUnavailable));
  closer.join();
}

}  // namespace
}  // namespace psdb::rpc
