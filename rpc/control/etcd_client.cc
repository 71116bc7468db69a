#include "rpc/control/etcd_client.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <functional>
#include <thread>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "etcd/etcdserver/etcdserverpb/rpc.grpc.pb.h"
#include "grpcpp/grpcpp.h"
#include "rpc/wire/convert.h"
#include "util/status_macros.h"

namespace psdb::rpc {
namespace {

namespace pb = ::etcdserverpb;

EtcdKeyValue FromPb(const ::mvccpb::KeyValue& kv) {
  EtcdKeyValue out;
  out.key = kv.key();
  out.value = kv.value();
  out.create_revision = kv.create_revision();
  out.mod_revision = kv.mod_revision();
  out.lease = kv.lease();
  return out;
}

void ToPb(const EtcdCompare& c, pb::Compare* out) {
  out->set_key(c.key);
  out->set_result(pb::Compare::EQUAL);
  switch (c.target) {
    case EtcdCompare::Target::kCreateRevision:
      out->set_target(pb::Compare::CREATE);
      out->set_create_revision(c.revision);
      break;
    case EtcdCompare::Target::kModRevision:
      out->set_target(pb::Compare::MOD);
      out->set_mod_revision(c.revision);
      break;
    case EtcdCompare::Target::kValue:
      out->set_target(pb::Compare::VALUE);
      out->set_value(c.value);
      break;
  }
}

void ToPb(const EtcdOp& op, pb::RequestOp* out) {
  switch (op.kind) {
    case EtcdOp::Kind::kPut: {
      pb::PutRequest* put = out->mutable_request_put();
      put->set_key(op.key);
      put->set_value(op.value);
      put->set_lease(op.lease);
      break;
    }
    case EtcdOp::Kind::kDelete:
      out->mutable_request_delete_range()->set_key(op.key);
      break;
    case EtcdOp::Kind::kDeletePrefix: {
      pb::DeleteRangeRequest* del = out->mutable_request_delete_range();
      del->set_key(op.key);
      del->set_range_end(EtcdPrefixEnd(op.key));
      break;
    }
    case EtcdOp::Kind::kGet:
      out->mutable_request_range()->set_key(op.key);
      break;
  }
}

}  // namespace

std::string EtcdPrefixEnd(absl::string_view prefix) {
  std::string end(prefix);
  while (!end.empty()) {
    if (static_cast<unsigned char>(end.back()) < 0xff) {
      end.back() = static_cast<char>(end.back() + 1);
      return end;
    }
    end.pop_back();
  }
  return std::string(1, '\0');  // every key
}

EtcdCompare EtcdCompare::Absent(std::string key) {
  return ModRevisionIs(std::move(key), 0);
}
EtcdCompare EtcdCompare::ModRevisionIs(std::string key, int64_t mod_revision) {
  EtcdCompare c;
  c.key = std::move(key);
  c.target = mod_revision == 0 ? Target::kCreateRevision : Target::kModRevision;
  c.revision = mod_revision;
  return c;
}
EtcdCompare EtcdCompare::ValueIs(std::string key, std::string value) {
  EtcdCompare c;
  c.key = std::move(key);
  c.target = Target::kValue;
  c.value = std::move(value);
  return c;
}

EtcdOp EtcdOp::Put(std::string key, std::string value, int64_t lease) {
  EtcdOp op;
  op.kind = Kind::kPut;
  op.key = std::move(key);
  op.value = std::move(value);
  op.lease = lease;
  return op;
}
EtcdOp EtcdOp::Delete(std::string key) {
  EtcdOp op;
  op.kind = Kind::kDelete;
  op.key = std::move(key);
  return op;
}
EtcdOp EtcdOp::DeletePrefix(std::string prefix) {
  EtcdOp op;
  op.kind = Kind::kDeletePrefix;
  op.key = std::move(prefix);
  return op;
}
EtcdOp EtcdOp::Get(std::string key) {
  EtcdOp op;
  op.kind = Kind::kGet;
  op.key = std::move(key);
  return op;
}

absl::StatusOr<std::vector<std::string>> ParseEtcdEndpoints(
    absl::string_view list) {
  std::vector<std::string> out;
  for (absl::string_view part : absl::StrSplit(list, ',', absl::SkipEmpty())) {
    part = absl::StripAsciiWhitespace(part);
    absl::ConsumePrefix(&part, "http://");
    const size_t colon = part.rfind(':');
    if (part.empty() || colon == absl::string_view::npos || colon == 0 ||
        colon + 1 == part.size()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "etcd endpoint '", part, "' is not host:port (in '", list, "')"));
    }
    int port = 0;
    if (!absl::SimpleAtoi(part.substr(colon + 1), &port) || port < 1 ||
        port > 65535) {
      return absl::InvalidArgumentError(
          absl::StrCat("etcd endpoint '", part, "' has a bad port"));
    }
    out.emplace_back(part);
  }
  if (out.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("no etcd endpoint in '", list, "'"));
  }
  return out;
}

