#include "tests/testing/health_check.h"

#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "grpcpp/generic/generic_stub.h"
#include "grpcpp/grpcpp.h"

namespace psdb::testing {

absl::StatusOr<int> HealthCheck(const std::shared_ptr<grpc::Channel>& channel,
                                absl::Duration timeout) {
  grpc::GenericStub generic(channel);
  grpc::Slice empty("");
  grpc::ByteBuffer request(&empty, 1);
  grpc::ByteBuffer response;
  grpc::ClientContext ctx;
  ctx.set_deadline(absl::ToChronoTime(absl::Now() + timeout));
  absl::Notification done;
  grpc::Status status;
  generic.UnaryCall(&ctx, "/grpc.health.v1.Health/Check", grpc::StubOptions(),
                    &request, &response, [&](grpc::Status s) {
                      status = std::move(s);
                      done.Notify();
                    });
  done.WaitForNotification();
  if (!status.ok()) {
    return absl::UnavailableError(
        absl::StrCat("Health/Check: ", status.error_message()));
  }
  std::vector<grpc::Slice> slices;
  if (!response.Dump(&slices).ok()) return absl::DataLossError("no answer");
  std::string bytes;
  for (const grpc::Slice& slice : slices) {
    bytes.append(reinterpret_cast<const char*>(slice.begin()), slice.size());
  }
  if (bytes.empty()) return 0;  // status UNKNOWN, the default
  if (bytes.size() != 2 || bytes[0] != '\x08') {
    return absl::DataLossError("not a HealthCheckResponse");
  }
  return static_cast<int>(bytes[1]);
}

}  // namespace psdb::testing
