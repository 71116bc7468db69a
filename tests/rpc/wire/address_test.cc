#include "rpc/wire/address.h"

#include <grpcpp/grpcpp.h>

#include <memory>

#include "gtest/gtest.h"
#include "rpc/wire/psdb.grpc.pb.h"
#include "tools/common/reserved_port.h"

namespace psdb::rpc {
namespace {

using ::psdb::tools::ReservedPort;

TEST(JoinHostPortTest, BracketsIpv6OnlyOnce) {
  EXPECT_EQ(JoinHostPort("127.0.0.1", 7100), "127.0.0.1:7100");
  EXPECT_EQ(JoinHostPort("psdb-scheduler", 7100), "psdb-scheduler:7100");
  EXPECT_EQ(JoinHostPort("::1", 7100), "[::1]:7100");
  EXPECT_EQ(JoinHostPort("[::1]", 7100), "[::1]:7100");
  EXPECT_EQ(JoinHostPort("0.0.0.0", 0), "0.0.0.0:0");
}

// A gRPC server on 127.0.0.1:port, its methods all unimplemented;
// *selected is the port it listens on, 0 when it could not bind.
std::unique_ptr<grpc::Server> Serve(int port, bool exclusive, int* selected) {
  static v1::SchedulerService::Service* const unimplemented =
      new v1::SchedulerService::Service();
  grpc::ServerBuilder builder;
  builder.RegisterService(unimplemented);
  if (exclusive) {
    ListenExclusively("127.0.0.1", port, grpc::InsecureServerCredentials(),
                      &builder, selected);
  } else {
    builder.AddListeningPort(JoinHostPort("127.0.0.1", port),
                             grpc::InsecureServerCredentials(), selected);
  }
  return builder.BuildAndStart();
}

// What ListenExclusively is for: gRPC's own default lets a second server
// start on a port one already serves (SO_REUSEPORT), and the two would
// split its connections.
TEST(ListenExclusivelyTest, GrpcsDefaultWouldShareAPort) {
  int first_port = 0;
  auto first = Serve(0, /*exclusive=*/false, &first_port);
  ASSERT_NE(first, nullptr);
  ASSERT_GT(first_port, 0);
  int second_port = 0;
  auto second = Serve(first_port, /*exclusive=*/false, &second_port);
  EXPECT_NE(second, nullptr);
  EXPECT_EQ(second_port, first_port);
  if (second != nullptr) second->Shutdown();
  first->Shutdown();
}

TEST(ListenExclusivelyTest, ASecondServerOnThePortFailsToStart) {
  int first_port = 0;
  auto first = Serve(0, /*exclusive=*/true, &first_port);
  ASSERT_NE(first, nullptr);
  ASSERT_GT(first_port, 0);
  for (bool exclusive : {true, false}) {
    int second_port = 0;
    auto second = Serve(first_port, exclusive, &second_port);
    EXPECT_EQ(second_port, 0) << (exclusive ? "exclusive" : "gRPC's default");
    if (second != nullptr) second->Shutdown();
  }
  first->Shutdown();
}

// A port a ReservedPort holds is the server's to take, and only once.
TEST(ListenExclusivelyTest, TakesAReservedPort) {
  const ReservedPort held;
  ASSERT_GT(held.port(), 0);
  int port = 0;
  auto server = Serve(held.port(), /*exclusive=*/true, &port);
  ASSERT_NE(server, nullptr);
  EXPECT_EQ(port, held.port());
  int again = 0;
  auto second = Serve(held.port(), /*exclusive=*/true, &again);
  EXPECT_EQ(again, 0);
  if (second != nullptr) second->Shutdown();
  server->Shutdown();
}

}  // namespace
}  // namespace psdb::rpc