class EtcdClient::Impl {
 public:
  struct Endpoint {
    std::string address;
    std::unique_ptr<pb::KV::Stub> kv;
    std::unique_ptr<pb::Lease::Stub> lease;
    std::unique_ptr<pb::Watch::Stub> watch;
    std::unique_ptr<pb::Maintenance::Stub> maintenance;
  };

  explicit Impl(const EtcdOptions& options) : options(options) {}

  // Runs `call` against the current endpoint, moving to the next on
  // UNAVAILABLE, until it answers otherwise or `deadline` passes. With
  // `per_attempt`, each attempt also ends after attempt_timeout() and a
  // timed-out attempt moves on too: a member that lost its leader holds a
  // proposal until etcd's request timeout (seconds) and answers nothing.
  // Every psdb use of etcd is safe to re-send (puts of the same value,
  // compare-and-set transactions whose callers re-read on a lost compare).
  absl::Status Call(
      absl::Time deadline,
      const std::function<grpc::Status(Endpoint&, grpc::ClientContext*)>& call,
      bool per_attempt = true) {
    std::vector<std::string> failures;
    absl::Duration backoff = absl::Milliseconds(50);
    for (size_t attempt = 0;; ++attempt) {
      const size_t index = current.load() % endpoints.size();
      Endpoint& endpoint = endpoints[index];
      grpc::ClientContext ctx;
      const absl::Time attempt_deadline =
          per_attempt ? std::min(deadline, absl::Now() + attempt_timeout())
                      : deadline;
      ctx.set_deadline(absl::ToChronoTime(attempt_deadline));
      grpc::Status status = call(endpoint, &ctx);
      // etcd answers a request whose (propagated) deadline ran out on its
      // side UNKNOWN "context deadline exceeded": the same event as gRPC's
      // own DEADLINE_EXCEEDED, so it is treated as one.
      if (status.error_code() == grpc::StatusCode::UNKNOWN &&
          status.error_message() == "context deadline exceeded") {
        status = grpc::Status(grpc::StatusCode::DEADLINE_EXCEEDED,
                              status.error_message());
      }
      const bool timed_out =
          status.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED &&
          attempt_deadline < deadline;
      if (status.error_code() != grpc::StatusCode::UNAVAILABLE && !timed_out) {
        return FromGrpcStatus(status);
      }
      failures.push_back(
          absl::StrCat(endpoint.address, ": ", status.error_message()));
      size_t expected = index;
      current.compare_exchange_strong(expected, index + 1);
      if ((attempt + 1) % endpoints.size() == 0) {
        // Every endpoint failed once: back off before the next round.
        if (absl::Now() + backoff >= deadline) break;
        absl::SleepFor(backoff);
        backoff = std::min(backoff * 2, absl::Milliseconds(500));
      }
      if (absl::Now() >= deadline) break;
    }
    // The last failure of each endpoint.
    std::vector<std::string> last(
        failures.end() - std::min(failures.size(), endpoints.size()),
        failures.end());
    return absl::UnavailableError(
        absl::StrCat("etcd unreachable: ", absl::StrJoin(last, "; ")));
  }

  // One attempt's share of a call: a third of call_timeout, at least 1 s.
  absl::Duration attempt_timeout() const {
    return std::max(options.call_timeout / 3, absl::Seconds(1));
  }

  absl::Time Deadline() const { return absl::Now() + options.call_timeout; }

