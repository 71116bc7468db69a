#include "tools/bench/control_bench.h"

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "grpcpp/grpcpp.h"
#include "rpc/client/cluster_worker.h"
#include "rpc/control/scheduler_client.h"
#include "rpc/wire/convert.h"
#include "rpc/wire/psdb.grpc.pb.h"
#include "rpc/wire/tls.h"
#include "tools/bench/json_writer.h"
#include "tools/bench/machine.h"
#include "tools/bench/report.h"
#include "tools/bench/scenario.h"
#include "tools/bench/timing.h"
#include "tools/common/args.h"
#include "tools/common/child_process.h"
#include "tools/common/local_etcd.h"
#include "tools/common/reserved_port.h"
#include "tools/common/sibling_binary.h"
#include "util/status_macros.h"

namespace psdb::bench {
namespace {

using Clock = std::chrono::steady_clock;
using tools::ChildProcess;

constexpr char kUsage[] = R"(usage: ps-bench control [--json] [flags]

The control plane with its state in etcd (ps-scheduler --etcd) against the
in-process scheduler, on real processes on loopback and one local etcd that
serves before any clock starts. Each round measures: formation of 1
ps-scheduler + 3 ps-servers + 2 workers (etcd and in-process); a standby
scheduler taking the lead after the leader's SIGKILL (etcd); and a
ps-server's SIGKILL reaching every worker's watched map as DEAD (etcd, and
in-process with --heartbeat_timeout_ms = the lease TTL).

flags:
  --repeats=R                rounds of every measurement (default 5)
  --lease_ttl_s=S            etcd lease TTL of nodes and schedulers (>= 2),
                             and the in-process scheduler's heartbeat
                             timeout (default 10)
  --heartbeat_interval_ms=M  how often nodes beat; below half the TTL
                             (default 1000, ps-scheduler's)
  --etcd_members=N           members of the local etcd (default 1)
  --seed=S                   picks the ps-server each round kills (default 1)
  --bin=DIR                  ps-scheduler and ps-server (default: next to
                             ps-bench)
  --etcd_binary=PATH         etcd (default /usr/bin/etcd)
  --dir=PATH                 scratch directory (default: fresh under $TMPDIR
                             or /tmp)
  --json                     print one JSON object instead of the report
)";

constexpr int kFormationServers = 3;
constexpr int kFormationWorkers = 2;
constexpr int kKillServers = 2;
constexpr int kKillWorkers = 2;
// How often the takeover poll asks the standby.
constexpr absl::Duration kPollEvery = absl::Milliseconds(5);

struct Params {
  int repeats = 5;
  int lease_ttl_s = 10;
  int heartbeat_interval_ms = 1000;
  int etcd_members = 1;
  uint64_t seed = 1;
  std::string bin;  // --bin: where the binaries are ("": beside ps-bench)
  std::string etcd_binary = "/usr/bin/etcd";
  std::string dir;
  bool json = false;
  // The binaries' paths (FindBinaries).
  std::string ps_server;
  std::string ps_scheduler;
};

ScenarioFlags Flags() {
  return {"control",
          kUsage,
          {"repeats", "lease_ttl_s", "heartbeat_interval_ms", "etcd_members",
           "seed", "bin", "etcd_binary", "dir"}};
}

absl::StatusOr<Params> ParseParams(const tools::Args& args) {
  Params p;
  PSDB_ASSIGN_OR_RETURN(int64_t repeats,
                        args.GetInt("repeats", p.repeats, 1, 1000));
  p.repeats = static_cast<int>(repeats);
  PSDB_ASSIGN_OR_RETURN(int64_t ttl,
                        args.GetInt("lease_ttl_s", p.lease_ttl_s, 2, 3600));
  p.lease_ttl_s = static_cast<int>(ttl);
  PSDB_ASSIGN_OR_RETURN(int64_t beat,
                        args.GetInt("heartbeat_interval_ms",
                                    p.heartbeat_interval_ms, 1, 3600 * 1000));
  p.heartbeat_interval_ms = static_cast<int>(beat);
  // ps-scheduler --etcd's own rule: a lease outlives two missed beats.
  if (2 * p.heartbeat_interval_ms >= p.lease_ttl_s * 1000) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--heartbeat_interval_ms=", p.heartbeat_interval_ms,
        " must be below half of --lease_ttl_s (", p.lease_ttl_s, " s)"));
  }
  PSDB_ASSIGN_OR_RETURN(int64_t members,
                        args.GetInt("etcd_members", p.etcd_members, 1, 9));
  p.etcd_members = static_cast<int>(members);
  PSDB_ASSIGN_OR_RETURN(int64_t seed, args.GetInt("seed", 1, 0, INT64_MAX));
  p.seed = static_cast<uint64_t>(seed);
  p.bin = args.GetString("bin", "");
  p.etcd_binary = args.GetString("etcd_binary", p.etcd_binary);
  p.dir = args.GetString("dir", "");
  PSDB_ASSIGN_OR_RETURN(p.json, args.GetBool("json"));
  return p;
}

