#include "rpc/control/scheduler_client.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <random>
#include <thread>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/synchronization/mutex.h"
#include "grpcpp/grpcpp.h"
#include "rpc/wire/cluster_map_proto.h"
#include "rpc/wire/convert.h"
#include "rpc/wire/psdb.grpc.pb.h"
#include "util/status_macros.h"

namespace psdb::rpc {
namespace {

// Backoff after a full round of addresses without an answer (and between
// attempts to reopen the map watch).
constexpr absl::Duration kFirstBackoff = absl::Milliseconds(50);
constexpr absl::Duration kMaxBackoff = absl::Seconds(1);

uint64_t RandomIncarnation() {
  std::random_device rd;
  std::mt19937_64 gen((static_cast<uint64_t>(rd()) << 32) ^ rd());
  uint64_t v = 0;
  while (v == 0) v = gen();
  return v;
}

// What a call does with UNAVAILABLE when there is only one address (with
// several it always moves on to the next).
struct SinglePolicy {
  // Wait for the channel to connect (the scheduler may be starting).
  bool wait_for_ready = false;
  // Re-send with backoff until the deadline.
  bool retry = false;
};

}  // namespace

class SchedulerClient::Impl {
 public:
  using Stub = v1::SchedulerService::Stub;

  Impl(const SchedulerClientOptions& options,
       std::vector<std::string> addresses,
       std::vector<std::unique_ptr<Stub>> stubs)
      : options(options),
        addresses(std::move(addresses)),
        stubs(std::move(stubs)),
        incarnation(RandomIncarnation()) {}

  size_t Active() const {
    absl::MutexLock lock(&mu);
    return active;
  }

  // Sends `rpc(stub, ctx)` to the active scheduler and, on UNAVAILABLE,
  // re-sends it round the addresses until `deadline` (header comment).
  template <typename Rpc>
  absl::Status Call(absl::Time deadline, SinglePolicy single, Rpc rpc) {
    const size_t n = stubs.size();
    size_t index = Active();
    size_t tried_this_round = 0;
    absl::Duration backoff = kFirstBackoff;
    while (true) {
      grpc::ClientContext ctx;
      ctx.set_deadline(absl::ToChronoTime(deadline));
      if (n == 1) ctx.set_wait_for_ready(single.wait_for_ready);
      absl::Status s = FromGrpcStatus(rpc(stubs[index].get(), &ctx));
      if (!absl::IsUnavailable(s)) {
        // This scheduler answered (even with an error): start there next.
        absl::MutexLock lock(&mu);
        active = index;
        return s;
      }
      if (n == 1 && !single.retry) return s;
      index = (index + 1) % n;
      absl::Duration pause = absl::ZeroDuration();
      if (++tried_this_round == n) {
        tried_this_round = 0;
        pause = backoff;
        backoff = std::min(backoff * 2, kMaxBackoff);
      }
      if (absl::Now() + pause >= deadline) {
        if (n == 1) return s;
        return absl::UnavailableError(
            absl::StrCat("no scheduler of ", absl::StrJoin(addresses, ","),
                         " answered in time; last: ", s.message()));
      }
      absl::SleepFor(pause);
    }
  }

  // `budget`: how long the call may take in all; default wait +
  // call_timeout.
  absl::StatusOr<v1::RegisterResponse> DoRegister(
      v1::RegisterRequest req, absl::Duration wait = absl::ZeroDuration(),
      std::optional<absl::Duration> budget = std::nullopt) {
    req.set_incarnation(incarnation);
    v1::RegisterResponse resp;
    // The scheduler may still be starting: wait for the channel (one
    // address) or go round the addresses (several).
    PSDB_RETURN_IF_ERROR(Call(
        absl::Now() + budget.value_or(wait + options.call_timeout),
        {.wait_for_ready = true}, [&](Stub* stub, grpc::ClientContext* ctx) {
          return stub->Register(ctx, req, &resp);
        }));
    absl::MutexLock lock(&mu);
    registration = req;
    registered = true;
    interval = absl::Milliseconds(resp.heartbeat_interval_ms());
    version = resp.map().version();
    if (latest.has_value() && resp.map().version() < latest->version()) {
      // This scheduler's history is older than what the watch saw (it
      // restarted without its state): follow it from its own version.
      restart_watch = true;
      if (watch_ctx != nullptr) watch_ctx->TryCancel();
      latest.reset();
    }
    OfferLocked(resp.map());
    return resp;
  }