  const EtcdOptions options;
  std::vector<Endpoint> endpoints;
  std::atomic<size_t> current{0};
};

EtcdClient::EtcdClient(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
EtcdClient::~EtcdClient() = default;

const EtcdOptions& EtcdClient::options() const { return impl_->options; }

absl::StatusOr<std::unique_ptr<EtcdClient>> EtcdClient::Open(
    const EtcdOptions& options) {
  if (options.endpoints.empty()) {
    return absl::InvalidArgumentError("no etcd endpoint given");
  }
  if (options.call_timeout <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError("etcd call_timeout must be > 0");
  }
  auto impl = std::make_unique<Impl>(options);
  for (const std::string& address : options.endpoints) {
    grpc::ChannelArguments args;
    // Reconnect to a restarted member within a second (gRPC's default
    // backoff grows to 120 s). A member listens before it serves, and a
    // connection made in between stalls: give up on a connect after 2 s
    // (gRPC's min_reconnect_backoff is its connect timeout, default 20 s).
    args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 1000);
    args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
    args.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, 2000);
    // A member whose host died sends no reset: pings find out (etcd
    // accepts one every 5 s while a call is open), so a watch or call
    // blocked there moves to the next member within ~15 s.
    args.SetInt(GRPC_ARG_KEEPALIVE_TIME_MS, 10000);
    args.SetInt(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, 5000);
    PSDB_ASSIGN_OR_RETURN(std::shared_ptr<grpc::Channel> channel,
                          MakeChannel(options.tls, address, args));
    Impl::Endpoint endpoint;
    endpoint.address = address;
    endpoint.kv = pb::KV::NewStub(channel);
    endpoint.lease = pb::Lease::NewStub(channel);
    endpoint.watch = pb::Watch::NewStub(channel);
    endpoint.maintenance = pb::Maintenance::NewStub(channel);
    impl->endpoints.push_back(std::move(endpoint));
  }
  return std::unique_ptr<EtcdClient>(new EtcdClient(std::move(impl)));
}

absl::StatusOr<std::optional<EtcdKeyValue>> EtcdClient::Get(
    absl::string_view key, int64_t* revision) {
  pb::RangeRequest req;
  req.set_key(std::string(key));
  pb::RangeResponse resp;
  PSDB_RETURN_IF_ERROR(impl_->Call(
      impl_->Deadline(), [&](Impl::Endpoint& e, grpc::ClientContext* ctx) {
        return e.kv->Range(ctx, req, &resp);
      }));
  if (revision != nullptr) *revision = resp.header().revision();
  if (resp.kvs_size() == 0) return std::nullopt;
  return FromPb(resp.kvs(0));
}

absl::StatusOr<EtcdRange> EtcdClient::GetPrefix(absl::string_view prefix) {
  pb::RangeRequest req;
  req.set_key(std::string(prefix));
  req.set_range_end(EtcdPrefixEnd(prefix));
  pb::RangeResponse resp;
  PSDB_RETURN_IF_ERROR(impl_->Call(
      impl_->Deadline(), [&](Impl::Endpoint& e, grpc::ClientContext* ctx) {
        return e.kv->Range(ctx, req, &resp);
      }));
  EtcdRange out;
  out.revision = resp.header().revision();
  out.kvs.reserve(resp.kvs_size());
  for (const ::mvccpb::KeyValue& kv : resp.kvs()) out.kvs.push_back(FromPb(kv));
  return out;
}

absl::StatusOr<int64_t> EtcdClient::NewestModRevision(
    absl::string_view prefix) {
  pb::RangeRequest req;
  req.set_key(std::string(prefix));
  req.set_range_end(EtcdPrefixEnd(prefix));
  req.set_limit(1);
  req.set_sort_order(pb::RangeRequest::DESCEND);
  req.set_sort_target(pb::RangeRequest::MOD);
  req.set_keys_only(true);
  pb::RangeResponse resp;
  PSDB_RETURN_IF_ERROR(impl_->Call(
      impl_->Deadline(), [&](Impl::Endpoint& e, grpc::ClientContext* ctx) {
        return e.kv->Range(ctx, req, &resp);
      }));
  return resp.kvs_size() == 0 ? 0 : resp.kvs(0).mod_revision();
}