// ps-server and ps-scheduler in --bin, or beside ps-bench.
absl::Status FindBinaries(Params* p) {
  PSDB_ASSIGN_OR_RETURN(p->ps_server,
                        tools::SiblingBinary("ps-server", p->bin));
  PSDB_ASSIGN_OR_RETURN(p->ps_scheduler,
                        tools::SiblingBinary("ps-scheduler", p->bin));
  return absl::OkStatus();
}

double SinceS(Clock::time_point from, Clock::time_point to = Clock::now()) {
  return std::chrono::duration<double>(to - from).count();
}

// ---- processes and clients -------------------------------------------------

// What every measurement shares: the flags, the scratch directory and the
// etcd endpoints.
struct Env {
  const Params& p;
  std::string dir;
  std::string etcd;
  // A fresh subdirectory of dir for one measurement of one round.
  std::string Sub(absl::string_view what, int round) const {
    const std::string d = absl::StrCat(dir, "/", what, "-", round);
    std::filesystem::create_directories(d);
    return d;
  }
};

// A ps-scheduler for `servers` servers and `workers` workers, its state in
// etcd under `cluster` (or in the process when `cluster` is empty), its log
// at `log`. Ready once it listens; ready_value() is its address.
absl::StatusOr<std::unique_ptr<ChildProcess>> StartScheduler(
    const Env& env, const std::string& cluster, int servers, int workers,
    const std::string& log) {
  const Params& p = env.p;
  const tools::ReservedPort held;  // until it listens on it
  tools::ChildOptions o;
  o.binary = p.ps_scheduler;
  o.env = {{"PS_SERVER_NUM", absl::StrCat(servers)},
           {"PS_WORKER_NUM", absl::StrCat(workers)},
           {"PS_SCHED_PORT", absl::StrCat(held.port())}};
  o.args = {absl::StrCat("--heartbeat_interval_ms=", p.heartbeat_interval_ms),
            absl::StrCat("--heartbeat_timeout_ms=", p.lease_ttl_s * 1000)};
  if (!cluster.empty()) {
    o.args.push_back("--etcd=" + env.etcd);
    o.args.push_back("--cluster=" + cluster);
    o.args.push_back(absl::StrCat("--lease_ttl_s=", p.lease_ttl_s));
  }
  o.ready_prefix = "scheduler listening on ";
  o.log = log;
  return ChildProcess::Start(o);
}

// ps-server `node_id` joining the schedulers at `sched`; Start returns once
// it prints its listening line, which it does once the cluster is ready.
absl::StatusOr<std::unique_ptr<ChildProcess>> StartServer(
    const Env& env, const std::string& sched, const std::string& node_id,
    const std::string& dir) {
  tools::ChildOptions o;
  o.binary = env.p.ps_server;
  o.env = {{"PS_SCHED_ADDRESSES", sched}, {"PS_NODE_ID", node_id}};
  o.args = {"--data_dir=" + dir + "/" + node_id, "--threads=2"};
  o.ready_prefix = "listening on ";
  o.log = dir + "/" + node_id + ".log";
  o.timeout = absl::Seconds(120);
  return ChildProcess::Start(o);
}

