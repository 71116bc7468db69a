#include "rpc/control/admin_membership.h"

#include <chrono>
#include <memory>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/synchronization/mutex.h"
#include "grpcpp/grpcpp.h"
#include "rpc/wire/convert.h"
#include "rpc/wire/psdb.grpc.pb.h"
#include "util/status_macros.h"

namespace psdb::rpc {

std::string FormatMigrationProgress(const v1::MigrationStatus& status) {
  std::string line = absl::StrCat(
      status.kind(), "-server ", status.node_id(), ": ", status.phase(), " ",
      status.rows_moved(), "/", status.rows_to_move(), " rows moved");
  if (status.rows_to_move() > 0) {
    absl::StrAppend(
        &line, " (",
        static_cast<int>(100.0 * static_cast<double>(status.rows_moved()) /
                         static_cast<double>(status.rows_to_move())),
        "%)");
  }
  return line;
}

std::string FormatMigrationDone(const v1::MigrationStatus& status,
                                absl::Duration took) {
  return absl::StrFormat(
      "%s-server %s: done, epoch %d -> %d, %d rows moved in %.1f s",
      status.kind(), status.node_id(), status.from_epoch(), status.to_epoch(),
      status.rows_moved(), absl::ToDoubleSeconds(took));
}

absl::StatusOr<v1::MigrationStatus> AdminMembershipChange(
    const AdminMembershipOptions& options,
    const std::function<void(absl::string_view)>& progress) {
  const std::string verb =
      absl::StrCat(MembershipKindName(options.kind), "-server");
  if (options.scheduler_address.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat(verb, ": --scheduler=HOST:PORT is required"));
  }
  if (options.node_id.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat(verb, ": --node_id is required"));
  }
  if (options.batch_rows < 0 || options.max_rows_per_second < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        verb, ": --batch_rows and --max_rows_per_second must be >= 0"));
  }
  PSDB_ASSIGN_OR_RETURN(std::shared_ptr<grpc::Channel> channel,
                        MakeChannel(options.tls, options.scheduler_address));
  std::unique_ptr<v1::SchedulerService::Stub> stub =
      v1::SchedulerService::NewStub(channel);

  absl::Mutex mu;
  bool done = false;
  absl::Status result;
  v1::MembershipChangeResponse resp;
  grpc::ClientContext ctx;
  ctx.set_deadline(absl::ToChronoTime(absl::Now() + options.timeout));
  std::thread call([&] {
    grpc::Status s;
    if (options.kind == MembershipChange::Kind::kAdd) {
      v1::AddServerRequest req;
      req.set_node_id(options.node_id);
      req.set_batch_rows(options.batch_rows);
      req.set_max_rows_per_second(options.max_rows_per_second);
      s = stub->AddServer(&ctx, req, &resp);
    } else {
      v1::DrainServerRequest req;
      req.set_node_id(options.node_id);
      req.set_batch_rows(options.batch_rows);
      req.set_max_rows_per_second(options.max_rows_per_second);
      s = stub->DrainServer(&ctx, req, &resp);
    }
    absl::MutexLock lock(&mu);
    result = FromGrpcStatus(s);
    done = true;
  });
  {
    absl::MutexLock lock(&mu);
    while (!mu.AwaitWithTimeout(absl::Condition(&done),
                                options.progress_interval)) {
      mu.Unlock();
      grpc::ClientContext status_ctx;
      status_ctx.set_deadline(
          absl::ToChronoTime(absl::Now() + absl::Seconds(5)));
      v1::SchedulerStatus status;
      const grpc::Status s = stub->GetStatus(
          &status_ctx, v1::GetSchedulerStatusRequest(), &status);
      const v1::MigrationStatus& m = status.migration();
      // Only a running migration of this change (the last one may be an
      // earlier, finished one).
      if (s.ok() && progress && m.node_id() == options.node_id &&
          m.kind() == MembershipKindName(options.kind) && m.phase() != "done" &&
          m.phase() != "aborted" && !m.phase().empty()) {
        progress(FormatMigrationProgress(m));
      }
      mu.Lock();
    }
  }
  call.join();
  if (!result.ok()) return result;
  return resp.migration();
}

}  // namespace psdb::rpc
