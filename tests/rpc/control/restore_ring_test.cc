// ps-server --restore_from onto a cluster of another size, on real
// processes: 3 ps-servers (a static --servers list) train a table and write
// one cluster checkpoint; 2 ps-servers, and then 5, restore from it, each
// gathering the rows its ring gives it (store/checkpoint_restore.h); a
// client of each new cluster reads every row, optimizer state and header
// exactly as the 3 servers held them, and further pushes leave them
// bit-identical to those of 3 servers restored from the same checkpoint.
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "rpc/client/client_url.h"
#include "rpc/control/cluster_checkpoint.h"
#include "shard/cluster_map.h"
#include "store/table_spec.h"
#include "tests/testing/child_process.h"
#include "tests/testing/test_util.h"

namespace psdb::rpc {
namespace {

using ::psdb::testing::ChildProcess;
using ::psdb::testing::ReservedPort;
using ::psdb::testing::ScratchDir;
using ::psdb::testing::StartPsServer;
using ::testing::HasSubstr;

struct StaticCluster {
  std::vector<std::string> addresses;
  std::vector<std::unique_ptr<ChildProcess>> servers;
  std::unique_ptr<ParameterClient> client;
};

// n ps-servers on loopback knowing each other (--servers, --shard_id),
// each with `extra` arguments.
void Start(const ScratchDir& dir, const std::string& name, int n,
           const std::vector<std::string>& extra, StaticCluster* c) {
  std::vector<std::unique_ptr<ReservedPort>> ports;
  for (int i = 0; i < n; ++i) {
    ports.push_back(std::make_unique<ReservedPort>());
    c->addresses.push_back(absl::StrCat("127.0.0.1:", ports.back()->port()));
  }
  const std::string list = absl::StrJoin(c->addresses, ",");
  for (int i = 0; i < n; ++i) {
    std::vector<std::string> args = {
        absl::StrCat("--data_dir=", dir.Sub(absl::StrCat(name, i))),
        absl::StrCat("--port=", ports[i]->port()),
        absl::StrCat("--servers=", list), absl::StrCat("--shard_id=", i),
        "--threads=2"};
    args.insert(args.end(), extra.begin(), extra.end());
    ASSERT_OK_AND_ASSIGN(auto server, StartPsServer(args));
    c->servers.push_back(std::move(server));
  }
  ASSERT_OK_AND_ASSIGN(c->client,
                       OpenParameterClient(absl::StrCat("servers:", list)));
}

TEST(RestoreRingTest, ThreeShardsRestoreOntoTwoAndOntoFiveServers) {
  ScratchDir dir;
  StaticCluster three;
  ASSERT_NO_FATAL_FAILURE(Start(dir, "three-", 3, {}, &three));
  TableSpec spec;
  spec.name = "emb";
  spec.dim = 4;
  spec.optimizer.kind = optim::OptimizerKind::kAdagrad;
  spec.optimizer.learning_rate = 0.1f;
  ASSERT_OK(three.client->CreateTable(spec));
  std::vector<uint64_t> keys;
  for (uint64_t k = 0; k < 500; ++k) keys.push_back(k * 7919 + 3);
  auto push = [&](ParameterClient* client, int step) {
    std::vector<float> grads(keys.size() * spec.dim);
    for (size_t i = 0; i < grads.size(); ++i) {
      grads[i] = 0.01f * static_cast<float>((i * 7 + step) % 13) - 0.05f;
    }
    PushOptions p;
    p.step = step;
    return client->Push("emb", keys, grads, p);
  };
  for (int step = 1; step <= 3; ++step)
    ASSERT_OK(push(three.client.get(), step));
  RowBatch before;
  ASSERT_OK(three.client->PullRows("emb", keys, &before));
  // The checkpoint holds the rows as `before` shows them; pulling them
  // again below counts one more sighting each.
  RowBatch expected = before;
  for (RowHeader& h : expected.headers) ++h.frequency;
  ASSERT_OK_AND_ASSIGN(ClusterMap map,
                       ClusterMap::FromAddresses(three.addresses));
  ASSERT_OK_AND_ASSIGN(ClusterCheckpointInfo ckpt,
                       WriteClusterCheckpoint(map, dir.Sub("ckpt"), 3));

  for (int m : {2, 5}) {
    SCOPED_TRACE(absl::StrCat(m, " servers"));
    StaticCluster next;
    ASSERT_NO_FATAL_FAILURE(Start(dir, absl::StrCat("m", m, "-"), m,
                                  {absl::StrCat("--restore_from=", ckpt.path)},
                                  &next));
    for (const auto& s : next.servers) {
      EXPECT_THAT(s->Stderr(), HasSubstr("(cut for another ring)"));
    }
    RowBatch after;
    ASSERT_OK(next.client->PullRows("emb", keys, &after));
    EXPECT_EQ(after.values, before.values);
    EXPECT_EQ(after.state, before.state);
    EXPECT_EQ(after.headers, expected.headers);
    // Every row was found, none created by PullRows' get-or-create.
    ASSERT_OK_AND_ASSIGN(StoreStats stats, next.client->Stats());
    uint64_t created = 0;
    for (const TableStats& t : stats.tables) created += t.created;
    EXPECT_EQ(created, 0u);
    // Training goes on from there as if nothing had moved: the same pushes
    // on the 2 or 5 servers and on a fresh 3-server restore of the same
    // checkpoint give bit-identical rows.
    StaticCluster same;
    ASSERT_NO_FATAL_FAILURE(Start(dir, absl::StrCat("same", m, "-"), 3,
                                  {absl::StrCat("--restore_from=", ckpt.path)},
                                  &same));
    for (int step = 4; step <= 5; ++step) {
      ASSERT_OK(push(next.client.get(), step));
      ASSERT_OK(push(same.client.get(), step));
    }
    RowBatch moved, stayed;
    ASSERT_OK(next.client->PullRows("emb", keys, &moved));
    ASSERT_OK(same.client->PullRows("emb", keys, &stayed));
    EXPECT_EQ(moved.values, stayed.values);
    EXPECT_EQ(moved.state, stayed.state);
    EXPECT_NE(moved.values, before.values);  // steps 4 and 5 did train
  }
}

}  // namespace
}  // namespace psdb::rpc