  absl::StatusOr<uint64_t> DoHeartbeat() {
    v1::HeartbeatRequest req;
    absl::Duration beat_interval;
    {
      absl::MutexLock lock(&mu);
      if (!registered) {
        return absl::FailedPreconditionError("heartbeat before Register");
      }
      req.set_node_id(registration.node_id());
      beat_interval = interval;
    }
    v1::HeartbeatResponse resp;
    PSDB_RETURN_IF_ERROR(
        Call(absl::Now() + std::max(beat_interval, absl::Milliseconds(100)), {},
             [&](Stub* stub, grpc::ClientContext* ctx) {
               return stub->Heartbeat(ctx, req, &resp);
             }));
    absl::MutexLock lock(&mu);
    version = std::max(version, resp.map_version());
    return resp.map_version();
  }

  void BeatLoop() {
    absl::MutexLock lock(&mu);
    while (!stopping) {
      mu.AwaitWithTimeout(absl::Condition(&stopping), interval);
      if (stopping) break;
      mu.Unlock();
      absl::StatusOr<uint64_t> beat = DoHeartbeat();
      if (absl::IsNotFound(beat.status()) && Drained()) {
        std::string id;
        {
          absl::MutexLock relock(&mu);
          drained = true;
          id = registration.node_id();
        }
        std::fprintf(stderr,
                     "psdb: node id:%s drained: this server owns no keys and "
                     "may be stopped; heartbeats stopped (scheduler: %s)\n",
                     id.c_str(), std::string(beat.status().message()).c_str());
        mu.Lock();
        break;
      }
      if (absl::IsFailedPrecondition(beat.status()) ||
          absl::IsNotFound(beat.status())) {
        // Marked dead (or the scheduler forgot us): take the rank back.
        v1::RegisterRequest again;
        {
          absl::MutexLock relock(&mu);
          again = registration;
        }
        // Bounded by a few beats, not by call_timeout, so StopHeartbeats
        // (which joins this thread) returns promptly; the next beat tries
        // again.
        absl::Duration budget;
        {
          absl::MutexLock relock(&mu);
          budget = std::max(4 * interval, absl::Seconds(2));
        }
        absl::StatusOr<v1::RegisterResponse> r =
            DoRegister(again, absl::ZeroDuration(), budget);
        if (r.ok()) {
          absl::MutexLock relock(&mu);
          ++reregistrations;
        } else {
          std::fprintf(stderr, "psdb: re-registration of node id:%s: %s\n",
                       again.node_id().c_str(), r.status().ToString().c_str());
        }
      }
      mu.Lock();
    }
  }

  // After a NOT_FOUND beat: whether this server was drained, i.e. the
  // scheduler's map is ready and lists no server with this node id (a
  // scheduler that restarted without its state has no ready map without
  // it until every rank registered again).
  bool Drained() {
    std::string id;
    {
      absl::MutexLock lock(&mu);
      if (registration.role() != v1::NODE_ROLE_SERVER) return false;
      id = registration.node_id();
    }
    v1::GetClusterMapRequest req;
    v1::GetClusterMapResponse resp;
    const absl::Status s = Call(absl::Now() + absl::Seconds(2), {},
                                [&](Stub* stub, grpc::ClientContext* ctx) {
                                  return stub->GetClusterMap(ctx, req, &resp);
                                });
    if (!s.ok() || !resp.map().ready()) return false;
    for (const v1::NodeEntry& e : resp.map().servers()) {
      if (e.node_id() == id) return false;
    }
    absl::MutexLock lock(&mu);
    OfferLocked(resp.map());
    return true;
  }

