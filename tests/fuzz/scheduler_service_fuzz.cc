// libFuzzer target: every SchedulerService handler (rpc/control/scheduler.h)
// fed arbitrary request bytes, in-process: a real SchedulerServer (the
// in-process backend, one server and one worker expected) called through
// its in-process gRPC channel (SchedulerServer::InProcessChannel).
//
// Input: a sequence of up to 6 framed requests (tests/fuzz/fuzz_util.h):
// the first byte of each picks the handler (modulo 11: Register, Heartbeat,
// GetClusterMap, Barrier, StepClock, WatchClusterMap, GetStatus, AddServer,
// DrainServer, RendezvousSet, RendezvousGet), the bytes after its length
// are parsed as its request message (unparsable: skipped). Membership is
// state, so every input gets a fresh scheduler and a sequence can register
// nodes and then act as them. Calls carry a 100 ms deadline (the scheduler
// ends its waits there: barriers, step clocks, rendezvous, watches).
// AddServer and DrainServer run a migration that dials the servers of the
// map: they are sent only while every server address in the map is
// 127.0.0.1:1..9 (ports nothing listens on here), so the fuzzer never
// reaches a process outside it.
//
// Invariants, after each request: the scheduler answers (no crash); a
// request that fails leaves the cluster map exactly as it was; the map's
// version and epoch never decrease; ranks are unique per role, node ids
// unique across roles and server addresses unique; a ready map has
// server_num servers on the ring and worker_num workers.
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <set>
#include <string>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "google/protobuf/stubs/logging.h"
#include "grpcpp/grpcpp.h"
#include "rpc/control/scheduler.h"
#include "rpc/wire/psdb.grpc.pb.h"
#include "tests/fuzz/fuzz_util.h"

