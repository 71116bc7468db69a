#include "collective/gloo_all_reducer.h"

#include <chrono>
#include <exception>
#include <utility>

#include "absl/strings/str_cat.h"
#include "collective/scheduler_store.h"
#include "gloo/allreduce.h"
#include "gloo/math.h"
#include "gloo/rendezvous/context.h"
#include "gloo/transport/tcp/device.h"

namespace psdb::collective {

GlooAllReducer::GlooAllReducer(std::shared_ptr<gloo::Context> context, int rank,
                               int world)
    : context_(std::move(context)), rank_(rank), world_(world) {}

GlooAllReducer::~GlooAllReducer() = default;

absl::StatusOr<std::unique_ptr<GlooAllReducer>> GlooAllReducer::Connect(
    rpc::SchedulerClient* scheduler, absl::string_view scope, int rank,
    int world, const std::string& host, absl::Duration timeout) {
  if (scheduler == nullptr || world < 1 || rank < 0 || rank >= world) {
    return absl::InvalidArgumentError(
        absl::StrCat("gloo: need a scheduler and 0 <= rank < world; got rank ",
                     rank, " of ", world));
  }
  SchedulerStore store(scheduler, absl::StrCat(scope, "/gloo"), timeout);
  // gloo throws on every failure (its enforce macros, transport errors).
  try {
    gloo::transport::tcp::attr attr;
    attr.hostname = host;
    std::shared_ptr<gloo::transport::Device> device =
        gloo::transport::tcp::CreateDevice(attr);
    auto context = std::make_shared<gloo::rendezvous::Context>(rank, world);
    context->setTimeout(std::chrono::milliseconds(
        std::max<int64_t>(1, absl::ToInt64Milliseconds(timeout))));
    context->connectFullMesh(store, device);
    return std::unique_ptr<GlooAllReducer>(
        new GlooAllReducer(std::move(context), rank, world));
  } catch (const std::exception& e) {
    return absl::UnavailableError(absl::StrCat(
        "gloo: rank ", rank, " of ", world, " could not join the group under '",
        store.scope(), "': ", e.what()));
  }
}

absl::Status GlooAllReducer::AllReduceSum(absl::Span<float> data) {
  if (data.empty() || world_ == 1) return absl::OkStatus();
  try {
    gloo::AllreduceOptions opts(context_);
    opts.setOutput(data.data(), data.size());
    opts.setReduceFunction(
        static_cast<void (*)(void*, const void*, const void*, size_t)>(
            &gloo::sum<float>));
    opts.setTag(tag_++);
    gloo::allreduce(opts);
  } catch (const std::exception& e) {
    return absl::UnavailableError(absl::StrCat(
        "gloo: allreduce of ", data.size(), " floats failed on rank ", rank_,
        " of ", world_, ": ", e.what()));
  }
  return absl::OkStatus();
}

std::string GlooAllReducer::Describe() const {
  return absl::StrCat("gloo (tcp, ", world_, " ranks)");
}

}  // namespace psdb::collective
