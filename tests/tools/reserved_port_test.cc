#include "tools/common/reserved_port.h"

#include <errno.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdint>

#include "gtest/gtest.h"

namespace psdb::tools {
namespace {

// A TCP socket bound to 127.0.0.1:port, SO_REUSEADDR first if asked, then
// listening if asked; -errno of the first step that failed, else its fd.
int Bind(int port, bool reuse_addr, bool listen_too) {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  const int one = 1;
  if (reuse_addr) setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(static_cast<uint16_t>(port));
  if (bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
      (listen_too && listen(fd, 1) != 0)) {
    const int error = errno;
    close(fd);
    return -error;
  }
  return fd;
}

TEST(ReservedPortTest, APlainBindOfAHeldPortFails) {
  const ReservedPort held;
  ASSERT_GT(held.port(), 0);
  EXPECT_EQ(Bind(held.port(), /*reuse_addr=*/false, false), -EADDRINUSE);
}

TEST(ReservedPortTest, OneServerMayListenThereAndOnlyOne) {
  const ReservedPort held;
  ASSERT_GT(held.port(), 0);
  const int server = Bind(held.port(), /*reuse_addr=*/true, true);
  ASSERT_GE(server, 0) << "errno " << -server;
  EXPECT_EQ(Bind(held.port(), /*reuse_addr=*/true, true), -EADDRINUSE);
  close(server);
}

TEST(ReservedPortTest, AHeldPortIsNotHeldTwice) {
  const ReservedPort first;
  ASSERT_GT(first.port(), 0);
  const ReservedPort again(ReservedPort::Scope::kLoopback, first.port());
  EXPECT_EQ(again.port(), 0);
  const ReservedPort other;
  EXPECT_GT(other.port(), 0);
  EXPECT_NE(other.port(), first.port());
}

TEST(ReservedPortTest, AGivenFreePortIsHeldAndFreedWithTheObject) {
  int port = 0;
  {
    const ReservedPort picked;
    port = picked.port();
  }
  ASSERT_GT(port, 0);
  {
    const ReservedPort held(ReservedPort::Scope::kLoopback, port);
    EXPECT_EQ(held.port(), port);
    EXPECT_EQ(Bind(port, /*reuse_addr=*/false, false), -EADDRINUSE);
  }
  const int fd = Bind(port, /*reuse_addr=*/false, false);
  EXPECT_GE(fd, 0) << "errno " << -fd;
  if (fd >= 0) close(fd);
}

TEST(ReservedPortTest, AnyAddressScopeHoldsTheLoopbackPortToo) {
  const ReservedPort held(ReservedPort::Scope::kAnyAddress);
  ASSERT_GT(held.port(), 0);
  EXPECT_EQ(Bind(held.port(), /*reuse_addr=*/false, false), -EADDRINUSE);
  const int server = Bind(held.port(), /*reuse_addr=*/true, true);
  EXPECT_GE(server, 0) << "errno " << -server;
  if (server >= 0) close(server);
}

TEST(ReservedPortTest, AnOutOfRangePortIsNotHeld) {
  EXPECT_EQ(ReservedPort(ReservedPort::Scope::kLoopback, 65536).port(), 0);
  EXPECT_EQ(ReservedPort(ReservedPort::Scope::kLoopback, -1).port(), 0);
}

}  // namespace
}  // namespace psdb::tools