// A worker of the cluster at `sched` that holds only a SchedulerClient:
// registered, beating, its map watch open.
absl::StatusOr<std::unique_ptr<rpc::SchedulerClient>> JoinWatcher(
    const std::string& sched, const std::string& node_id) {
  rpc::SchedulerClientOptions o;
  o.address = sched;
  o.call_timeout = absl::Seconds(10);
  PSDB_ASSIGN_OR_RETURN(std::unique_ptr<rpc::SchedulerClient> client,
                        rpc::SchedulerClient::Open(o));
  v1::RegisterRequest req;
  req.set_node_id(node_id);
  req.set_role(v1::NODE_ROLE_WORKER);
  PSDB_RETURN_IF_ERROR(client->Register(req, absl::Seconds(60)).status());
  client->StartHeartbeats();
  return client;
}

// Waits until `client`'s latest_map() satisfies `done`, by WaitForMapVersion
// (the watch's deliveries), for at most `timeout`.
absl::Status WaitForMap(rpc::SchedulerClient& client,
                        const std::function<bool(const v1::ClusterMap&)>& done,
                        absl::Duration timeout, absl::string_view what) {
  const absl::Time deadline = absl::Now() + timeout;
  while (true) {
    const std::optional<v1::ClusterMap> map = client.latest_map();
    if (map.has_value() && done(*map)) return absl::OkStatus();
    const absl::Duration left = deadline - absl::Now();
    if (left <= absl::ZeroDuration()) {
      return absl::DeadlineExceededError(absl::StrCat(
          "no map with ", what, " after ", absl::FormatDuration(timeout),
          "; the last: ", map.has_value() ? map->ShortDebugString() : "none"));
    }
    absl::StatusOr<v1::ClusterMap> next =
        client.WaitForMapVersion(map.has_value() ? map->version() : 0, left);
    if (!next.ok() && !absl::IsDeadlineExceeded(next.status())) {
      return next.status();
    }
  }
}

bool ReadyAndAlive(const v1::ClusterMap& map) {
  if (!map.ready()) return false;
  for (const v1::NodeEntry& s : map.servers()) {
    if (s.state() != v1::NODE_STATE_ALIVE) return false;
  }
  return true;
}

bool ServerDead(const v1::ClusterMap& map, const std::string& node_id) {
  for (const v1::NodeEntry& s : map.servers()) {
    if (s.node_id() == node_id) return s.state() == v1::NODE_STATE_DEAD;
  }
  return false;
}

// The scheduler at `address`'s status, asked with a 1 s deadline.
absl::StatusOr<v1::SchedulerStatus> GetStatus(
    v1::SchedulerService::Stub& stub) {
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(1));
  v1::SchedulerStatus status;
  PSDB_RETURN_IF_ERROR(rpc::FromGrpcStatus(
      stub.GetStatus(&ctx, v1::GetSchedulerStatusRequest(), &status)));
  return status;
}

absl::StatusOr<std::unique_ptr<v1::SchedulerService::Stub>> StatusStub(
    const std::string& address) {
  PSDB_ASSIGN_OR_RETURN(std::shared_ptr<grpc::Channel> channel,
                        rpc::MakeChannel(rpc::ClientTlsOptions(), address));
  return v1::SchedulerService::NewStub(channel);
}

// ---- the measurements ------------------------------------------------------

// 1. From starting ps-scheduler until 3 servers listen and 2 workers joined.
struct FormationTime {
  double total = 0;    // the later of the two below
  double servers = 0;  // the last ps-server's listening line
  double workers = 0;  // the last ClusterWorker::Join's return
};

