#include "shard/cluster_map.h"

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "tests/testing/test_util.h"
#include "util/hash.h"

namespace psdb {
namespace {

ServerInfo Server(ServerId id, ServerState state = ServerState::kAlive,
                  float weight = 1.0f) {
  ServerInfo server;
  server.id = id;
  server.address = absl::StrCat("10.0.0.", id, ":7000");
  server.weight = weight;
  server.state = state;
  return server;
}

// `result` failed with InvalidArgument and a message containing `text`.
template <typename T>
void ExpectInvalidArgument(const T& result, const std::string& text) {
  const absl::Status status = ::psdb::testing::ToStatus(result);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
  EXPECT_THAT(std::string(status.message()), ::testing::HasSubstr(text));
}

ClusterMapSpec Spec(uint64_t epoch, std::vector<ServerInfo> servers) {
  ClusterMapSpec spec;
  spec.epoch = epoch;
  spec.servers = std::move(servers);
  return spec;
}

TEST(ClusterMapTest, EmptyMapOwnsNothing) {
  const ClusterMap map;
  EXPECT_EQ(map.epoch(), 0u);
  EXPECT_TRUE(map.servers().empty());
  EXPECT_TRUE(map.ring().empty());
  EXPECT_EQ(map.Owner(1), kNoServer);
  EXPECT_FALSE(map.Owns(kNoServer, 1));
}

TEST(ClusterMapTest, CanonicalFormAndEquality) {
  ASSERT_OK_AND_ASSIGN(
      ClusterMap a,
      ClusterMap::Create(Spec(4, {Server(2), Server(0), Server(1)})));
  ASSERT_OK_AND_ASSIGN(
      ClusterMap b,
      ClusterMap::Create(Spec(4, {Server(1), Server(2), Server(0)})));
  EXPECT_TRUE(a == b);
  ASSERT_EQ(a.servers().size(), 3u);
  EXPECT_EQ(a.servers()[0].id, 0);
  EXPECT_EQ(a.servers()[2].id, 2);
  ASSERT_OK_AND_ASSIGN(
      ClusterMap c,
      ClusterMap::Create(Spec(5, {Server(0), Server(1), Server(2)})));
  EXPECT_FALSE(a == c);
  // The spec round-trips: what rpc/ sends is what the peer rebuilds.
  ASSERT_OK_AND_ASSIGN(ClusterMap d, ClusterMap::Create(a.spec()));
  EXPECT_TRUE(a == d);
  for (uint64_t key = 0; key < 1000; ++key)
    ASSERT_EQ(a.Owner(key), d.Owner(key));
}

TEST(ClusterMapTest, RingHoldsAliveAndDeadButNotJoining) {
  ASSERT_OK_AND_ASSIGN(
      ClusterMap map,
      ClusterMap::Create(Spec(1, {Server(0), Server(1, ServerState::kDead),
                                  Server(2, ServerState::kJoining),
                                  Server(3, ServerState::kAlive, 2.0f)})));
  ASSERT_EQ(map.ring().num_servers(), 3u);
  EXPECT_EQ(map.ring().server_id(0), 0);
  EXPECT_EQ(map.ring().server_id(1), 1);
  EXPECT_EQ(map.ring().server_id(2), 3);
  EXPECT_EQ(map.ring().members()[2].weight, 2.0f);
  for (size_t p = 0; p < map.ring().num_servers(); ++p) {
    EXPECT_EQ(map.RingServer(p).id, map.ring().server_id(p));
  }
  EXPECT_EQ(map.RingServer(2).address, "10.0.0.3:7000");
  for (uint64_t key = 0; key < 2000; ++key) {
    const ServerId owner = map.Owner(key);
    ASSERT_NE(owner, 2);
    ASSERT_TRUE(map.Owns(owner, key));
    ASSERT_FALSE(map.Owns(2, key));
  }
}

TEST(ClusterMapTest, JoiningServerTakesKeysOnlyWhenAlive) {
  ASSERT_OK_AND_ASSIGN(
      ClusterMap before,
      ClusterMap::Create(Spec(7, {Server(0), Server(1), Server(2),
                                  Server(3, ServerState::kJoining)})));
  ASSERT_OK_AND_ASSIGN(ClusterMap after,
                       before.WithState(3, ServerState::kAlive));
  EXPECT_EQ(after.epoch(), 8u);
  EXPECT_EQ(after.Find(3)->state, ServerState::kAlive);
  int moved = 0;
  for (uint64_t key = 0; key < 20000; ++key) {
    if (before.Owner(key) != after.Owner(key)) {
      ASSERT_EQ(after.Owner(key), 3);
      ++moved;
    }
  }
  // ~1/4 of the keys; the 10M-key bounds are in ring_property_test.
  EXPECT_GT(moved, 4000);
  EXPECT_LT(moved, 6000);
}

TEST(ClusterMapTest, WithAndWithoutServer) {
  ASSERT_OK_AND_ASSIGN(ClusterMap map,
                       ClusterMap::Create(Spec(1, {Server(0), Server(1)})));
  ASSERT_OK_AND_ASSIGN(ClusterMap added, map.WithServer(Server(5)));
  EXPECT_EQ(added.epoch(), 2u);
  EXPECT_EQ(added.servers().size(), 3u);
  EXPECT_EQ(added.servers()[2].id, 5);

  ServerInfo moved = Server(5);
  moved.address = "other:9";
  ASSERT_OK_AND_ASSIGN(ClusterMap replaced, added.WithServer(moved));
  EXPECT_EQ(replaced.epoch(), 3u);
  EXPECT_EQ(replaced.Find(5)->address, "other:9");
  EXPECT_EQ(replaced.servers().size(), 3u);

  ASSERT_OK_AND_ASSIGN(ClusterMap removed, replaced.WithoutServer(1));
  EXPECT_EQ(removed.epoch(), 4u);
  EXPECT_EQ(removed.Find(1), nullptr);
  for (uint64_t key = 0; key < 5000; ++key) {
    if (replaced.Owner(key) != 1) {
      ASSERT_EQ(removed.Owner(key), replaced.Owner(key));
    } else {
      ASSERT_NE(removed.Owner(key), 1);
    }
  }
  EXPECT_THAT(map.WithoutServer(9), StatusIs(absl::StatusCode::kNotFound));
  EXPECT_THAT(map.WithState(9, ServerState::kDead),
              StatusIs(absl::StatusCode::kNotFound));
  // A failed transition reports the bad server and builds nothing.
  ServerInfo bad = Server(7);
  bad.weight = 0;
  EXPECT_THAT(map.WithServer(bad),
              StatusIs(absl::StatusCode::kInvalidArgument));
}

TEST(ClusterMapTest, RejectsBadSpecs) {
  auto expect_invalid = [](std::vector<ServerInfo> servers) {
    EXPECT_THAT(ClusterMap::Create(Spec(1, std::move(servers))),
                StatusIs(absl::StatusCode::kInvalidArgument));
  };
  expect_invalid({Server(-1)});
  expect_invalid({Server(1), Server(1)});
  for (const char* address : {"", "host", ":80", "host:", "host:0",
                              "host:65536", "host:x1", "a b:80", "a:1,b:2"}) {
    ServerInfo s = Server(0);
    s.address = address;
    expect_invalid({s});
  }
  ServerInfo heavy = Server(0);
  heavy.weight = -2.0f;
  expect_invalid({heavy});
  ServerInfo unknown_state = Server(0);
  unknown_state.state = static_cast<ServerState>(9);
  expect_invalid({unknown_state});

  ClusterMapSpec spec = Spec(1, {Server(0)});
  spec.ring.vnodes_per_server = 0;
  EXPECT_THAT(ClusterMap::Create(spec),
              StatusIs(absl::StatusCode::kInvalidArgument));
}

TEST(ClusterMapTest, FromServerList) {
  ASSERT_OK_AND_ASSIGN(ClusterMap map, ClusterMap::FromServerList(
                                           "h1:5000, h2:5001,[::1]:5002"));
  EXPECT_EQ(map.epoch(), 1u);
  ASSERT_EQ(map.servers().size(), 3u);
  EXPECT_EQ(map.servers()[0].id, 0);
  EXPECT_EQ(map.servers()[0].address, "h1:5000");
  EXPECT_EQ(map.servers()[1].address, "h2:5001");
  EXPECT_EQ(map.servers()[2].address, "[::1]:5002");
  EXPECT_EQ(map.servers()[2].state, ServerState::kAlive);
  EXPECT_EQ(map.ring().num_servers(), 3u);
  for (const char* list : {"", " ", "h1:1,,h2:2", "h1", "h1:1,h2"}) {
    EXPECT_THAT(ClusterMap::FromServerList(list),
                StatusIs(absl::StatusCode::kInvalidArgument))
        << list;
  }
}

TEST(ClusterMapTest, DebugStringAndStateNames) {
  ASSERT_OK_AND_ASSIGN(
      ClusterMap map,
      ClusterMap::Create(
          Spec(3, {Server(1, ServerState::kDead, 2.0f), Server(0)})));
  EXPECT_EQ(map.DebugString(),
            "epoch 3: 0@10.0.0.0:7000 alive w=1, 1@10.0.0.1:7000 dead w=2");
  for (ServerState s :
       {ServerState::kJoining, ServerState::kAlive, ServerState::kDead}) {
    EXPECT_EQ(ParseServerState(ServerStateName(s)), s);
  }
  EXPECT_EQ(ParseServerState("zombie"), std::nullopt);
  EXPECT_TRUE(OnRing(ServerState::kAlive));
  EXPECT_TRUE(OnRing(ServerState::kDead));
  EXPECT_FALSE(OnRing(ServerState::kJoining));
}

TEST(ParseServerListTest, ParsesHostPortLists) {
  ASSERT_OK_AND_ASSIGN(auto servers,
                       ParseServerList("h1:7000,10.0.0.2:7001,[::1]:7002"));
  EXPECT_EQ(servers, (std::vector<std::string>{"h1:7000", "10.0.0.2:7001",
                                               "[::1]:7002"}));
  for (const char* bad :
       {"", "h1", "h1:", ":7000", "h1:7000,", "h1:x", "h1:70000"}) {
    EXPECT_THAT(ParseServerList(bad),
                StatusIs(absl::StatusCode::kInvalidArgument))
        << bad;
  }
}

TEST(ParseServerListTest, RefusesReplicas) {
  ExpectInvalidArgument(ParseServerList("h1:1|h2:2,h3:3"),
                        "shard 0 names 2 replicas");
}

TEST(ParseReplicatedServerListTest, SplitsShardsAndReplicas) {
  ASSERT_OK_AND_ASSIGN(auto shards,
                       ParseReplicatedServerList("h1:1|h2:2, h3:3 | [::1]:4"));
  EXPECT_EQ(shards, (std::vector<std::vector<std::string>>{
                        {"h1:1", "h2:2"}, {"h3:3", "[::1]:4"}}));
  ASSERT_OK_AND_ASSIGN(shards, ParseReplicatedServerList("h1:1,h2:2"));
  EXPECT_EQ(shards,
            (std::vector<std::vector<std::string>>{{"h1:1"}, {"h2:2"}}));
  for (const char* bad : {"", " ", "h1:1|", "|h2:2", "h1:1||h2:2", "h1:1|,h2:2",
                          "h1:1,|h2:2", "h1:1,,h2:2"}) {
    ExpectInvalidArgument(ParseReplicatedServerList(bad), "");
  }
  ExpectInvalidArgument(ParseReplicatedServerList("h1:1|h2"),
                        "\"h2\" is not host:port");
}

TEST(ClusterMapTest, ReplicasAreAPropertyOfTheShard) {
  ASSERT_OK_AND_ASSIGN(ClusterMap map,
                       ClusterMap::FromServerList("h1:1|h2:2,h3:3|h4:4|h5:5"));
  ASSERT_EQ(map.servers().size(), 2u);
  EXPECT_EQ(map.ring().num_servers(), 2u);
  const ServerInfo& s0 = map.servers()[0];
  EXPECT_EQ(s0.id, 0);
  EXPECT_EQ(s0.address, "h1:1");
  EXPECT_EQ(s0.replicas, (std::vector<std::string>{"h2:2"}));
  ASSERT_EQ(s0.num_replicas(), 2u);
  EXPECT_EQ(s0.replica_address(0), "h1:1");
  EXPECT_EQ(s0.replica_address(1), "h2:2");
  const ServerInfo& s1 = map.servers()[1];
  EXPECT_EQ(s1.id, 1);
  ASSERT_EQ(s1.num_replicas(), 3u);
  EXPECT_EQ(s1.replica_address(2), "h5:5");
  EXPECT_TRUE(map.has_replicas());
  EXPECT_EQ(map.DebugString(),
            "epoch 1: 0@h1:1|h2:2 alive w=1, 1@h3:3|h4:4|h5:5 alive w=1");

  // The same shards without replicas route every key to the same shard id.
  ASSERT_OK_AND_ASSIGN(ClusterMap plain,
                       ClusterMap::FromServerList("h1:1,h3:3"));
  EXPECT_FALSE(plain.has_replicas());
  std::vector<int> counts(2, 0);
  for (uint64_t key = 0; key < 20000; ++key) {
    ASSERT_EQ(map.Owner(key), plain.Owner(key)) << key;
    ++counts[map.Owner(key)];
  }
  EXPECT_GT(counts[0], 8000);
  EXPECT_GT(counts[1], 8000);
  // Replicas take part in equality, and a map rebuilt from its spec keeps
  // them.
  EXPECT_NE(map, plain);
  ASSERT_OK_AND_ASSIGN(ClusterMap again, ClusterMap::Create(map.spec()));
  EXPECT_EQ(again, map);
  EXPECT_EQ(again.servers()[1].replicas,
            (std::vector<std::string>{"h4:4", "h5:5"}));
}

TEST(ClusterMapTest, RefusesAnAddressNamedTwice) {
  for (const char* list :
       {"h1:1|h1:1", "h1:1,h1:1", "h1:1|h2:2,h3:3|h2:2", "h1:1,h2:2|h1:1"}) {
    SCOPED_TRACE(list);
    ExpectInvalidArgument(ClusterMap::FromServerList(list), "is named twice");
  }
  ExpectInvalidArgument(ClusterMap::FromReplicatedAddresses({{"h1:1"}, {}}),
                        "shard 1 has no address");
  ServerInfo bad_replica = Server(0);
  bad_replica.replicas = {"h:0"};
  ExpectInvalidArgument(ClusterMap::Create(Spec(1, {bad_replica})), "server 0");
}

// What ps-server --servers and a "servers:" client both build: ids are the
// ranks, every key has one owner among them, and all of them get keys.
TEST(FromAddressesTest, RanksOwnEveryKeyUnderTheGivenEpoch) {
  ASSERT_OK_AND_ASSIGN(ClusterMap map, ClusterMap::FromAddresses(
                                           {"h:1", "h:2", "h:3"}, /*epoch=*/4));
  EXPECT_EQ(map.epoch(), 4u);
  std::vector<int> counts(3, 0);
  for (uint64_t key = 0; key < 30000; ++key) {
    const ServerId owner = map.Owner(key);
    ASSERT_GE(owner, 0);
    ASSERT_LT(owner, 3);
    EXPECT_TRUE(map.Owns(owner, key));
    ++counts[owner];
  }
  for (int c : counts) EXPECT_GT(c, 8000);
  ASSERT_OK_AND_ASSIGN(ClusterMap single, ClusterMap::FromAddresses({"h:1"}));
  EXPECT_EQ(single.epoch(), 1u);
  EXPECT_EQ(single.Owner(12345), 0);
  EXPECT_THAT(ClusterMap::FromAddresses({}),
              StatusIs(absl::StatusCode::kInvalidArgument));
  const ClusterMap alone = ClusterMap::Empty(7);
  EXPECT_EQ(alone.epoch(), 7u);
  EXPECT_TRUE(alone.servers().empty());
}

}  // namespace
}  // namespace psdb