  // Keeps `map` if it is newer than the one held.
  void OfferLocked(const v1::ClusterMap& map)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    version = std::max(version, map.version());
    if (!latest.has_value() || map.version() > latest->version()) {
      latest = map;
    }
  }

  void WatchLoop() {
    const size_t n = stubs.size();
    size_t index = Active();
    absl::Duration backoff = kFirstBackoff;
    bool reported_unimplemented = false;
    while (true) {
      grpc::ClientContext ctx;
      // One address: wait for it to come (back) up. Several: fail fast on
      // a dead one and move on.
      if (n == 1) ctx.set_wait_for_ready(true);
      v1::WatchClusterMapRequest req;
      {
        absl::MutexLock lock(&mu);
        if (watch_stopping) break;
        restart_watch = false;
        req.set_after_version(latest.has_value() ? latest->version() : 0);
        watch_ctx = &ctx;
      }
      std::unique_ptr<grpc::ClientReader<v1::ClusterMap>> reader =
          stubs[index]->WatchClusterMap(&ctx, req);
      v1::ClusterMap map;
      bool received = false;
      while (reader->Read(&map)) {
        received = true;
        absl::MutexLock lock(&mu);
        OfferLocked(map);
      }
      const absl::Status s = FromGrpcStatus(reader->Finish());
      absl::MutexLock lock(&mu);
      watch_ctx = nullptr;
      if (watch_stopping) break;
      if (restart_watch) continue;
      if (received) backoff = kFirstBackoff;
      if (absl::IsUnimplemented(s) && !reported_unimplemented) {
        reported_unimplemented = true;
        std::fprintf(stderr,
                     "psdb: scheduler %s has no WatchClusterMap (%s); the map "
                     "is fetched on demand only\n",
                     addresses[index].c_str(), s.ToString().c_str());
      }
      if (absl::IsUnavailable(s) || absl::IsUnimplemented(s)) {
        index = (index + 1) % n;
      }
      auto wake = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
        return watch_stopping || restart_watch;
      };
      mu.AwaitWithTimeout(absl::Condition(&wake), backoff);
      backoff = std::min(backoff * 2, kMaxBackoff);
    }
  }

  const SchedulerClientOptions options;
  const std::vector<std::string> addresses;
  const std::vector<std::unique_ptr<Stub>> stubs;
  const uint64_t incarnation;
  mutable absl::Mutex mu;
  // Index of the scheduler calls try first.
  size_t active ABSL_GUARDED_BY(mu) = 0;
  v1::RegisterRequest registration ABSL_GUARDED_BY(mu);
  bool registered ABSL_GUARDED_BY(mu) = false;
  absl::Duration interval ABSL_GUARDED_BY(mu) = absl::Seconds(1);
  uint64_t version ABSL_GUARDED_BY(mu) = 0;
  std::optional<v1::ClusterMap> latest ABSL_GUARDED_BY(mu);
  // Uses of each barrier name so far (the next sequence is one more).
  absl::flat_hash_map<std::string, int64_t> barrier_uses ABSL_GUARDED_BY(mu);
  int reregistrations ABSL_GUARDED_BY(mu) = 0;
  bool drained ABSL_GUARDED_BY(mu) = false;
  bool stopping ABSL_GUARDED_BY(mu) = false;
  // The open watch call (null between calls), cancelled to stop or restart.
  grpc::ClientContext* watch_ctx ABSL_GUARDED_BY(mu) = nullptr;
  bool watch_stopping ABSL_GUARDED_BY(mu) = false;
  bool restart_watch ABSL_GUARDED_BY(mu) = false;
  std::thread beater;      // touched by the controlling thread only
  std::thread watcher;     // likewise
  absl::Mutex control_mu;  // serializes Start/Stop of the threads
};

SchedulerClient::SchedulerClient(std::unique_ptr<Impl> impl)
    : impl_(std::move(impl)) {}
SchedulerClient::~SchedulerClient() {
  StopHeartbeats();
  StopMapWatch();
}

