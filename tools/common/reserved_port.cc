#include "tools/common/reserved_port.h"

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdint>

namespace psdb::tools {

ReservedPort::ReservedPort(Scope scope, int port) {
  fd_ = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd_ < 0) return;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr =
      htonl(scope == Scope::kLoopback ? INADDR_LOOPBACK : INADDR_ANY);
  addr.sin_port = htons(static_cast<uint16_t>(port));
  socklen_t len = sizeof(addr);
  // Bound before SO_REUSEADDR is set: a port another socket holds, even
  // with SO_REUSEADDR, is refused here rather than shared.
  const int one = 1;
  if (port < 0 || port > 65535 ||
      bind(fd_, reinterpret_cast<sockaddr*>(&addr), len) != 0 ||
      setsockopt(fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) != 0 ||
      getsockname(fd_, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    close(fd_);
    fd_ = -1;
    return;
  }
  port_ = ntohs(addr.sin_port);
}

ReservedPort::~ReservedPort() {
  if (fd_ >= 0) close(fd_);
}

}  // namespace psdb::tools
