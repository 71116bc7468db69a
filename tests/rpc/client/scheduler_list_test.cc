// A cluster reached through a list of schedulers whose first address is
// dead: a real ps-server joins with PS_SCHED_ADDRESSES, a client opens
// "scheduler:DEAD,LIVE" (psdb/client_url.h) and uses the table.
#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "psdb/client_url.h"
#include "rpc/control/scheduler.h"
#include "tests/testing/child_process.h"
#include "tests/testing/test_util.h"

namespace psdb::rpc {
namespace {

using ::psdb::testing::ChildOptions;
using ::psdb::testing::ChildProcess;
using ::psdb::testing::ClusterServerOptions;
using ::psdb::testing::ReservedPort;
using ::psdb::testing::ScratchDir;

TEST(SchedulerListTest, ServerAndClientReachTheLiveSchedulerOfTheList) {
  SchedulerOptions so;
  so.server_num = 1;
  so.worker_num = 0;
  so.heartbeat_interval = absl::Milliseconds(100);
  so.heartbeat_timeout = absl::Seconds(10);
  so.log = [](absl::string_view) {};
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<SchedulerServer> sched,
                       SchedulerServer::Start(so));
  const ReservedPort dead;  // the list's first: nothing listens on it
  const std::string list =
      absl::StrCat("127.0.0.1:", dead.port(), ",", sched->address());

  ScratchDir dir;
  ChildOptions server = ClusterServerOptions(0, "server-0", dir.Sub("s0"));
  server.env = {{"PS_SCHED_ADDRESSES", list}, {"PS_NODE_ID", "server-0"}};
  server.args.push_back("--port=0");
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<ChildProcess> ps,
                       ChildProcess::Start(server));

  ASSERT_OK_AND_ASSIGN(std::unique_ptr<ParameterClient> client,
                       OpenParameterClient(absl::StrCat("scheduler:", list)));
  TableSpec spec;
  spec.name = "t";
  spec.dim = 2;
  ASSERT_OK(client->CreateTable(spec));
  ASSERT_OK_AND_ASSIGN(std::vector<TableSpec> tables, client->ListTables());
  ASSERT_EQ(tables.size(), 1u);
  EXPECT_EQ(tables[0].name, "t");
  const v1::ClusterMap map = *sched->backend()->CurrentMap();
  ASSERT_EQ(map.servers_size(), 1);
  EXPECT_EQ(map.servers(0).node_id(), "server-0");
  EXPECT_EQ(map.servers(0).address(), ps->ready_value());

  EXPECT_THAT(OpenParameterClient("scheduler:127.0.0.1:1,nope"),
              StatusIs(absl::StatusCode::kInvalidArgument));
}

}  // namespace
}  // namespace psdb::rpc