absl::StatusOr<int64_t> EtcdClient::Put(absl::string_view key,
                                        absl::string_view value,
                                        int64_t lease) {
  pb::PutRequest req;
  req.set_key(std::string(key));
  req.set_value(std::string(value));
  req.set_lease(lease);
  pb::PutResponse resp;
  PSDB_RETURN_IF_ERROR(impl_->Call(
      impl_->Deadline(), [&](Impl::Endpoint& e, grpc::ClientContext* ctx) {
        return e.kv->Put(ctx, req, &resp);
      }));
  return resp.header().revision();
}

absl::StatusOr<int64_t> EtcdClient::Delete(absl::string_view key) {
  pb::DeleteRangeRequest req;
  req.set_key(std::string(key));
  pb::DeleteRangeResponse resp;
  PSDB_RETURN_IF_ERROR(impl_->Call(
      impl_->Deadline(), [&](Impl::Endpoint& e, grpc::ClientContext* ctx) {
        return e.kv->DeleteRange(ctx, req, &resp);
      }));
  return resp.deleted();
}

absl::StatusOr<EtcdTxnResult> EtcdClient::Txn(
    const std::vector<EtcdCompare>& compares,
    const std::vector<EtcdOp>& success, const std::vector<EtcdOp>& failure) {
  pb::TxnRequest req;
  for (const EtcdCompare& c : compares) ToPb(c, req.add_compare());
  for (const EtcdOp& op : success) ToPb(op, req.add_success());
  for (const EtcdOp& op : failure) ToPb(op, req.add_failure());
  pb::TxnResponse resp;
  PSDB_RETURN_IF_ERROR(impl_->Call(
      impl_->Deadline(), [&](Impl::Endpoint& e, grpc::ClientContext* ctx) {
        return e.kv->Txn(ctx, req, &resp);
      }));
  EtcdTxnResult out;
  out.succeeded = resp.succeeded();
  out.revision = resp.header().revision();
  for (const pb::ResponseOp& r : resp.responses()) {
    if (!r.has_response_range()) continue;
    if (r.response_range().kvs_size() == 0) {
      out.gets.push_back(std::nullopt);
    } else {
      out.gets.push_back(FromPb(r.response_range().kvs(0)));
    }
  }
  return out;
}

absl::StatusOr<int64_t> EtcdClient::LeaseGrant(absl::Duration ttl) {
  pb::LeaseGrantRequest req;
  req.set_ttl(std::max<int64_t>(1, absl::ToInt64Seconds(ttl)));
  pb::LeaseGrantResponse resp;
  PSDB_RETURN_IF_ERROR(impl_->Call(
      impl_->Deadline(), [&](Impl::Endpoint& e, grpc::ClientContext* ctx) {
        return e.lease->LeaseGrant(ctx, req, &resp);
      }));
  if (!resp.error().empty()) {
    return absl::UnavailableError(
        absl::StrCat("etcd lease grant: ", resp.error()));
  }
  return resp.id();
}

absl::StatusOr<absl::Duration> EtcdClient::LeaseKeepAlive(int64_t lease) {
  pb::LeaseKeepAliveRequest req;
  req.set_id(lease);
  pb::LeaseKeepAliveResponse resp;
  PSDB_RETURN_IF_ERROR(impl_->Call(
      impl_->Deadline(), [&](Impl::Endpoint& e, grpc::ClientContext* ctx) {
        auto stream = e.lease->LeaseKeepAlive(ctx);
        if (!stream->Write(req) || !stream->Read(&resp)) {
          stream->WritesDone();
          grpc::Status s = stream->Finish();
          return s.ok() ? grpc::Status(grpc::StatusCode::UNAVAILABLE,
                                       "keep-alive stream closed")
                        : s;
        }
        stream->WritesDone();
        ctx->TryCancel();
        stream->Finish();  // CANCELLED: we closed it
        return grpc::Status::OK;
      }));
  if (resp.ttl() <= 0) {
    return absl::NotFoundError(
        absl::StrCat("etcd lease ", lease, " has expired or was revoked"));
  }
  return absl::Seconds(resp.ttl());
}

