// MetricsHttpServer: the one HTTP endpoint through which a psdb process
// (ps-server, ps-scheduler) exposes its metrics in the Prometheus text format
// at GET /metrics. It is prometheus-cpp's Exposer (civetweb) bound to
// host:port, with the bind failure turned into a Status and the chosen port
// reported; what it serves is whatever prometheus::Collectable objects are
// registered (a prometheus::Registry, or a collector that reads a component's
// own figures at scrape time).
//
//   PSDB_ASSIGN_OR_RETURN(auto http, MetricsHttpServer::Start("0.0.0.0", 0));
//   http->Register(registry);  // std::shared_ptr<prometheus::Registry>
//   std::cout << "metrics on " << http->address() << "\n";
//
// It lives in rpc/wire because both rpc/server and rpc/control serve it and
// wire is the lowest module both include; it knows nothing of either.
// Plain HTTP, no TLS and no authentication: bind it to an address only the
// monitoring network reaches (Kubernetes scrapes the pod IP). civetweb can
// serve TLS ("ssl_certificate", "ssl_cipher_list", passed through the
// Exposer's options), but Debian 12's civetweb 1.15 loads OpenSSL 1.1
// functions by name and, with OpenSSL 3, crashes on the first TLS
// connection (SSL_get_peer_certificate no longer exists); so psdb's TLS
// flags (--tls_crl, --tls_ciphers) do not apply here.
//
// Thread-safety: Register may be called from any thread; scrapes run on
// civetweb's threads (2) and call each collectable's Collect() concurrently
// with the rest of the process, so collectables must be thread-safe.
// Collectables are held by weak pointer: one that has gone away is skipped.
// Destroying the server stops serving and waits for running scrapes.
#ifndef PSDB_RPC_WIRE_METRICS_HTTP_H_
#define PSDB_RPC_WIRE_METRICS_HTTP_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace prometheus {
class Collectable;
class Exposer;
}  // namespace prometheus

namespace psdb::rpc {

// The metrics path every psdb process serves.
inline constexpr absl::string_view kMetricsPath = "/metrics";

class MetricsHttpServer {
 public:
  // Listens on host:port (port 0: a free one, see port()). UNAVAILABLE when
  // the address cannot be bound (in use, not local); INVALID_ARGUMENT for a
  // port outside 0..65535 or an empty host.
  static absl::StatusOr<std::unique_ptr<MetricsHttpServer>> Start(
      absl::string_view host, int port);
  ~MetricsHttpServer();
  MetricsHttpServer(const MetricsHttpServer&) = delete;
  MetricsHttpServer& operator=(const MetricsHttpServer&) = delete;

  // Adds `collectable` to what GET /metrics returns.
  void Register(std::weak_ptr<prometheus::Collectable> collectable);

  // The bound port (the chosen one when Start's port was 0).
  int port() const { return port_; }
  // host:port (IPv6 hosts in brackets).
  std::string address() const;

 private:
  MetricsHttpServer(std::string host, int port,
                    std::unique_ptr<prometheus::Exposer> exposer);

  const std::string host_;
  const int port_;
  const std::unique_ptr<prometheus::Exposer> exposer_;
};

}  // namespace psdb::rpc

#endif  // PSDB_RPC_WIRE_METRICS_HTTP_H_