absl::StatusOr<FormationTime> Formation(const Env& env, bool etcd, int round) {
  const std::string dir = env.Sub(etcd ? "form-etcd" : "form-memory", round);
  const std::string cluster =
      etcd ? absl::StrCat("ctl-form-", round) : std::string();
  std::vector<std::unique_ptr<ChildProcess>> servers(kFormationServers);
  std::vector<std::unique_ptr<rpc::ClusterWorker>> workers(kFormationWorkers);
  std::vector<double> done(kFormationServers + kFormationWorkers, 0);
  const Clock::time_point start = Clock::now();
  PSDB_ASSIGN_OR_RETURN(
      std::unique_ptr<ChildProcess> sched,
      StartScheduler(env, cluster, kFormationServers, kFormationWorkers,
                     dir + "/scheduler.log"));
  const std::string address = sched->ready_value();
  absl::Status joined =
      RunThreads(
          kFormationServers + kFormationWorkers,
          [&](int t) -> absl::Status {
            if (t < kFormationServers) {
              PSDB_ASSIGN_OR_RETURN(
                  servers[t],
                  StartServer(env, address, absl::StrCat("server-", t), dir));
            } else {
              const int w = t - kFormationServers;
              rpc::ClusterWorkerOptions o;
              o.scheduler = address;
              o.node_id = absl::StrCat("worker-", w);
              o.wait_ready = absl::Seconds(120);
              PSDB_ASSIGN_OR_RETURN(workers[w], rpc::ClusterWorker::Join(o));
            }
            done[t] = SinceS(start);
            return absl::OkStatus();
          })
          .status();
  FormationTime time;
  time.total = SinceS(start);
  time.servers =
      *std::max_element(done.begin(), done.begin() + kFormationServers);
  time.workers =
      *std::max_element(done.begin() + kFormationServers, done.end());
  // Workers first: their heartbeats need a scheduler to stop quickly.
  workers.clear();
  PSDB_RETURN_IF_ERROR(joined);
  return time;
}

// 2. From SIGKILL of the leading scheduler until the standby leads.
struct TakeoverTime {
  double seconds = 0;  // the kill to the standby's GetStatus saying leader
  // The kill less the moment the leader printed its listening line (just
  // before it took its lease and campaigned): the leader's age at the kill.
  double up_s = 0;
};

absl::StatusOr<TakeoverTime> Takeover(const Env& env, int round) {
  const std::string dir = env.Sub("takeover", round);
  const std::string cluster = absl::StrCat("ctl-lead-", round);
  std::vector<std::unique_ptr<ChildProcess>> sched;
  std::vector<std::unique_ptr<v1::SchedulerService::Stub>> stubs;
  std::vector<Clock::time_point> listening;
  for (int i = 0; i < 2; ++i) {
    PSDB_ASSIGN_OR_RETURN(
        std::unique_ptr<ChildProcess> s,
        StartScheduler(env, cluster, 1, 1,
                       absl::StrCat(dir, "/scheduler-", i, ".log")));
    listening.push_back(Clock::now());
    PSDB_ASSIGN_OR_RETURN(auto stub, StatusStub(s->ready_value()));
    sched.push_back(std::move(s));
    stubs.push_back(std::move(stub));
  }
  // One leads, the other has seen it and stands by.
  int leader = -1;
  const absl::Time deadline =
      absl::Now() + absl::Seconds(60 + 2 * env.p.lease_ttl_s);
  while (leader == -1) {
    if (absl::Now() > deadline) {
      return absl::DeadlineExceededError(
          absl::StrCat("cluster '", cluster, "': no leader and standby in ",
                       dir, " (see the scheduler logs there)"));
    }
    absl::StatusOr<v1::SchedulerStatus> a = GetStatus(*stubs[0]);
    absl::StatusOr<v1::SchedulerStatus> b = GetStatus(*stubs[1]);
    if (a.ok() && b.ok() && a->leader() != b->leader()) {
      const int l = a->leader() ? 0 : 1;
      if (sched[1 - l]->Stderr().find("standing by") != std::string::npos) {
        leader = l;
        break;
      }
    }
    absl::SleepFor(kPollEvery);
  }
  const int standby = 1 - leader;
  const Clock::time_point killed = Clock::now();
  sched[leader]->Signal(SIGKILL);
  const absl::Time until =
      absl::Now() + absl::Seconds(60 + 3 * env.p.lease_ttl_s);
  while (true) {
    absl::StatusOr<v1::SchedulerStatus> s = GetStatus(*stubs[standby]);
    if (s.ok() && s->leader()) break;
    if (absl::Now() > until) {
      return absl::DeadlineExceededError(
          absl::StrCat("cluster '", cluster, "': the standby ",
                       sched[standby]->ready_value(), " did not lead within ",
                       60 + 3 * env.p.lease_ttl_s,
                       " s of the leader's SIGKILL (logs in ", dir, ")"));
    }
    absl::SleepFor(kPollEvery);
  }
  TakeoverTime time{.seconds = SinceS(killed),
                    .up_s = SinceS(listening[leader], killed)};
  (void)sched[leader]->Wait(absl::Seconds(10));
  return time;
}

