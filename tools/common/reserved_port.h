// ReservedPort: a TCP port held for a server that must be told its port
// before it listens (a ps-server registering its address with the
// scheduler, a test or ps-bench building a cluster's server list before
// its processes start). The port is bound, and never listened on, for the
// object's whole life. It is bound plainly, so it is one no other socket
// holds, and then marked SO_REUSEADDR: the servers psdb runs bind with
// SO_REUSEADDR too (gRPC, etcd, civetweb's metrics, redis) and may listen
// there, while a bind without it, and a second listener, fail with
// "address in use". So, unlike a port found free and let go, it cannot be
// taken in between; and since psdb's gRPC servers refuse SO_REUSEPORT
// (rpc/wire/address.h), two of them never share one.
//
// Thread-safety: one thread per object; port() may be read from any.
#ifndef PSDB_TOOLS_COMMON_RESERVED_PORT_H_
#define PSDB_TOOLS_COMMON_RESERVED_PORT_H_

namespace psdb::tools {

class ReservedPort {
 public:
  // Which addresses the port is held on: the server that takes it must
  // bind one of them.
  enum class Scope { kLoopback, kAnyAddress };

  // Holds `port`, or with 0 one the kernel picks; port() is 0 when it
  // could not be bound (another socket has it).
  explicit ReservedPort(Scope scope = Scope::kLoopback, int port = 0);
  ~ReservedPort();
  ReservedPort(const ReservedPort&) = delete;
  ReservedPort& operator=(const ReservedPort&) = delete;

  int port() const { return port_; }

 private:
  int fd_ = -1;
  int port_ = 0;
};

}  // namespace psdb::tools

#endif  // PSDB_TOOLS_COMMON_RESERVED_PORT_H_
