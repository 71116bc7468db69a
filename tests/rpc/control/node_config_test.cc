#include "rpc/control/node_config.h"

#include "absl/strings/match.h"
#include "tests/testing/test_util.h"

namespace psdb::rpc {
namespace {

using ::testing::HasSubstr;

TEST(NodeConfigTest, SchedulerFromEnvironment) {
  SettingMap env = {{"PS_SERVER_NUM", "2"},
                    {"PS_WORKER_NUM", "3"},
                    {"PS_SCHED_PORT", "7100"}};
  ASSERT_OK_AND_ASSIGN(NodeConfig c,
                       ResolveNodeConfig(env, {}, NodeRoleKind::kScheduler));
  EXPECT_EQ(c.role, NodeRoleKind::kScheduler);
  EXPECT_EQ(c.server_num, 2);
  EXPECT_EQ(c.worker_num, 3);
  EXPECT_EQ(c.sched_host, "127.0.0.1");
  EXPECT_EQ(c.sched_port, 7100);
  EXPECT_EQ(c.SchedulerAddress(), "127.0.0.1:7100");
  EXPECT_FALSE(c.enable_recovery);
  EXPECT_TRUE(c.node_id_generated);
  EXPECT_TRUE(absl::StartsWith(c.node_id, "scheduler-")) << c.node_id;
}

TEST(NodeConfigTest, FlagsWinOverEnvironment) {
  SettingMap env = {{"PS_ROLE", "worker"},  {"PS_SCHED_HOST", "a"},
                    {"PS_SCHED_PORT", "1"}, {"PS_NODE_ID", "env-id"},
                    {"PS_WORKER_NUM", "9"}, {"PS_SERVER_NUM", "9"}};
  SettingMap flags = {{"PS_SCHED_HOST", "::1"},
                      {"PS_SCHED_PORT", "7200"},
                      {"PS_NODE_ID", "w0"},
                      {"PS_WORKER_NUM", "0"},
                      {"PS_SERVER_NUM", ""}};  // empty flag = not given
  ASSERT_OK_AND_ASSIGN(NodeConfig c,
                       ResolveNodeConfig(env, flags, std::nullopt));
  EXPECT_EQ(c.role, NodeRoleKind::kWorker);
  EXPECT_EQ(c.SchedulerAddress(), "[::1]:7200");
  EXPECT_EQ(c.node_id, "w0");
  EXPECT_FALSE(c.node_id_generated);
  EXPECT_EQ(c.worker_num, 0);
  EXPECT_EQ(c.server_num, 9);
}

TEST(NodeConfigTest, MissingRoleIsAnError) {
  auto c = ResolveNodeConfig({}, {}, std::nullopt);
  EXPECT_THAT(c, StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(std::string(c.status().message()),
              HasSubstr("PS_ROLE (--role) is required"));
}

TEST(NodeConfigTest, RoleContradictingTheBinaryIsAnError) {
  auto c =
      ResolveNodeConfig({{"PS_ROLE", "worker"}}, {}, NodeRoleKind::kServer);
  EXPECT_THAT(c, StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(std::string(c.status().message()),
              HasSubstr("PS_ROLE=worker contradicts this binary, which is the "
                        "server"));
  // The flag's spelling is named when the flag set it.
  auto f =
      ResolveNodeConfig({}, {{"PS_ROLE", "scheduler"}}, NodeRoleKind::kServer);
  EXPECT_THAT(std::string(f.status().message()), HasSubstr("--role=scheduler"));
}

TEST(NodeConfigTest, SchedulerNeedsCountsAndPort) {
  auto no_servers =
      ResolveNodeConfig({{"PS_WORKER_NUM", "1"}, {"PS_SCHED_PORT", "1"}}, {},
                        NodeRoleKind::kScheduler);
  EXPECT_THAT(std::string(no_servers.status().message()),
              HasSubstr("PS_SERVER_NUM (--server_num)"));
  auto no_workers =
      ResolveNodeConfig({{"PS_SERVER_NUM", "1"}, {"PS_SCHED_PORT", "1"}}, {},
                        NodeRoleKind::kScheduler);
  EXPECT_THAT(std::string(no_workers.status().message()),
              HasSubstr("PS_WORKER_NUM (--worker_num)"));
  auto no_port =
      ResolveNodeConfig({{"PS_SERVER_NUM", "1"}, {"PS_WORKER_NUM", "1"}}, {},
                        NodeRoleKind::kScheduler);
  EXPECT_THAT(std::string(no_port.status().message()),
              HasSubstr("PS_SCHED_PORT (--sched_port)"));
}

TEST(NodeConfigTest, BadNumbersAreNamed) {
  const SettingMap base = {{"PS_WORKER_NUM", "1"}, {"PS_SCHED_PORT", "7100"}};
  for (const char* bad : {"0", "-1", "two", "2x", "99999999999"}) {
    SettingMap env = base;
    env["PS_SERVER_NUM"] = bad;
    auto c = ResolveNodeConfig(env, {}, NodeRoleKind::kScheduler);
    EXPECT_THAT(c, StatusIs(absl::StatusCode::kInvalidArgument)) << bad;
    EXPECT_THAT(std::string(c.status().message()),
                HasSubstr(std::string("PS_SERVER_NUM=") + bad));
  }
  SettingMap env = base;
  env["PS_SERVER_NUM"] = "1";
  env["PS_SCHED_PORT"] = "70000";
  EXPECT_THAT(std::string(ResolveNodeConfig(env, {}, NodeRoleKind::kScheduler)
                              .status()
                              .message()),
              HasSubstr("PS_SCHED_PORT=70000: expected an integer in [1, "
                        "65535]"));
  env["PS_SCHED_PORT"] = "7100";
  env["PS_ENABLE_RECOVERY"] = "maybe";
  EXPECT_THAT(std::string(ResolveNodeConfig(env, {}, NodeRoleKind::kScheduler)
                              .status()
                              .message()),
              HasSubstr("PS_ENABLE_RECOVERY=maybe"));
}

TEST(NodeConfigTest, WorkerCountZeroIsAServingOnlyCluster) {
  ASSERT_OK_AND_ASSIGN(NodeConfig c,
                       ResolveNodeConfig({{"PS_SERVER_NUM", "1"},
                                          {"PS_WORKER_NUM", "0"},
                                          {"PS_SCHED_PORT", "7100"}},
                                         {}, NodeRoleKind::kScheduler));
  EXPECT_EQ(c.worker_num, 0);
}

TEST(NodeConfigTest, RecoveryNeedsAPath) {
  SettingMap env = {{"PS_SERVER_NUM", "1"},
                    {"PS_WORKER_NUM", "1"},
                    {"PS_SCHED_PORT", "7100"},
                    {"PS_ENABLE_RECOVERY", "1"}};
  auto c = ResolveNodeConfig(env, {}, NodeRoleKind::kScheduler);
  EXPECT_THAT(std::string(c.status().message()),
              HasSubstr("PS_RECOVERY_PATH (--recovery_path)"));
  env["PS_RECOVERY_PATH"] = "/tmp/r";
  ASSERT_OK_AND_ASSIGN(NodeConfig ok,
                       ResolveNodeConfig(env, {}, NodeRoleKind::kScheduler));
  EXPECT_TRUE(ok.enable_recovery);
  EXPECT_EQ(ok.recovery_path, "/tmp/r");
}

TEST(NodeConfigTest, ServerNeedsBothOrNeitherSchedulerSetting) {
  ASSERT_OK_AND_ASSIGN(NodeConfig lone,
                       ResolveNodeConfig({}, {}, NodeRoleKind::kServer));
  EXPECT_FALSE(lone.has_scheduler());
  auto half =
      ResolveNodeConfig({{"PS_SCHED_HOST", "h"}}, {}, NodeRoleKind::kServer);
  EXPECT_THAT(half, StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(std::string(half.status().message()),
              HasSubstr("got PS_SCHED_HOST=h and no port"));
}

TEST(NodeConfigTest, WorkerNeedsAScheduler) {
  auto c = ResolveNodeConfig({{"PS_ROLE", "worker"}}, {}, std::nullopt);
  EXPECT_THAT(c, StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(std::string(c.status().message()),
              HasSubstr("a worker needs both PS_SCHED_HOST"));
  EXPECT_THAT(std::string(c.status().message()),
              HasSubstr("(or PS_SCHED_ADDRESSES (--sched_addresses))"));
}

TEST(NodeConfigTest, SeveralSchedulersFromTheAddressList) {
  for (NodeRoleKind role : {NodeRoleKind::kServer, NodeRoleKind::kWorker}) {
    ASSERT_OK_AND_ASSIGN(
        NodeConfig c,
        ResolveNodeConfig({{"PS_SCHED_ADDRESSES", "10.0.0.1:7100, [::1]:7101"}},
                          {}, role));
    EXPECT_TRUE(c.has_scheduler());
    EXPECT_THAT(c.sched_addresses,
                ::testing::ElementsAre("10.0.0.1:7100", "[::1]:7101"));
    EXPECT_EQ(c.SchedulerAddress(), "10.0.0.1:7100,[::1]:7101");
    EXPECT_EQ(c.sched_port, 0);
  }
  // The flag wins over the variable.
  ASSERT_OK_AND_ASSIGN(NodeConfig flag,
                       ResolveNodeConfig({{"PS_SCHED_ADDRESSES", "a:1,b:2"}},
                                         {{"PS_SCHED_ADDRESSES", "c:3"}},
                                         NodeRoleKind::kWorker));
  EXPECT_EQ(flag.SchedulerAddress(), "c:3");
}

TEST(NodeConfigTest, AddressListAndHostPortTogetherAreAnError) {
  auto both = ResolveNodeConfig(
      {{"PS_SCHED_ADDRESSES", "a:1,b:2"}, {"PS_SCHED_HOST", "a"}},
      {{"PS_SCHED_PORT", "1"}}, NodeRoleKind::kServer);
  EXPECT_THAT(both, StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(std::string(both.status().message()),
              HasSubstr("a server takes PS_SCHED_ADDRESSES "
                        "(--sched_addresses) or PS_SCHED_HOST (--sched_host) "
                        "and PS_SCHED_PORT (--sched_port), not both; got "
                        "PS_SCHED_ADDRESSES=a:1,b:2 and PS_SCHED_HOST=a"));
  auto port_only = ResolveNodeConfig(
      {}, {{"PS_SCHED_ADDRESSES", "a:1"}, {"PS_SCHED_PORT", "9"}},
      NodeRoleKind::kWorker);
  EXPECT_THAT(std::string(port_only.status().message()),
              HasSubstr("got --sched_addresses=a:1 and --sched_port=9"));
  // The scheduler binds host:port and ignores a list given to everyone.
  ASSERT_OK_AND_ASSIGN(NodeConfig sched,
                       ResolveNodeConfig({{"PS_SCHED_ADDRESSES", "a:1,b:2"},
                                          {"PS_SCHED_PORT", "7100"},
                                          {"PS_SERVER_NUM", "1"},
                                          {"PS_WORKER_NUM", "0"}},
                                         {}, NodeRoleKind::kScheduler));
  EXPECT_EQ(sched.sched_port, 7100);
}

TEST(NodeConfigTest, EveryListedSchedulerIsHostPort) {
  for (const char* bad : {"a:1,,b:2", "a:1,b", "a:1,b:0", "a:1,b:70000",
                          "a:1,:2", "a:1|b:2", ","}) {
    auto c = ResolveNodeConfig({{"PS_SCHED_ADDRESSES", bad}}, {},
                               NodeRoleKind::kWorker);
    EXPECT_THAT(c, StatusIs(absl::StatusCode::kInvalidArgument)) << bad;
    EXPECT_THAT(std::string(c.status().message()),
                HasSubstr(std::string("PS_SCHED_ADDRESSES=") + bad))
        << bad;
  }
}

TEST(NodeConfigTest, NodeIdsAreValidated) {
  EXPECT_OK(ValidateNodeId("server-0.a:b_c"));
  EXPECT_THAT(ValidateNodeId(""), StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(ValidateNodeId("a b"),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(ValidateNodeId(std::string(129, 'a')),
              StatusIs(absl::StatusCode::kInvalidArgument));
  auto c =
      ResolveNodeConfig({{"PS_NODE_ID", "bad id"}}, {}, NodeRoleKind::kServer);
  EXPECT_THAT(std::string(c.status().message()),
              HasSubstr("PS_NODE_ID=bad id"));
}

}  // namespace
}  // namespace psdb::rpc