absl::StatusOr<std::unique_ptr<SchedulerClient>> SchedulerClient::Open(
    const SchedulerClientOptions& options) {
  if (options.address.empty()) {
    return absl::InvalidArgumentError("scheduler address is required");
  }
  std::vector<std::string> addresses;
  for (absl::string_view a : absl::StrSplit(options.address, ',')) {
    a = absl::StripAsciiWhitespace(a);
    if (a.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("scheduler address list \"", options.address,
                       "\" has an empty entry"));
    }
    addresses.emplace_back(a);
  }
  grpc::ChannelArguments args;
  // Reconnect to a restarted scheduler within a heartbeat or two (gRPC's
  // default backoff grows to 120 s). The minimum is also the connect
  // timeout, so a scheduler that does not answer at all fails its calls
  // UNAVAILABLE (and the list moves on) within about a second.
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 1000);
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
  args.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, 100);
  // A scheduler whose host died sends no reset: pings find out, so a call
  // blocked in it fails UNAVAILABLE (and is re-sent) within ~15 s rather
  // than at its deadline. ps-scheduler permits these pings.
  args.SetInt(GRPC_ARG_KEEPALIVE_TIME_MS, 10000);
  args.SetInt(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, 5000);
  args.SetInt(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
  std::vector<std::unique_ptr<v1::SchedulerService::Stub>> stubs;
  for (const std::string& address : addresses) {
    PSDB_ASSIGN_OR_RETURN(std::shared_ptr<grpc::Channel> channel,
                          MakeChannel(options.tls, address, args));
    stubs.push_back(v1::SchedulerService::NewStub(std::move(channel)));
  }
  return std::unique_ptr<SchedulerClient>(new SchedulerClient(
      std::make_unique<Impl>(options, std::move(addresses), std::move(stubs))));
}

absl::StatusOr<v1::RegisterResponse> SchedulerClient::Register(
    const v1::RegisterRequest& req, absl::Duration wait) {
  return impl_->DoRegister(req, wait);
}

absl::StatusOr<uint64_t> SchedulerClient::Heartbeat() {
  return impl_->DoHeartbeat();
}

absl::StatusOr<v1::ClusterMap> SchedulerClient::GetClusterMap(
    absl::Duration wait) {
  // Idempotent: with one address too, re-sent on UNAVAILABLE (e.g. "Socket
  // closed" on the first call after the scheduler restarted) until the
  // deadline.
  v1::GetClusterMapRequest req;
  req.set_wait_ready_ms(absl::ToInt64Milliseconds(wait));
  v1::GetClusterMapResponse resp;
  PSDB_RETURN_IF_ERROR(
      impl_->Call(absl::Now() + wait + impl_->options.call_timeout,
                  {.wait_for_ready = true, .retry = true},
                  [&](Impl::Stub* stub, grpc::ClientContext* ctx) {
                    return stub->GetClusterMap(ctx, req, &resp);
                  }));
  absl::MutexLock lock(&impl_->mu);
  impl_->OfferLocked(resp.map());
  return std::move(*resp.mutable_map());
}

absl::Status SchedulerClient::Barrier(absl::string_view name,
                                      absl::Duration timeout) {
  v1::BarrierRequest req;
  {
    absl::MutexLock lock(&impl_->mu);
    if (!impl_->registered) {
      return absl::FailedPreconditionError("Barrier before Register");
    }
    req.set_node_id(impl_->registration.node_id());
    req.set_sequence(++impl_->barrier_uses[std::string(name)]);
  }
  req.set_name(std::string(name));
  const absl::Time wait_until = absl::Now() + timeout;
  v1::BarrierResponse resp;
  // Re-sent on UNAVAILABLE even to a single address: behind it may be a
  // Service whose next connection reaches another scheduler.
  return impl_->Call(
      wait_until + impl_->options.call_timeout, {.retry = true},
      [&](Impl::Stub* stub, grpc::ClientContext* ctx) {
        // A re-sent call waits only for what is left of the timeout.
        req.set_timeout_ms(std::max<int64_t>(
            1, absl::ToInt64Milliseconds(wait_until - absl::Now())));
        return stub->Barrier(ctx, req, &resp);
      });
}

