#include "rpc/wire/metrics_http.h"

#include <exception>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "prometheus/collectable.h"
#include "prometheus/exposer.h"
#include "rpc/wire/address.h"

namespace psdb::rpc {
absl::StatusOr<std::unique_ptr<MetricsHttpServer>> MetricsHttpServer::Start(
    absl::string_view host, int port) {
  if (host.empty()) {
    return absl::InvalidArgumentError("metrics host is empty");
  }
  if (port < 0 || port > 65535) {
    return absl::InvalidArgumentError(
        absl::StrCat("metrics port ", port, " out of range"));
  }
  const std::string bind = JoinHostPort(host, port);
  std::unique_ptr<prometheus::Exposer> exposer;
  try {
    // civetweb's CivetServer throws CivetException (a std::runtime_error)
    // when it cannot bind; nothing else here throws. Errors are values
    // beyond this line (STYLE 2).
    exposer = std::make_unique<prometheus::Exposer>(bind);
  } catch (const std::exception& e) {
    return absl::UnavailableError(
        absl::StrCat("cannot serve metrics on ", bind,
                     " (address in use or not local?): ", e.what()));
  }
  // With port 0 civetweb binds a free port and reports it here.
  const std::vector<int> ports = exposer->GetListeningPorts();
  if (ports.empty() || ports.front() <= 0) {
    return absl::UnavailableError(
        absl::StrCat("metrics endpoint on ", bind, " has no listening port"));
  }
  return std::unique_ptr<MetricsHttpServer>(new MetricsHttpServer(
      std::string(host), ports.front(), std::move(exposer)));
}

MetricsHttpServer::MetricsHttpServer(
    std::string host, int port, std::unique_ptr<prometheus::Exposer> exposer)
    : host_(std::move(host)), port_(port), exposer_(std::move(exposer)) {}

MetricsHttpServer::~MetricsHttpServer() = default;

void MetricsHttpServer::Register(
    std::weak_ptr<prometheus::Collectable> collectable) {
  exposer_->RegisterCollectable(collectable, std::string(kMetricsPath));
}

std::string MetricsHttpServer::address() const {
  return JoinHostPort(host_, port_);
}

}  // namespace psdb::rpc
