// Test helper: asks a gRPC server's standard health service
// (grpc.health.v1.Health/Check with service "") how it is, as Kubernetes'
// gRPC probes and grpc_health_probe do. Through the generic stub: Debian's
// gRPC ships no generated health stub. The request HealthCheckRequest{
// service: ""} is no bytes; the answer HealthCheckResponse{status: S} is
// field 1 as a varint, "\x08" S.
//
// Thread-safety: a plain function; each call makes its own call context.
#ifndef PSDB_TESTS_TESTING_HEALTH_CHECK_H_
#define PSDB_TESTS_TESTING_HEALTH_CHECK_H_

#include <memory>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "grpcpp/channel.h"

namespace psdb::testing {

// The answer's status: 0 UNKNOWN, 1 SERVING, 2 NOT_SERVING. Unavailable
// naming the call's error if the call fails within `timeout`; DataLoss if
// the answer is not a HealthCheckResponse.
absl::StatusOr<int> HealthCheck(const std::shared_ptr<grpc::Channel>& channel,
                                absl::Duration timeout = absl::Seconds(30));

}  // namespace psdb::testing

#endif  // PSDB_TESTS_TESTING_HEALTH_CHECK_H_