absl::StatusOr<int64_t> SchedulerClient::StepClock(int64_t finished_step,
                                                   int staleness,
                                                   absl::Duration timeout) {
  v1::StepClockRequest req;
  {
    absl::MutexLock lock(&impl_->mu);
    if (!impl_->registered) {
      return absl::FailedPreconditionError("StepClock before Register");
    }
    req.set_node_id(impl_->registration.node_id());
  }
  req.set_finished_step(finished_step);
  req.set_staleness(staleness);
  const absl::Time wait_until = absl::Now() + timeout;
  v1::StepClockResponse resp;
  PSDB_RETURN_IF_ERROR(impl_->Call(
      wait_until + impl_->options.call_timeout, {.retry = true},
      [&](Impl::Stub* stub, grpc::ClientContext* ctx) {
        req.set_timeout_ms(std::max<int64_t>(
            1, absl::ToInt64Milliseconds(wait_until - absl::Now())));
        return stub->StepClock(ctx, req, &resp);
      }));
  return resp.slowest_finished_step();
}

absl::Status SchedulerClient::RendezvousSet(absl::string_view key,
                                            absl::string_view value) {
  v1::RendezvousSetRequest req;
  req.set_key(std::string(key));
  req.set_value(std::string(value));
  v1::RendezvousSetResponse resp;
  return impl_->Call(absl::Now() + impl_->options.call_timeout,
                     {.wait_for_ready = true, .retry = true},
                     [&](Impl::Stub* stub, grpc::ClientContext* ctx) {
                       return stub->RendezvousSet(ctx, req, &resp);
                     });
}

absl::StatusOr<std::vector<std::string>> SchedulerClient::RendezvousGet(
    const std::vector<std::string>& keys, absl::Duration timeout) {
  v1::RendezvousGetRequest req;
  for (const std::string& key : keys) req.add_keys(key);
  const absl::Time wait_until = absl::Now() + timeout;
  v1::RendezvousGetResponse resp;
  PSDB_RETURN_IF_ERROR(impl_->Call(
      wait_until + impl_->options.call_timeout,
      {.wait_for_ready = true, .retry = true},
      [&](Impl::Stub* stub, grpc::ClientContext* ctx) {
        // A re-sent call waits only for what is left of the timeout.
        req.set_timeout_ms(std::max<int64_t>(
            1, absl::ToInt64Milliseconds(wait_until - absl::Now())));
        return stub->RendezvousGet(ctx, req, &resp);
      }));
  if (static_cast<size_t>(resp.values_size()) != keys.size()) {
    return absl::InternalError(absl::StrCat("rendezvous get of ", keys.size(),
                                            " keys answered ",
                                            resp.values_size(), " values"));
  }
  return std::vector<std::string>(resp.values().begin(), resp.values().end());
}

void SchedulerClient::StartHeartbeats() {
  StartMapWatch();
  absl::MutexLock control(&impl_->control_mu);
  if (impl_->beater.joinable()) return;
  {
    absl::MutexLock lock(&impl_->mu);
    impl_->stopping = false;
  }
  Impl* raw = impl_.get();
  impl_->beater = std::thread([raw] { raw->BeatLoop(); });
}

void SchedulerClient::StopHeartbeats() {
  absl::MutexLock control(&impl_->control_mu);
  if (!impl_->beater.joinable()) return;
  {
    absl::MutexLock lock(&impl_->mu);
    impl_->stopping = true;
  }
  impl_->beater.join();
}

void SchedulerClient::StartMapWatch() {
  absl::MutexLock control(&impl_->control_mu);
  if (impl_->watcher.joinable()) return;
  {
    absl::MutexLock lock(&impl_->mu);
    impl_->watch_stopping = false;
  }
  Impl* raw = impl_.get();
  impl_->watcher = std::thread([raw] { raw->WatchLoop(); });
}