namespace {

namespace v1 = psdb::v1;

constexpr int kHandlers = 11;
constexpr size_t kMaxRequests = 6;

std::string MapBytes(psdb::rpc::SchedulerBackend& backend) {
  absl::StatusOr<v1::ClusterMap> map = backend.CurrentMap();
  PSDB_FUZZ_CHECK(map.ok(), map.status().ToString());
  std::string out;
  PSDB_FUZZ_CHECK(map->SerializeToString(&out), "serialize map");
  return out;
}

void CheckMap(const v1::ClusterMap& map) {
  std::set<std::string> ids;
  std::set<std::string> addresses;
  for (const auto* nodes : {&map.servers(), &map.workers()}) {
    std::set<int> ranks;
    for (const v1::NodeEntry& n : *nodes) {
      PSDB_FUZZ_CHECK(ranks.insert(n.rank()).second,
                      absl::StrCat("rank ", n.rank(), " given twice"));
      PSDB_FUZZ_CHECK(ids.insert(n.node_id()).second,
                      "node id " + n.node_id() + " twice in the map");
      if (n.role() == v1::NODE_ROLE_SERVER) {
        PSDB_FUZZ_CHECK(addresses.insert(n.address()).second,
                        "server address " + n.address() + " twice");
      }
    }
  }
  if (map.ready()) {
    int on_ring = 0;
    for (const v1::NodeEntry& n : map.servers()) {
      if (n.state() != v1::NODE_STATE_JOINING) ++on_ring;
    }
    PSDB_FUZZ_CHECK(on_ring == map.server_num(),
                    absl::StrCat("ready map: ", on_ring, " servers on the ",
                                 "ring, server_num ", map.server_num()));
    PSDB_FUZZ_CHECK(map.workers_size() == map.worker_num(),
                    "ready map: worker count");
  }
}

// Every server of the map listens nowhere: 127.0.0.1:1..9.
bool MigrationIsLocal(psdb::rpc::SchedulerBackend& backend) {
  absl::StatusOr<v1::ClusterMap> map = backend.CurrentMap();
  if (!map.ok()) return false;
  for (const v1::NodeEntry& n : map->servers()) {
    absl::string_view a = n.address();
    int port = 0;
    if (!absl::ConsumePrefix(&a, "127.0.0.1:") || !absl::SimpleAtoi(a, &port) ||
        port < 1 || port > 9 || a.size() != 1) {
      return false;
    }
  }
  return true;
}

template <typename Req, typename Resp, typename Call>
bool Invoke(absl::string_view bytes, Call call, grpc::Status* status) {
  Req req;
  if (!req.ParseFromArray(bytes.data(), static_cast<int>(bytes.size()))) {
    return false;
  }
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() +
                   std::chrono::milliseconds(100));
  Resp resp;
  *status = call(&ctx, req, &resp);
  return true;
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  // Requests with invalid UTF-8 in string fields are refused by the parser,
  // which logs each: silence it, the fuzzer sends thousands.
  google::protobuf::SetLogHandler(nullptr);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  psdb::rpc::SchedulerOptions options;
  options.server_num = 1;
  options.worker_num = 1;
  options.heartbeat_interval = absl::Seconds(1);
  // Nobody dies while an input runs: the map changes only by requests.
  options.heartbeat_timeout = absl::Minutes(10);
  options.log = [](absl::string_view) {};
  auto server = psdb::rpc::SchedulerServer::Start(options);
  if (!server.ok()) {
    std::fprintf(stderr, "%s\n", server.status().ToString().c_str());
    std::abort();
  }
  psdb::rpc::SchedulerBackend& backend = *(*server)->backend();
  // In-process by default: measured at about 1.7x the executions per
  // second of loopback TCP (a connection per input;
  // docs/benchmarks/fuzzing.md); PSDB_FUZZ_TRANSPORT=tcp for the other.
  const char* transport = std::getenv("PSDB_FUZZ_TRANSPORT");
  auto stub = v1::SchedulerService::NewStub(
      transport != nullptr && std::string(transport) == "tcp"
          ? grpc::CreateChannel((*server)->address(),
                                grpc::InsecureChannelCredentials())
          : (*server)->InProcessChannel());
  v1::ClusterMap last;
  for (const psdb::fuzz::FramedRequest& r :
       psdb::fuzz::SplitRequests(data, size, kMaxRequests)) {
    const std::string before = MapBytes(backend);
    grpc::Status status;
    bool sent = false;
    auto& s = *stub;
    switch (r.handler % kHandlers) {
      case 0:
        sent = Invoke<v1::RegisterRequest, v1::RegisterResponse>(
            r.bytes,
            [&](auto* c, auto& q, auto* p) { return s.Register(c, q, p); },
            &status);
        break;
      case 1:
        sent = Invoke<v1::HeartbeatRequest, v1::HeartbeatResponse>(
            r.bytes,
            [&](auto* c, auto& q, auto* p) { return s.Heartbeat(c, q, p); },
            &status);
        break;
      case 2:
        sent = Invoke<v1::GetClusterMapRequest, v1::GetClusterMapResponse>(
            r.bytes,
            [&](auto* c, auto& q, auto* p) { return s.GetClusterMap(c, q, p); },
            &status);
        break;
      case 3:
        sent = Invoke<v1::BarrierRequest, v1::BarrierResponse>(
            r.bytes,
            [&](auto* c, auto& q, auto* p) { return s.Barrier(c, q, p); },
            &status);
        break;
      case 4:
        sent = Invoke<v1::StepClockRequest, v1::StepClockResponse>(
            r.bytes,
            [&](auto* c, auto& q, auto* p) { return s.StepClock(c, q, p); },
            &status);
        break;
      case 5: {
        v1::WatchClusterMapRequest req;
        if (!req.ParseFromArray(r.bytes.data(),
                                static_cast<int>(r.bytes.size()))) {
          break;
        }
        sent = true;
        grpc::ClientContext ctx;
        ctx.set_deadline(std::chrono::system_clock::now() +
                         std::chrono::milliseconds(100));
        auto reader = s.WatchClusterMap(&ctx, req);
        v1::ClusterMap map;
        if (reader->Read(&map)) {
          PSDB_FUZZ_CHECK(map.version() > req.after_version(),
                          "watch sent a map not after the version asked");
          ctx.TryCancel();
        }
        status = reader->Finish();
        // A watch that ends at its deadline is how a watch ends here.
        if (status.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED ||
            status.error_code() == grpc::StatusCode::CANCELLED) {
          status = grpc::Status::OK;
        }
        break;
      }
      case 6:
        sent = Invoke<v1::GetSchedulerStatusRequest, v1::SchedulerStatus>(
            r.bytes,
            [&](auto* c, auto& q, auto* p) { return s.GetStatus(c, q, p); },
            &status);
        break;
      case 7:
        if (!MigrationIsLocal(backend)) break;
        sent = Invoke<v1::AddServerRequest, v1::MembershipChangeResponse>(
            r.bytes,
            [&](auto* c, auto& q, auto* p) { return s.AddServer(c, q, p); },
            &status);
        break;
      case 8:
        if (!MigrationIsLocal(backend)) break;
        sent = Invoke<v1::DrainServerRequest, v1::MembershipChangeResponse>(
            r.bytes,
            [&](auto* c, auto& q, auto* p) { return s.DrainServer(c, q, p); },
            &status);
        break;
      case 9:
        sent = Invoke<v1::RendezvousSetRequest, v1::RendezvousSetResponse>(
            r.bytes,
            [&](auto* c, auto& q, auto* p) { return s.RendezvousSet(c, q, p); },
            &status);
        break;
      case 10:
        sent = Invoke<v1::RendezvousGetRequest, v1::RendezvousGetResponse>(
            r.bytes,
            [&](auto* c, auto& q, auto* p) { return s.RendezvousGet(c, q, p); },
            &status);
        break;
    }
    if (!sent) continue;
    const std::string after = MapBytes(backend);
    if (!status.ok() &&
        status.error_code() != grpc::StatusCode::DEADLINE_EXCEEDED) {
      // DEADLINE_EXCEEDED is the client giving up: a migration may still
      // be running on the scheduler's thread, and may commit.
      PSDB_FUZZ_CHECK(
          after == before,
          absl::StrCat("a failed request (handler ", r.handler % kHandlers,
                       ": ", status.error_message(),
                       ") changed the cluster map"));
    }
    v1::ClusterMap map;
    PSDB_FUZZ_CHECK(map.ParseFromString(after), "parse map");
    PSDB_FUZZ_CHECK(
        map.version() >= last.version() && map.epoch() >= last.epoch(),
        "the map's version or epoch went back");
    CheckMap(map);
    last = std::move(map);
  }
  stub.reset();
  (*server)->Shutdown();
  return 0;
}