// 3. From SIGKILL of one ps-server until every worker's watched map shows
// it dead.
struct KillTime {
  double seconds = 0;  // the kill to the last worker's map showing it DEAD
  // The kill less the moment the victim printed its listening line (after
  // it registered, which granted its lease): a lower bound of the time
  // from its registration to the kill.
  double up_s = 0;
};

absl::StatusOr<KillTime> KillToMap(const Env& env, bool etcd, int round) {
  const std::string dir = env.Sub(etcd ? "kill-etcd" : "kill-memory", round);
  const std::string cluster =
      etcd ? absl::StrCat("ctl-kill-", round) : std::string();
  std::vector<std::unique_ptr<ChildProcess>> sched;
  std::string addresses;
  for (int i = 0; i < (etcd ? 2 : 1); ++i) {
    PSDB_ASSIGN_OR_RETURN(
        std::unique_ptr<ChildProcess> s,
        StartScheduler(env, cluster, kKillServers, kKillWorkers,
                       absl::StrCat(dir, "/scheduler-", i, ".log")));
    absl::StrAppend(&addresses, i == 0 ? "" : ",", s->ready_value());
    sched.push_back(std::move(s));
  }
  std::vector<std::unique_ptr<ChildProcess>> servers(kKillServers);
  std::vector<std::unique_ptr<rpc::SchedulerClient>> workers(kKillWorkers);
  std::vector<Clock::time_point> listening(kKillServers);
  auto measure = [&]() -> absl::StatusOr<KillTime> {
    PSDB_RETURN_IF_ERROR(
        RunThreads(kKillServers + kKillWorkers, [&](int t) -> absl::Status {
          if (t < kKillServers) {
            PSDB_ASSIGN_OR_RETURN(
                servers[t],
                StartServer(env, addresses, absl::StrCat("server-", t), dir));
            listening[t] = Clock::now();
            return absl::OkStatus();
          }
          const int w = t - kKillServers;
          PSDB_ASSIGN_OR_RETURN(
              workers[w], JoinWatcher(addresses, absl::StrCat("worker-", w)));
          return WaitForMap(*workers[w], &ReadyAndAlive, absl::Seconds(120),
                            "every server alive");
        }).status());
    // The server killed: rank by seed and round (servers' ids are their
    // start order, not their ranks; the map says which id has the rank).
    const int victim_rank =
        static_cast<int>((env.p.seed + static_cast<uint64_t>(round)) %
                         static_cast<uint64_t>(kKillServers));
    const std::optional<v1::ClusterMap> map = workers[0]->latest_map();
    std::string victim;
    for (const v1::NodeEntry& s : map->servers()) {
      if (s.rank() == victim_rank) victim = s.node_id();
    }
    int index = -1;
    for (int i = 0; i < kKillServers; ++i) {
      if (victim == absl::StrCat("server-", i)) index = i;
    }
    if (index < 0) {
      return absl::InternalError(absl::StrCat("no server of rank ", victim_rank,
                                              " in ", map->ShortDebugString()));
    }
    // Each worker waits on its own thread (started just after the kill; a
    // map that arrived in between is seen at once) and notes when its map
    // shows the server dead.
    std::vector<double> seen(kKillWorkers, NAN);
    const Clock::time_point killed = Clock::now();
    servers[index]->Signal(SIGKILL);
    PSDB_RETURN_IF_ERROR(
        RunThreads(kKillWorkers, [&](int w) -> absl::Status {
          PSDB_RETURN_IF_ERROR(WaitForMap(
              *workers[w],
              [&](const v1::ClusterMap& m) { return ServerDead(m, victim); },
              absl::Seconds(60 + 3 * env.p.lease_ttl_s),
              absl::StrCat(victim, " dead")));
          seen[w] = SinceS(killed);
          return absl::OkStatus();
        }).status());
    (void)servers[index]->Wait(absl::Seconds(10));
    return KillTime{.seconds = *std::max_element(seen.begin(), seen.end()),
                    .up_s = SinceS(listening[index], killed)};
  };
  absl::StatusOr<KillTime> time = measure();
  workers.clear();  // before the schedulers go: their beats stop at once
  return time;
}

// ---- reporting -------------------------------------------------------------