void SchedulerClient::StopMapWatch() {
  absl::MutexLock control(&impl_->control_mu);
  if (!impl_->watcher.joinable()) return;
  {
    absl::MutexLock lock(&impl_->mu);
    impl_->watch_stopping = true;
    if (impl_->watch_ctx != nullptr) impl_->watch_ctx->TryCancel();
  }
  impl_->watcher.join();
}

std::optional<v1::ClusterMap> SchedulerClient::latest_map() const {
  absl::MutexLock lock(&impl_->mu);
  return impl_->latest;
}

absl::StatusOr<v1::ClusterMap> SchedulerClient::WaitForMapVersion(
    uint64_t above, absl::Duration timeout) {
  absl::MutexLock lock(&impl_->mu);
  auto newer = [this, above]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(impl_->mu) {
    return impl_->latest.has_value() && impl_->latest->version() > above;
  };
  if (!impl_->mu.AwaitWithTimeout(absl::Condition(&newer), timeout)) {
    return absl::DeadlineExceededError(absl::StrCat(
        "no cluster map above version ", above, " within ",
        absl::FormatDuration(timeout), "; newest: ",
        impl_->latest.has_value() ? absl::StrCat(impl_->latest->version())
                                  : std::string("none")));
  }
  return *impl_->latest;
}

uint64_t SchedulerClient::map_version() const {
  absl::MutexLock lock(&impl_->mu);
  return impl_->version;
}

uint64_t SchedulerClient::incarnation() const { return impl_->incarnation; }

const std::vector<std::string>& SchedulerClient::addresses() const {
  return impl_->addresses;
}

std::string SchedulerClient::active_address() const {
  return impl_->addresses[impl_->Active()];
}

bool SchedulerClient::drained() const {
  absl::MutexLock lock(&impl_->mu);
  return impl_->drained;
}

int SchedulerClient::reregistrations() const {
  absl::MutexLock lock(&impl_->mu);
  return impl_->reregistrations;
}

absl::StatusOr<std::pair<std::unique_ptr<SchedulerClient>, ServerPlacement>>
JoinClusterAsServer(const NodeConfig& config, absl::string_view address,
                    const ClientTlsOptions& tls, absl::Duration wait_ready) {
  if (!config.has_scheduler()) {
    return absl::InvalidArgumentError("no scheduler configured");
  }
  SchedulerClientOptions options;
  options.address = config.SchedulerAddress();
  options.tls = tls;
  PSDB_ASSIGN_OR_RETURN(std::unique_ptr<SchedulerClient> client,
                        SchedulerClient::Open(options));
  v1::RegisterRequest req;
  req.set_node_id(config.node_id);
  req.set_role(v1::NODE_ROLE_SERVER);
  req.set_address(std::string(address));
  req.set_join(config.join);
  if (config.server_num.has_value()) req.set_server_num(*config.server_num);
  if (config.worker_num.has_value()) req.set_worker_num(*config.worker_num);
  // A server restarted faster than the heartbeat timeout finds its old self
  // still alive: retry until the scheduler marks it dead (bounded).
  const absl::Time give_up = absl::Now() + wait_ready;
  absl::StatusOr<v1::RegisterResponse> reg = client->Register(req);
  while (absl::IsAlreadyExists(reg.status()) && absl::Now() < give_up) {
    std::fprintf(stderr, "ps-server: %s; retrying\n",
                 reg.status().ToString().c_str());
    absl::SleepFor(absl::Milliseconds(500));
    reg = client->Register(req);
  }
  PSDB_RETURN_IF_ERROR(reg.status());
  client->StartHeartbeats();
  PSDB_ASSIGN_OR_RETURN(v1::ClusterMap map, client->GetClusterMap(wait_ready));
  ServerPlacement placement;
  PSDB_ASSIGN_OR_RETURN(placement.cluster, ClusterMapFromProto(map));
  placement.rank = reg->rank();
  placement.worker_num = map.worker_num();
  placement.recovered = reg->recovered();
  return std::make_pair(std::move(client), std::move(placement));
}

}  // namespace psdb::rpc
