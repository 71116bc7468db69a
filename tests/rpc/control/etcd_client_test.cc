// EtcdClient against real etcd members on loopback (EtcdCluster).
#include "rpc/control/etcd_client.h"

#include <atomic>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "tests/rpc/control/etcd_cluster.h"
#include "tests/testing/child_process.h"
#include "tests/testing/test_util.h"

namespace psdb::rpc {
namespace {

using ::psdb::testing::EtcdCluster;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

std::unique_ptr<EtcdClient> Connect(const std::vector<std::string>& endpoints,
                                    absl::Duration timeout = absl::Seconds(5)) {
  EtcdOptions options;
  options.endpoints = endpoints;
  options.call_timeout = timeout;
  auto client = EtcdClient::Open(options);
  EXPECT_TRUE(client.ok()) << client.status();
  return *std::move(client);
}

TEST(ParseEtcdEndpointsTest, ListsAndRefusals) {
  ASSERT_OK_AND_ASSIGN(auto list,
                       ParseEtcdEndpoints("127.0.0.1:2379, http://h2:22379,"));
  EXPECT_THAT(list, ElementsAre("127.0.0.1:2379", "h2:22379"));
  EXPECT_THAT(ParseEtcdEndpoints(""),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(ParseEtcdEndpoints("h1"),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(ParseEtcdEndpoints("h1:0"),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(ParseEtcdEndpoints("h1:x"),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_EQ(EtcdPrefixEnd("/a/"), "/a0");
  EXPECT_EQ(EtcdPrefixEnd("a\xff"), "b");
}

TEST(EtcdClientTest, KeysPrefixesAndRevisions) {
  ASSERT_OK_AND_ASSIGN(auto etcd, EtcdCluster::Start(1));
  auto client = Connect(etcd->endpoint_list());
  ASSERT_OK_AND_ASSIGN(int64_t r1, client->Put("/t/a", "1"));
  ASSERT_OK_AND_ASSIGN(int64_t r2, client->Put("/t/b", "2"));
  ASSERT_OK_AND_ASSIGN(int64_t r3, client->Put("/u", "3"));
  EXPECT_LT(r1, r2);
  EXPECT_LT(r2, r3);
  int64_t revision = 0;
  ASSERT_OK_AND_ASSIGN(auto a, client->Get("/t/a", &revision));
  ASSERT_TRUE(a.has_value());
  EXPECT_EQ(a->value, "1");
  EXPECT_EQ(a->create_revision, r1);
  EXPECT_EQ(a->mod_revision, r1);
  EXPECT_EQ(revision, r3);
  ASSERT_OK_AND_ASSIGN(auto missing, client->Get("/t/zz"));
  EXPECT_FALSE(missing.has_value());
  ASSERT_OK_AND_ASSIGN(EtcdRange range, client->GetPrefix("/t/"));
  ASSERT_EQ(range.kvs.size(), 2u);
  EXPECT_EQ(range.kvs[0].key, "/t/a");
  EXPECT_EQ(range.kvs[1].key, "/t/b");
  EXPECT_EQ(range.revision, r3);
  ASSERT_OK_AND_ASSIGN(int64_t newest, client->NewestModRevision("/t/"));
  EXPECT_EQ(newest, r2);
  ASSERT_OK_AND_ASSIGN(int64_t none, client->NewestModRevision("/none/"));
  EXPECT_EQ(none, 0);
  ASSERT_OK_AND_ASSIGN(int64_t deleted, client->Delete("/t/a"));
  EXPECT_EQ(deleted, 1);
  ASSERT_OK_AND_ASSIGN(range, client->GetPrefix("/t/"));
  EXPECT_EQ(range.kvs.size(), 1u);
}

TEST(EtcdClientTest, TxnCompareAndSetGivesOneWinner) {
  ASSERT_OK_AND_ASSIGN(auto etcd, EtcdCluster::Start(1));
  auto client = Connect(etcd->endpoint_list());
  // Eight threads race to create one key: exactly one transaction wins.
  std::atomic<int> winners{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      auto r = client->Txn({EtcdCompare::Absent("/rank/0")},
                           {EtcdOp::Put("/rank/0", absl::StrCat("node-", t))},
                           {EtcdOp::Get("/rank/0")});
      ASSERT_TRUE(r.ok()) << r.status();
      if (r->succeeded) {
        ++winners;
        EXPECT_TRUE(r->gets.empty());
      } else {
        ASSERT_EQ(r->gets.size(), 1u);
        ASSERT_TRUE(r->gets[0].has_value());
        EXPECT_THAT(r->gets[0]->value, HasSubstr("node-"));
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(winners.load(), 1);
  // Compare on the mod revision: a stale revision loses, the current wins.
  ASSERT_OK_AND_ASSIGN(auto kv, client->Get("/rank/0"));
  ASSERT_OK_AND_ASSIGN(
      EtcdTxnResult stale,
      client->Txn({EtcdCompare::ModRevisionIs("/rank/0", kv->mod_revision - 1)},
                  {EtcdOp::Put("/rank/0", "x")}, {}));
  EXPECT_FALSE(stale.succeeded);
  ASSERT_OK_AND_ASSIGN(
      EtcdTxnResult fresh,
      client->Txn({EtcdCompare::ModRevisionIs("/rank/0", kv->mod_revision),
                   EtcdCompare::ValueIs("/rank/0", kv->value)},
                  {EtcdOp::Put("/rank/0", "y"), EtcdOp::DeletePrefix("/none/")},
                  {}));
  EXPECT_TRUE(fresh.succeeded);
  ASSERT_OK_AND_ASSIGN(auto after, client->Get("/rank/0"));
  EXPECT_EQ(after->value, "y");
  EXPECT_EQ(after->mod_revision, fresh.revision);
}

TEST(EtcdClientTest, LeaseKeysVanishWhenTheLeaseEnds) {
  ASSERT_OK_AND_ASSIGN(auto etcd, EtcdCluster::Start(1));
  auto client = Connect(etcd->endpoint_list());
  ASSERT_OK_AND_ASSIGN(int64_t kept, client->LeaseGrant(absl::Seconds(2)));
  ASSERT_OK_AND_ASSIGN(int64_t dropped, client->LeaseGrant(absl::Seconds(1)));
  ASSERT_OK_AND_ASSIGN(int64_t revoked, client->LeaseGrant(absl::Seconds(60)));
  ASSERT_OK(client->Put("/alive/kept", "a", kept).status());
  ASSERT_OK(client->Put("/alive/dropped", "b", dropped).status());
  ASSERT_OK(client->Put("/alive/revoked", "c", revoked).status());
  ASSERT_OK_AND_ASSIGN(auto kv, client->Get("/alive/kept"));
  EXPECT_EQ(kv->lease, kept);
  ASSERT_OK(client->LeaseRevoke(revoked));
  ASSERT_OK_AND_ASSIGN(auto gone, client->Get("/alive/revoked"));
  EXPECT_FALSE(gone.has_value());
  EXPECT_OK(client->LeaseRevoke(revoked));  // already gone: still OK
  // Keep one lease alive while the other expires.
  ASSERT_TRUE(psdb::testing::WaitFor(
      [&] {
        EXPECT_OK(client->LeaseKeepAlive(kept).status());
        auto d = client->Get("/alive/dropped");
        return d.ok() && !d->has_value();
      },
      absl::Seconds(30)));
  ASSERT_OK_AND_ASSIGN(auto still, client->Get("/alive/kept"));
  EXPECT_TRUE(still.has_value());
  EXPECT_THAT(client->LeaseKeepAlive(dropped),
              StatusIs(absl::StatusCode::kNotFound));
}

TEST(EtcdClientTest, WaitForEventsSeesChangesFromARevision) {
  ASSERT_OK_AND_ASSIGN(auto etcd, EtcdCluster::Start(1));
  auto client = Connect(etcd->endpoint_list());
  ASSERT_OK_AND_ASSIGN(int64_t r1, client->Put("/w/a", "1"));
  // A change already made is delivered when watched from its revision.
  ASSERT_OK_AND_ASSIGN(
      auto past,
      client->WaitForEvents("/w/", true, r1, absl::Now() + absl::Seconds(10)));
  ASSERT_EQ(past.size(), 1u);
  EXPECT_EQ(past[0].kv.key, "/w/a");
  EXPECT_EQ(past[0].kv.mod_revision, r1);
  // A later one is delivered to a waiter, whether it came before the
  // watch was set up or after: it is asked for by revision.
  std::thread writer([&] { EXPECT_OK(client->Delete("/w/a").status()); });
  ASSERT_OK_AND_ASSIGN(auto later,
                       client->WaitForEvents("/w/a", false, r1 + 1,
                                             absl::Now() + absl::Seconds(10)));
  writer.join();
  ASSERT_EQ(later.size(), 1u);
  EXPECT_EQ(later[0].type, EtcdEvent::Type::kDelete);
  EXPECT_EQ(later[0].kv.key, "/w/a");
  // Nothing happens: DEADLINE_EXCEEDED at the deadline.
  EXPECT_THAT(client->WaitForEvents("/w/", true, later[0].kv.mod_revision + 1,
                                    absl::Now() + absl::Milliseconds(300)),
              StatusIs(absl::StatusCode::kDeadlineExceeded));
}

TEST(EtcdClientTest, AWatchFromACompactedRevisionIsOutOfRange) {
  ASSERT_OK_AND_ASSIGN(auto etcd, EtcdCluster::Start(1));
  auto client = Connect(etcd->endpoint_list());
  ASSERT_OK_AND_ASSIGN(int64_t r1, client->Put("/c/a", "1"));
  ASSERT_OK_AND_ASSIGN(int64_t r2, client->Put("/c/a", "2"));
  // etcdctl (Debian's etcd-client) compacts the history up to r2.
  psdb::testing::ShellResult compact = psdb::testing::RunShell(
      absl::StrCat("ETCDCTL_API=3 etcdctl --endpoints=", etcd->endpoints(),
                   " compact ", r2));
  ASSERT_EQ(compact.exit_code, 0) << compact.output;
  EXPECT_THAT(
      client->WaitForEvents("/c/", true, r1, absl::Now() + absl::Seconds(10)),
      StatusIs(absl::StatusCode::kOutOfRange));
  // From the compaction point on, history is there.
  ASSERT_OK_AND_ASSIGN(
      auto events,
      client->WaitForEvents("/c/", true, r2, absl::Now() + absl::Seconds(10)));
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].kv.value, "2");
}

TEST(EtcdClientTest, FailsOverToALiveMember) {
  ASSERT_OK_AND_ASSIGN(auto etcd, EtcdCluster::Start(3));
  auto client = Connect(etcd->endpoint_list());
  ASSERT_OK(client->Put("/f/before", "1").status());
  etcd->Kill(0);  // the first endpoint, the client's current one
  ASSERT_OK(client->Put("/f/after", "2").status());
  ASSERT_OK_AND_ASSIGN(EtcdRange range, client->GetPrefix("/f/"));
  EXPECT_EQ(range.kvs.size(), 2u);
  EXPECT_OK(client->Health());
}

TEST(EtcdClientTest, UnreachableEtcdSaysWhere) {
  const psdb::tools::ReservedPort held;  // nothing listens on it
  const std::string nowhere = absl::StrCat("127.0.0.1:", held.port());
  auto client = Connect({nowhere}, absl::Milliseconds(500));
  auto r = client->Put("/x", "1");
  EXPECT_THAT(r, StatusIs(absl::StatusCode::kUnavailable));
  EXPECT_THAT(r.status().message(), HasSubstr(nowhere));
  absl::Status health = client->Health();
  EXPECT_THAT(health, StatusIs(absl::StatusCode::kUnavailable));
  EXPECT_THAT(health.message(), HasSubstr(nowhere));
}

}  // namespace
}  // namespace psdb::rpc