struct Results {
  Series formation_etcd{"formation_etcd",
                        "formation, etcd (1 scheduler, 3 servers, 2 workers)",
                        3};
  Series formation_etcd_servers{"formation_etcd_servers",
                                "  the last server listening", 3};
  Series formation_etcd_workers{"formation_etcd_workers",
                                "  the last worker joined", 3};
  Series formation_memory{"formation_memory", "formation, in-process", 3};
  Series formation_memory_servers{"formation_memory_servers",
                                  "  the last server listening", 3};
  Series formation_memory_workers{"formation_memory_workers",
                                  "  the last worker joined", 3};
  Series takeover{"takeover", "standby leads after the leader's SIGKILL (etcd)",
                  3};
  Series takeover_up{"takeover_leader_up",
                     "  (leader listening before the kill)", 3};
  Series kill_etcd{"kill_to_map_etcd",
                   "server SIGKILL to every worker's map DEAD, etcd", 3};
  Series kill_memory{"kill_to_map_memory",
                     "server SIGKILL to every worker's map DEAD, in-process",
                     3};
  // kill_etcd and kill_memory less the TTL: detection and propagation.
  Series kill_etcd_minus{"kill_to_map_etcd_minus_ttl", "  less the lease TTL",
                         3};
  Series kill_memory_minus{"kill_to_map_memory_minus_timeout",
                           "  less the heartbeat timeout", 3};
  // The victim's listening line to the kill (KillTime::up_s).
  Series kill_etcd_up{"kill_to_map_etcd_victim_up",
                      "  (victim listening before the kill)", 3};
  Series kill_memory_up{"kill_to_map_memory_victim_up",
                        "  (victim listening before the kill)", 3};

  std::vector<const Series*> All() const {
    return {&formation_etcd,
            &formation_etcd_servers,
            &formation_etcd_workers,
            &formation_memory,
            &formation_memory_servers,
            &formation_memory_workers,
            &takeover,
            &takeover_up,
            &kill_etcd,
            &kill_etcd_minus,
            &kill_etcd_up,
            &kill_memory,
            &kill_memory_minus,
            &kill_memory_up};
  }
};

std::vector<Ratio> Ratios(const Params& p, const Results& r) {
  std::vector<Ratio> ratios = {
      {.name = "formation_etcd_vs_memory",
       .note = "formation time, etcd over in-process"},
      {.name = "takeover_vs_ttl", .note = "takeover time over the lease TTL"},
      {.name = "kill_to_map_etcd_vs_ttl",
       .note = "kill-to-map time over the lease TTL"},
      {.name = "kill_to_map_memory_vs_timeout",
       .note = "in-process: the same over the heartbeat timeout"},
  };
  const double ttl = p.lease_ttl_s;
  for (int i = 0; i < p.repeats; ++i) {
    ratios[0].rounds.push_back(r.formation_etcd.rounds[i] /
                               r.formation_memory.rounds[i]);
    ratios[1].rounds.push_back(r.takeover.rounds[i] / ttl);
    ratios[2].rounds.push_back(r.kill_etcd.rounds[i] / ttl);
    ratios[3].rounds.push_back(r.kill_memory.rounds[i] / ttl);
  }
  return ratios;
}

void PrintReport(const Params& p, const MachineInfo& m, const Results& r,
                 const std::vector<Ratio>& ratios, std::ostream& out) {
  out << "ps-bench control\n";
  out << absl::StrFormat("machine     %d cores, %s, %.2f GiB RAM\n", m.cores,
                         m.cpu_model, m.memory_bytes / double(1ull << 30));
  out << absl::StrFormat(
      "parameters  repeats=%d lease_ttl_s=%d heartbeat_interval_ms=%d "
      "etcd_members=%d seed=%d\n"
      "            (in-process: --heartbeat_timeout_ms=%d)\n\n",
      p.repeats, p.lease_ttl_s, p.heartbeat_interval_ms, p.etcd_members, p.seed,
      p.lease_ttl_s * 1000);
  out << absl::StrFormat("%-56s %9s %9s %9s\n", "seconds", "median", "min",
                         "max");
  for (const Series* s : r.All()) {
    out << absl::StrFormat("%-56s %9.*f %9.*f %9.*f\n", s->label, s->decimals,
                           s->Median(), s->decimals, s->Min(), s->decimals,
                           s->Max());
  }
  out << "\n";
  PrintRatios(ratios, out);
}