absl::Status EtcdClient::LeaseRevoke(int64_t lease) {
  pb::LeaseRevokeRequest req;
  req.set_id(lease);
  pb::LeaseRevokeResponse resp;
  absl::Status s = impl_->Call(
      impl_->Deadline(), [&](Impl::Endpoint& e, grpc::ClientContext* ctx) {
        return e.lease->LeaseRevoke(ctx, req, &resp);
      });
  return absl::IsNotFound(s) ? absl::OkStatus() : s;
}

absl::StatusOr<std::vector<EtcdEvent>> EtcdClient::WaitForEvents(
    absl::string_view key, bool prefix, int64_t start_revision,
    absl::Time deadline) {
  pb::WatchRequest req;
  pb::WatchCreateRequest* create = req.mutable_create_request();
  create->set_key(std::string(key));
  if (prefix) create->set_range_end(EtcdPrefixEnd(key));
  create->set_start_revision(start_revision);
  std::vector<EtcdEvent> events;
  bool compacted = false;
  absl::Status s = impl_->Call(
      deadline,
      [&](Impl::Endpoint& e, grpc::ClientContext* ctx) {
        // Without a leader the member cancels the watch instead of
        // leaving it silent (etcd's WithRequireLeader).
        ctx->AddMetadata("hasleader", "true");
        auto stream = e.watch->Watch(ctx);
        if (!stream->Write(req)) return stream->Finish();
        pb::WatchResponse resp;
        while (stream->Read(&resp)) {
          if (resp.canceled()) {
            compacted = resp.compact_revision() > 0;
            ctx->TryCancel();
            stream->Finish();
            if (compacted) return grpc::Status::OK;
            return grpc::Status(
                grpc::StatusCode::UNAVAILABLE,
                absl::StrCat("watch canceled: ", resp.cancel_reason()));
          }
          for (const ::mvccpb::Event& ev : resp.events()) {
            EtcdEvent out;
            out.type = ev.type() == ::mvccpb::Event::DELETE
                           ? EtcdEvent::Type::kDelete
                           : EtcdEvent::Type::kPut;
            out.kv = FromPb(ev.kv());
            events.push_back(std::move(out));
          }
          if (!events.empty()) {
            stream->WritesDone();
            ctx->TryCancel();
            stream->Finish();
            return grpc::Status::OK;
          }
        }
        grpc::Status finish = stream->Finish();
        return finish.ok() ? grpc::Status(grpc::StatusCode::UNAVAILABLE,
                                          "watch stream ended")
                           : finish;
      },
      /*per_attempt=*/false);
  PSDB_RETURN_IF_ERROR(s);
  if (compacted) {
    return absl::OutOfRangeError(absl::StrCat("etcd revision ", start_revision,
                                              " of '", key, "' was compacted"));
  }
  return events;
}

absl::Status EtcdClient::Health() {
  // Every member at once, a second each: one member out of reach must not
  // hold up the answer (a probe's timeout is a few seconds).
  const size_t n = impl_->endpoints.size();
  std::vector<std::string> answers(n);
  std::vector<char> healthy(n, 0);
  std::vector<std::thread> askers;
  const absl::Time deadline =
      absl::Now() + std::min(impl_->options.call_timeout, absl::Seconds(1));
  for (size_t i = 0; i < n; ++i) {
    askers.emplace_back([&, i] {
      Impl::Endpoint& e = impl_->endpoints[i];
      grpc::ClientContext ctx;
      ctx.set_deadline(absl::ToChronoTime(deadline));
      pb::StatusResponse resp;
      const grpc::Status s = e.maintenance->Status(&ctx, {}, &resp);
      healthy[i] = s.ok() && resp.leader() != 0;
      answers[i] = absl::StrCat(
          e.address, ": ", s.ok() ? "member has no leader" : s.error_message());
    });
  }
  for (std::thread& t : askers) t.join();
  for (size_t i = 0; i < n; ++i) {
    if (healthy[i]) return absl::OkStatus();
  }
  return absl::UnavailableError(
      absl::StrCat("etcd unhealthy: ", absl::StrJoin(answers, "; ")));
}

}  // namespace psdb::rpc