void PrintJson(const Params& p, const MachineInfo& m, const Results& r,
               const std::vector<Ratio>& ratios, std::ostream& out) {
  Json j = StartReportJson("control", m);
  j["params"] = {{"repeats", p.repeats},
                 {"lease_ttl_s", p.lease_ttl_s},
                 {"heartbeat_interval_ms", p.heartbeat_interval_ms},
                 {"heartbeat_timeout_ms", p.lease_ttl_s * 1000},
                 {"etcd_members", p.etcd_members},
                 {"seed", p.seed},
                 {"formation_servers", kFormationServers},
                 {"formation_workers", kFormationWorkers},
                 {"kill_servers", kKillServers},
                 {"kill_workers", kKillWorkers}};
  Json times = Json::object();
  for (const Series* s : r.All()) times[s->id] = SeriesJson(*s);
  j["times_s"] = std::move(times);
  AddRatiosJson(ratios, &j);
  WriteJson(j, out);
}

absl::StatusOr<Results> MeasureAll(const Params& p, const std::string& dir,
                                   std::ostream& log) {
  tools::LocalEtcdOptions etcd_options;
  etcd_options.dir = dir + "/etcd";
  std::filesystem::create_directories(etcd_options.dir);
  etcd_options.members = p.etcd_members;
  etcd_options.binary = p.etcd_binary;
  PSDB_ASSIGN_OR_RETURN(std::unique_ptr<tools::LocalEtcd> etcd,
                        tools::LocalEtcd::Start(etcd_options));
  const Env env{p, dir, etcd->endpoints()};
  Results r;
  for (int round = 0; round < p.repeats; ++round) {
    PSDB_ASSIGN_OR_RETURN(FormationTime fe, Formation(env, true, round));
    PSDB_ASSIGN_OR_RETURN(FormationTime fm, Formation(env, false, round));
    PSDB_ASSIGN_OR_RETURN(TakeoverTime take, Takeover(env, round));
    PSDB_ASSIGN_OR_RETURN(KillTime ke, KillToMap(env, true, round));
    PSDB_ASSIGN_OR_RETURN(KillTime km, KillToMap(env, false, round));
    r.formation_etcd.rounds.push_back(fe.total);
    r.formation_etcd_servers.rounds.push_back(fe.servers);
    r.formation_etcd_workers.rounds.push_back(fe.workers);
    r.formation_memory.rounds.push_back(fm.total);
    r.formation_memory_servers.rounds.push_back(fm.servers);
    r.formation_memory_workers.rounds.push_back(fm.workers);
    r.takeover.rounds.push_back(take.seconds);
    r.takeover_up.rounds.push_back(take.up_s);
    r.kill_etcd.rounds.push_back(ke.seconds);
    r.kill_etcd_minus.rounds.push_back(ke.seconds - p.lease_ttl_s);
    r.kill_etcd_up.rounds.push_back(ke.up_s);
    r.kill_memory.rounds.push_back(km.seconds);
    r.kill_memory_minus.rounds.push_back(km.seconds - p.lease_ttl_s);
    r.kill_memory_up.rounds.push_back(km.up_s);
    log << absl::StrFormat(
        "ps-bench control: round %d/%d: formation etcd %.3f s, in-process "
        "%.3f s; takeover %.3f s; server kill to every map: etcd %.3f s, "
        "in-process %.3f s (ttl %d s)\n",
        round + 1, p.repeats, fe.total, fm.total, take.seconds, ke.seconds,
        km.seconds, p.lease_ttl_s);
  }
  return r;
}

absl::Status Run(const Params& p, std::ostream& out, std::ostream& log) {
  return MeasureAndReport(p, "control", out, log, &MeasureAll, &Ratios,
                          &PrintJson, &PrintReport);
}

}  // namespace

int RunControlBench(int argc, const char* const* argv, std::ostream& out,
                    std::ostream& err) {
  return RunScenario<Params>(Flags(), argc, argv, out, err, &ParseParams,
                             [&](Params& p) -> absl::Status {
                               PSDB_RETURN_IF_ERROR(FindBinaries(&p));
                               return Run(p, out, err);
                             });
}

}  // namespace psdb::bench
