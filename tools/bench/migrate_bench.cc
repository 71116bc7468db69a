#include "tools/bench/migrate_bench.h"

#include <signal.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "grpcpp/grpcpp.h"
#include "optim/optimizer.h"
#include "psdb/row.h"
#include "psdb/table_spec.h"
#include "rpc/client/cluster_worker.h"
#include "rpc/client/remote_client.h"
#include "rpc/control/admin_membership.h"
#include "rpc/control/scheduler_client.h"
#include "rpc/wire/cluster_map_proto.h"
#include "rpc/wire/psdb.grpc.pb.h"
#include "rpc/wire/tls.h"
#include "shard/cluster_map.h"
#include "tools/bench/json_writer.h"
#include "tools/bench/machine.h"
#include "tools/bench/process_cpu.h"
#include "tools/bench/report.h"
#include "tools/bench/scenario.h"
#include "tools/bench/timing.h"
#include "tools/bench/zipf.h"
#include "tools/common/args.h"
#include "tools/common/child_process.h"
#include "tools/common/reserved_port.h"
#include "tools/common/sibling_binary.h"
#include "util/status_macros.h"

namespace psdb::bench {
namespace {

using Clock = std::chrono::steady_clock;
using tools::ChildProcess;

constexpr char kUsage[] = R"(usage: ps-bench migrate [--json] [flags]

Live resharding on real processes on loopback: 1 ps-scheduler + 3 ps-servers
with one table (dim 64, Adagrad) of --rows rows. Each round: a peer moves
the rows a joining server would get through the public API (PullRows from
the cluster, PutRows to a lone ps-server); then ps-scheduler add-server
moves them (rows/s, and the COPY phase's); then a second add-server runs
while --workers threads train (Pull + Push of Zipf keys): samples/s before,
during and after it.

flags:
  --rows=N          rows in the table (default 300000)
  --batch_rows=N    rows per Migrate call, and per PullRows / PutRows call
                    of the peer (default 1024, the servers' default)
  --workers=N       training threads during the second add (default 2)
  --train_batch=N   keys per Pull + Push of a training thread (default 512)
  --window_s=S      training window before and after the second add
                    (default 3)
  --alpha=A         Zipf exponent of the training keys (default 1.05)
  --repeats=R       rounds, each on a fresh cluster (default 3)
  --seed=S          training key streams (default 1)
  --checkpoint_first=B  true: checkpoint the cluster after the fill
                    (untimed), so the rows are clean and COPY, which starts
                    by writing every dirty row of its server to RocksDB,
                    has none to write (default false)
  --bin=DIR         ps-scheduler and ps-server (default: next to ps-bench)
  --dir=PATH        scratch directory (default: fresh under $TMPDIR or /tmp)
  --json            print one JSON object instead of the report
)";

constexpr int kServers = 3;
constexpr int kDim = 64;
constexpr char kTable[] = "emb";
// Rows per PutRows call while filling the table (not timed).
constexpr size_t kFillBatch = 8192;

struct Params {
  uint64_t rows = 300000;
  int batch_rows = 1024;
  int workers = 2;
  int train_batch = 512;
  double window_s = 3;
  double alpha = 1.05;
  int repeats = 3;
  uint64_t seed = 1;
  bool checkpoint_first = false;
  std::string bin;  // --bin: where the binaries are ("": beside ps-bench)
  std::string dir;
  bool json = false;
  // The binaries' paths (FindBinaries).
  std::string ps_server;
  std::string ps_scheduler;
};

ScenarioFlags Flags() {
  return {"migrate",
          kUsage,
          {"rows", "batch_rows", "workers", "train_batch", "window_s", "alpha",
           "repeats", "seed", "checkpoint_first", "bin", "dir"}};
}

absl::StatusOr<Params> ParseParams(const tools::Args& args) {
  Params p;
  PSDB_ASSIGN_OR_RETURN(int64_t rows,
                        args.GetInt("rows", p.rows, 1, int64_t{1} << 32));
  p.rows = static_cast<uint64_t>(rows);
  PSDB_ASSIGN_OR_RETURN(int64_t batch,
                        args.GetInt("batch_rows", p.batch_rows, 1, 65536));
  p.batch_rows = static_cast<int>(batch);
  PSDB_ASSIGN_OR_RETURN(int64_t workers,
                        args.GetInt("workers", p.workers, 1, 256));
  p.workers = static_cast<int>(workers);
  PSDB_ASSIGN_OR_RETURN(int64_t train,
                        args.GetInt("train_batch", p.train_batch, 1, 65536));
  p.train_batch = static_cast<int>(train);
  PSDB_ASSIGN_OR_RETURN(p.window_s,
                        args.GetDouble("window_s", p.window_s, 0.01, 3600));
  PSDB_ASSIGN_OR_RETURN(p.alpha, args.GetDouble("alpha", p.alpha, 0.01, 10));
  PSDB_ASSIGN_OR_RETURN(int64_t repeats,
                        args.GetInt("repeats", p.repeats, 1, 1000));
  p.repeats = static_cast<int>(repeats);
  PSDB_ASSIGN_OR_RETURN(int64_t seed, args.GetInt("seed", 1, 0, INT64_MAX));
  p.seed = static_cast<uint64_t>(seed);
  PSDB_ASSIGN_OR_RETURN(p.checkpoint_first, args.GetBool("checkpoint_first"));
  p.bin = args.GetString("bin", "");
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

TableSpec BenchTable() {
  TableSpec spec;
  spec.name = kTable;
  spec.dim = kDim;
  spec.optimizer.kind = optim::OptimizerKind::kAdagrad;
  spec.optimizer.learning_rate = 0.05f;
  spec.seed = 7;
  return spec;
}

// ---- processes and clients -------------------------------------------------

absl::StatusOr<std::unique_ptr<ChildProcess>> StartScheduler(
    const Params& p, const std::string& dir) {
  const tools::ReservedPort held;  // until it listens on it
  tools::ChildOptions o;
  o.binary = p.ps_scheduler;
  o.env = {{"PS_SERVER_NUM", absl::StrCat(kServers)},
           {"PS_WORKER_NUM", "0"},
           {"PS_SCHED_PORT", absl::StrCat(held.port())}};
  o.ready_prefix = "scheduler listening on ";
  o.log = dir + "/scheduler.log";
  return ChildProcess::Start(o);
}

// ps-server `node_id` of the cluster at `sched` (with --join: joining the
// running cluster); Start returns once it prints its listening line.
absl::StatusOr<std::unique_ptr<ChildProcess>> StartClusterServer(
    const Params& p, const std::string& sched, const std::string& node_id,
    const std::string& dir, bool join) {
  tools::ChildOptions o;
  o.binary = p.ps_server;
  o.env = {{"PS_SCHED_ADDRESSES", sched}, {"PS_NODE_ID", node_id}};
  o.args = {"--data_dir=" + dir + "/" + node_id};
  if (join) o.args.push_back("--join");
  o.ready_prefix = "listening on ";
  o.log = dir + "/" + node_id + ".log";
  o.timeout = absl::Seconds(120);
  return ChildProcess::Start(o);
}

// The peer's destination: a ps-server alone (it owns every key).
absl::StatusOr<std::unique_ptr<ChildProcess>> StartLoneServer(
    const Params& p, const std::string& dir) {
  tools::ChildOptions o;
  o.binary = p.ps_server;
  o.args = {"--data_dir=" + dir + "/lone", "--port=0"};
  o.ready_prefix = "listening on ";
  o.log = dir + "/lone.log";
  return ChildProcess::Start(o);
}

absl::StatusOr<std::unique_ptr<rpc::RemoteClient>> ClusterClient(
    const std::string& sched) {
  rpc::RemoteClientOptions o;
  o.call_timeout = absl::Seconds(120);
  return rpc::OpenSchedulerRemoteClient(sched, o, absl::Seconds(120));
}

// Writes rows 0..rows-1 of "emb": values and Adagrad accumulators that
// differ per row and column, headers of one update at step 1.
absl::Status Fill(const Params& p, rpc::RemoteClient& client) {
  const int state_size = optim::StateSize(BenchTable().optimizer, kDim);
  std::vector<uint64_t> keys;
  RowBatch rows;
  for (uint64_t begin = 0; begin < p.rows; begin += kFillBatch) {
    const uint64_t end = std::min<uint64_t>(p.rows, begin + kFillBatch);
    keys.clear();
    rows.Resize(kDim, state_size, end - begin);
    for (uint64_t k = begin; k < end; ++k) {
      const size_t i = k - begin;
      keys.push_back(k);
      for (int c = 0; c < kDim; ++c) {
        rows.values[i * kDim + c] = 0.001f * static_cast<float>((k + c) % 97);
      }
      for (int c = 0; c < state_size; ++c) {
        rows.state[i * state_size + c] =
            0.1f + 0.01f * static_cast<float>((k * 3 + c) % 89);
      }
      rows.headers[i] = {
          .last_update_step = 1, .update_count = 1, .frequency = 1};
    }
    PSDB_RETURN_IF_ERROR(client.PutRows(kTable, keys, rows));
  }
  return absl::OkStatus();
}

// The keys of 0..rows-1 that the scheduler's map with `node_id` (JOINING)
// put on the ring gives to `node_id`: the rows an add of it moves.
absl::StatusOr<std::vector<uint64_t>> KeysMovedTo(const Params& p,
                                                  const std::string& sched,
                                                  const std::string& node_id) {
  rpc::SchedulerClientOptions o;
  o.address = sched;
  PSDB_ASSIGN_OR_RETURN(std::unique_ptr<rpc::SchedulerClient> client,
                        rpc::SchedulerClient::Open(o));
  PSDB_ASSIGN_OR_RETURN(v1::ClusterMap wire,
                        client->GetClusterMap(absl::Seconds(60)));
  int rank = -1;
  for (const v1::NodeEntry& s : wire.servers()) {
    if (s.node_id() == node_id) rank = s.rank();
  }
  if (rank < 0) {
    return absl::InternalError(absl::StrCat("no server '", node_id,
                                            "' in the scheduler's map ",
                                            wire.ShortDebugString()));
  }
  PSDB_ASSIGN_OR_RETURN(ClusterMap now, rpc::ClusterMapFromProto(wire));
  PSDB_ASSIGN_OR_RETURN(ClusterMap target,
                        now.WithState(rank, ServerState::kAlive));
  std::vector<uint64_t> keys;
  for (uint64_t k = 0; k < p.rows; ++k) {
    if (target.Owner(k) == rank) keys.push_back(k);
  }
  return keys;
}

// ---- the measurements ------------------------------------------------------

// 1. The peer: PullRows from the cluster, PutRows to the lone server, one
// batch at a time. Returns its seconds.
absl::StatusOr<double> Peer(const Params& p, rpc::RemoteClient& cluster,
                            rpc::RemoteClient& lone,
                            const std::vector<uint64_t>& keys) {
  RowBatch rows;
  const Clock::time_point start = Clock::now();
  for (size_t begin = 0; begin < keys.size(); begin += p.batch_rows) {
    const absl::Span<const uint64_t> batch =
        absl::MakeConstSpan(keys).subspan(begin, p.batch_rows);
    PSDB_RETURN_IF_ERROR(cluster.PullRows(kTable, batch, &rows));
    PSDB_RETURN_IF_ERROR(lone.PutRows(kTable, batch, rows));
  }
  return SinceS(start);
}

// The coordinator's phases as MigrationStatus times them, in order:
// prepare, copy, handoff (CLOSE, HANDOFF, publish), commit (COMMIT).
constexpr int kNumPhases = 4;

struct AddTime {
  double seconds = 0;  // AddServer's call to its return
  // Per phase: the coordinator's MigrationStatus.*_seconds.
  double phase_seconds[kNumPhases] = {NAN, NAN, NAN, NAN};
  uint64_t rows_moved = 0;
  double copy_seconds() const { return phase_seconds[1]; }
};

// 2. and 3. One add-server of `node_id`, timed, with its phases as the
// coordinator timed them.
absl::StatusOr<AddTime> AddServer(const Params& p, const std::string& sched,
                                  const std::string& node_id) {
  rpc::AdminMembershipOptions o;
  o.scheduler_address = sched;
  o.kind = rpc::MembershipChange::Kind::kAdd;
  o.node_id = node_id;
  o.batch_rows = p.batch_rows;
  // No progress polls: they would cost CPU the peer's timing does not pay.
  o.progress_interval = absl::Hours(1);
  const Clock::time_point start = Clock::now();
  absl::StatusOr<v1::MigrationStatus> result =
      rpc::AdminMembershipChange(o, nullptr);
  const Clock::time_point end = Clock::now();
  PSDB_RETURN_IF_ERROR(result.status());
  AddTime time;
  time.seconds = SinceS(start, end);
  time.rows_moved = result->rows_moved();
  time.phase_seconds[0] = result->prepare_seconds();
  time.phase_seconds[1] = result->copy_seconds();
  time.phase_seconds[2] = result->handoff_seconds();
  time.phase_seconds[3] = result->commit_seconds();
  return time;
}

struct DipRates {
  double before = 0;  // samples (keys) per second
  double during = 0;
  double after = 0;
  AddTime add;
};

// 3. Training threads on the cluster while `node_id` is added.
absl::StatusOr<DipRates> Dip(const Params& p, const std::string& sched,
                             const std::string& node_id, int round) {
  std::vector<std::unique_ptr<rpc::RemoteClient>> clients;
  for (int w = 0; w < p.workers; ++w) {
    PSDB_ASSIGN_OR_RETURN(std::unique_ptr<rpc::RemoteClient> c,
                          ClusterClient(sched));
    clients.push_back(std::move(c));
  }
  const ZipfSampler zipf(p.rows, p.alpha);
  std::atomic<uint64_t> samples{0};
  std::atomic<int> started{0};
  std::atomic<bool> stop{false};
  absl::Mutex mu;
  absl::Status failed;  // the first training error
  std::vector<std::thread> threads;
  for (int w = 0; w < p.workers; ++w) {
    threads.emplace_back([&, w] {
      SplitMix rng(p.seed * 1000003 + static_cast<uint64_t>(round) * 101 +
                   static_cast<uint64_t>(w));
      std::vector<uint64_t> keys(p.train_batch);
      std::vector<float> values(keys.size() * kDim);
      std::vector<float> grads(keys.size() * kDim, 0.001f);
      bool first = true;
      while (!stop.load()) {
        for (uint64_t& k : keys) k = zipf.Sample(rng) - 1;
        absl::Status s =
            clients[w]->Pull(kTable, keys, absl::MakeSpan(values), {});
        if (s.ok()) s = clients[w]->Push(kTable, keys, grads, {});
        if (!s.ok()) {
          absl::MutexLock lock(&mu);
          if (failed.ok()) failed = s;
          stop.store(true);
          break;
        }
        samples.fetch_add(keys.size());
        if (first) started.fetch_add(1);
        first = false;
      }
      if (first) started.fetch_add(1);  // failed before its first batch
    });
  }
  auto result = [&]() -> absl::StatusOr<DipRates> {
    // Every thread past its first batch (connections made) before the clock.
    while (started.load() < p.workers) absl::SleepFor(absl::Milliseconds(1));
    const absl::Duration window = absl::Seconds(p.window_s);
    DipRates r;
    Clock::time_point t0 = Clock::now();
    uint64_t c0 = samples.load();
    absl::SleepFor(window);  // the measurement window itself
    Clock::time_point t1 = Clock::now();
    uint64_t c1 = samples.load();
    PSDB_ASSIGN_OR_RETURN(r.add, AddServer(p, sched, node_id));
    Clock::time_point t2 = Clock::now();
    uint64_t c2 = samples.load();
    absl::SleepFor(window);
    Clock::time_point t3 = Clock::now();
    uint64_t c3 = samples.load();
    r.before = static_cast<double>(c1 - c0) / SinceS(t0, t1);
    r.during = static_cast<double>(c2 - c1) / SinceS(t1, t2);
    r.after = static_cast<double>(c3 - c2) / SinceS(t2, t3);
    return r;
  }();
  stop.store(true);
  for (std::thread& t : threads) t.join();
  absl::MutexLock lock(&mu);
  if (!failed.ok()) {
    return absl::Status(failed.code(),
                        absl::StrCat("training thread: ", failed.message()));
  }
  return result;
}

// CPU seconds used so far by this process and `children`, together.
absl::StatusOr<double> CpuSeconds(
    const std::vector<const ChildProcess*>& children) {
  PSDB_ASSIGN_OR_RETURN(double total, ProcessCpuSeconds());
  for (const ChildProcess* c : children) {
    PSDB_ASSIGN_OR_RETURN(const double s, ProcessCpuSeconds(c->pid()));
    total += s;
  }
  return total;
}

struct RoundResult {
  uint64_t rows_moved = 0;
  // The keys the second add moves (its status counts more: below).
  uint64_t dip_keys = 0;
  double peer_s = 0;
  // CPU seconds of every process (this one, the scheduler, the servers)
  // while the peer ran and while the add ran.
  double peer_cpu_s = 0;
  double add_cpu_s = 0;
  AddTime add;
  DipRates dip;
};

absl::StatusOr<RoundResult> Round(const Params& p, const std::string& root,
                                  int round, std::ostream& log) {
  const std::string dir = absl::StrCat(root, "/round-", round);
  std::filesystem::create_directories(dir);
  PSDB_ASSIGN_OR_RETURN(std::unique_ptr<ChildProcess> sched,
                        StartScheduler(p, dir));
  const std::string address = sched->ready_value();
  std::vector<std::unique_ptr<ChildProcess>> servers(kServers + 2);
  // Every server of the cluster waits for the others to register.
  PSDB_RETURN_IF_ERROR(RunThreads(kServers, [&](int t) -> absl::Status {
                         PSDB_ASSIGN_OR_RETURN(
                             servers[t],
                             StartClusterServer(p, address,
                                                absl::StrCat("s", t), dir,
                                                /*join=*/false));
                         return absl::OkStatus();
                       }).status());
  PSDB_ASSIGN_OR_RETURN(std::unique_ptr<ChildProcess> lone_server,
                        StartLoneServer(p, dir));
  RoundResult r;
  // The clients close before the servers go.
  {
    PSDB_ASSIGN_OR_RETURN(std::unique_ptr<rpc::RemoteClient> cluster,
                          ClusterClient(address));
    PSDB_RETURN_IF_ERROR(cluster->CreateTable(BenchTable()));
    PSDB_RETURN_IF_ERROR(Fill(p, *cluster));
    if (p.checkpoint_first) {
      PSDB_RETURN_IF_ERROR(
          cluster->Checkpoint(dir + "/checkpoint", CheckpointOptions())
              .status());
    }
    rpc::RemoteClientOptions lone_options;
    PSDB_ASSIGN_OR_RETURN(
        lone_options.cluster,
        ClusterMap::FromAddresses({lone_server->ready_value()}));
    lone_options.call_timeout = absl::Seconds(120);
    PSDB_ASSIGN_OR_RETURN(std::unique_ptr<rpc::RemoteClient> lone,
                          rpc::RemoteClient::Open(lone_options));
    PSDB_RETURN_IF_ERROR(lone->CreateTable(BenchTable()));

    const std::string joining = absl::StrCat("s", kServers);
    PSDB_ASSIGN_OR_RETURN(
        servers[kServers],
        StartClusterServer(p, address, joining, dir, /*join=*/true));
    PSDB_ASSIGN_OR_RETURN(std::vector<uint64_t> moved,
                          KeysMovedTo(p, address, joining));
    r.rows_moved = moved.size();
    std::vector<const ChildProcess*> all = {sched.get(), lone_server.get()};
    for (int s = 0; s <= kServers; ++s) all.push_back(servers[s].get());
    PSDB_ASSIGN_OR_RETURN(const double cpu0, CpuSeconds(all));
    PSDB_ASSIGN_OR_RETURN(r.peer_s, Peer(p, *cluster, *lone, moved));
    PSDB_ASSIGN_OR_RETURN(const double cpu1, CpuSeconds(all));
    PSDB_ASSIGN_OR_RETURN(r.add, AddServer(p, address, joining));
    PSDB_ASSIGN_OR_RETURN(const double cpu2, CpuSeconds(all));
    r.peer_cpu_s = cpu1 - cpu0;
    r.add_cpu_s = cpu2 - cpu1;
    if (r.add.rows_moved != r.rows_moved) {
      return absl::InternalError(absl::StrCat(
          "add-server ", joining, " moved ", r.add.rows_moved,
          " rows but the map with it on the ring gives it ", r.rows_moved,
          " of the ", p.rows, " keys (logs in ", dir, ")"));
    }
    log << absl::StrFormat(
        "ps-bench migrate: round %d/%d: %d rows: peer %.3f s (%.3f CPU-s), "
        "add-server %.3f s (copy %.3f s; %.3f CPU-s)\n",
        round + 1, p.repeats, r.rows_moved, r.peer_s, r.peer_cpu_s,
        r.add.seconds, r.add.copy_seconds(), r.add_cpu_s);

    const std::string second = absl::StrCat("s", kServers + 1);
    PSDB_ASSIGN_OR_RETURN(
        servers[kServers + 1],
        StartClusterServer(p, address, second, dir, /*join=*/true));
    PSDB_ASSIGN_OR_RETURN(std::vector<uint64_t> dip_moved,
                          KeysMovedTo(p, address, second));
    r.dip_keys = dip_moved.size();
    PSDB_ASSIGN_OR_RETURN(r.dip, Dip(p, address, second, round));
    // HANDOFF re-sends the leaving rows that training touched since
    // PREPARE, and the status counts them again.
    if (r.dip.add.rows_moved < r.dip_keys) {
      return absl::InternalError(absl::StrCat(
          "add-server ", second, " moved ", r.dip.add.rows_moved,
          " rows but the map with it on the ring gives it ", r.dip_keys,
          " of the ", p.rows, " keys (logs in ", dir, ")"));
    }
    log << absl::StrFormat(
        "ps-bench migrate: round %d/%d: training %.0f samples/s before, %.0f "
        "during add-server %s (%.3f s, %d rows, %d sent), %.0f after\n",
        round + 1, p.repeats, r.dip.before, r.dip.during, second,
        r.dip.add.seconds, r.dip_keys, r.dip.add.rows_moved, r.dip.after);
  }
  return r;
}

// ---- reporting -------------------------------------------------------------

struct Results {
  Series rows_moved{"rows_moved", "rows moved (the joining server's keys)"};
  Series migrate{"migrate_rows_per_s", "add-server, PREPARE to COMMIT, rows/s"};
  Series migrate_s{"migrate_s", "  seconds", 3};
  Series copy{"migrate_copy_rows_per_s", "  COPY, rows/s"};
  Series copy_s{"migrate_copy_s", "  seconds", 3};
  // The other phases (the coordinator's times).
  Series prepare_s{"migrate_prepare_s", "  PREPARE, seconds", 3};
  Series handoff_s{"migrate_handoff_s", "  CLOSE + HANDOFF + publish, seconds",
                   3};
  Series commit_s{"migrate_commit_s", "  COMMIT, seconds", 3};
  // Every process of the benchmark (the client, the scheduler, the
  // servers); with both cores busy, wall time follows it.
  Series migrate_cpu_s{"migrate_cpu_s", "  CPU-seconds, every process", 3};
  Series peer{"pullrows_putrows_rows_per_s",
              "peer: PullRows from the cluster + PutRows, rows/s"};
  Series peer_s{"pullrows_putrows_s", "  seconds", 3};
  Series peer_cpu_s{"pullrows_putrows_cpu_s", "  CPU-seconds, every process",
                    3};
  Series before{"train_before_samples_per_s", "before the second add-server"};
  Series during{"train_during_samples_per_s", "during it"};
  Series after{"train_after_samples_per_s", "after it"};
  Series dip_s{"dip_migrate_s", "the second add-server, seconds", 3};
  Series dip_rows{"dip_rows_moved", "  rows moved (its keys)"};
  Series dip_sent{"dip_rows_sent",
                  "  rows sent (its status: HANDOFF's re-sends counted)"};

  std::vector<const Series*> Migration() const {
    return {&rows_moved,    &migrate, &migrate_s, &prepare_s,
            &copy,          &copy_s,  &handoff_s, &commit_s,
            &migrate_cpu_s, &peer,    &peer_s,    &peer_cpu_s};
  }
  std::vector<const Series*> Training() const {
    return {&before, &during, &after, &dip_s, &dip_rows, &dip_sent};
  }
};

std::vector<Ratio> Ratios(const Params& p, const Results& r) {
  std::vector<Ratio> ratios = {
      {.name = "migrate_vs_pullrows_putrows",
       .target = Target::AtLeast(2),
       .note = "add-server rows/s over PullRows + PutRows"},
      {.name = "migrate_copy_vs_pullrows_putrows",
       .note = "its COPY phase's rows/s over the same"},
      {.name = "migrate_cpu_vs_pullrows_putrows",
       .note = "the peer's CPU-seconds over add-server's (every process)"},
      {.name = "train_during_vs_before",
       .note = "training samples/s during a migration over before (the dip)"},
      {.name = "train_after_vs_before", .note = "after it over before"},
  };
  for (int i = 0; i < p.repeats; ++i) {
    ratios[0].rounds.push_back(r.migrate.rounds[i] / r.peer.rounds[i]);
    ratios[1].rounds.push_back(r.copy.rounds[i] / r.peer.rounds[i]);
    ratios[2].rounds.push_back(r.peer_cpu_s.rounds[i] /
                               r.migrate_cpu_s.rounds[i]);
    ratios[3].rounds.push_back(r.during.rounds[i] / r.before.rounds[i]);
    ratios[4].rounds.push_back(r.after.rounds[i] / r.before.rounds[i]);
  }
  return ratios;
}

void PrintSeries(const std::vector<const Series*>& all, std::ostream& out) {
  for (const Series* s : all) {
    out << absl::StrFormat("%-58s %12.*f %12.*f %12.*f\n", s->label,
                           s->decimals, s->Median(), s->decimals, s->Min(),
                           s->decimals, s->Max());
  }
}

void PrintReport(const Params& p, const MachineInfo& m, const Results& r,
                 const std::vector<Ratio>& ratios, std::ostream& out) {
  out << "ps-bench migrate\n";
  out << absl::StrFormat("machine     %d cores, %s, %.2f GiB RAM\n", m.cores,
                         m.cpu_model, m.memory_bytes / double(1ull << 30));
  out << absl::StrFormat(
      "parameters  rows=%d dim=%d (adagrad) servers=%d+1 batch_rows=%d "
      "repeats=%d\n            workers=%d train_batch=%d alpha=%.2f "
      "window_s=%.1f seed=%d%s\n\n",
      p.rows, kDim, kServers, p.batch_rows, p.repeats, p.workers, p.train_batch,
      p.alpha, p.window_s, p.seed,
      p.checkpoint_first ? " checkpoint_first" : "");
  out << absl::StrFormat("%-58s %12s %12s %12s\n", "migration", "median", "min",
                         "max");
  PrintSeries(r.Migration(), out);
  out << absl::StrFormat("\n%-58s %12s %12s %12s\n",
                         "training (samples/s: keys pulled and pushed)",
                         "median", "min", "max");
  PrintSeries(r.Training(), out);
  out << "\n";
  PrintRatios(ratios, out);
}

void PrintJson(const Params& p, const MachineInfo& m, const Results& r,
               const std::vector<Ratio>& ratios, std::ostream& out) {
  Json j = StartReportJson("migrate", m);
  j["params"] = {{"rows", p.rows},
                 {"dim", kDim},
                 {"servers", kServers},
                 {"batch_rows", p.batch_rows},
                 {"workers", p.workers},
                 {"train_batch", p.train_batch},
                 {"window_s", p.window_s},
                 {"alpha", p.alpha},
                 {"repeats", p.repeats},
                 {"seed", p.seed},
                 {"checkpoint_first", p.checkpoint_first}};
  Json figures = Json::object();
  for (const Series* s : r.Migration()) figures[s->id] = SeriesJson(*s);
  for (const Series* s : r.Training()) figures[s->id] = SeriesJson(*s);
  j["figures"] = std::move(figures);
  AddRatiosJson(ratios, &j);
  WriteJson(j, out);
}

absl::StatusOr<Results> MeasureAll(const Params& p, const std::string& dir,
                                   std::ostream& log) {
  Results r;
  for (int round = 0; round < p.repeats; ++round) {
    PSDB_ASSIGN_OR_RETURN(RoundResult one, Round(p, dir, round, log));
    const double moved = static_cast<double>(one.rows_moved);
    r.rows_moved.rounds.push_back(moved);
    r.migrate.rounds.push_back(moved / one.add.seconds);
    r.migrate_s.rounds.push_back(one.add.seconds);
    r.copy.rounds.push_back(moved / one.add.copy_seconds());
    r.copy_s.rounds.push_back(one.add.copy_seconds());
    r.prepare_s.rounds.push_back(one.add.phase_seconds[0]);
    r.handoff_s.rounds.push_back(one.add.phase_seconds[2]);
    r.commit_s.rounds.push_back(one.add.phase_seconds[3]);
    r.migrate_cpu_s.rounds.push_back(one.add_cpu_s);
    r.peer_cpu_s.rounds.push_back(one.peer_cpu_s);
    r.peer.rounds.push_back(moved / one.peer_s);
    r.peer_s.rounds.push_back(one.peer_s);
    r.before.rounds.push_back(one.dip.before);
    r.during.rounds.push_back(one.dip.during);
    r.after.rounds.push_back(one.dip.after);
    r.dip_s.rounds.push_back(one.dip.add.seconds);
    r.dip_rows.rounds.push_back(static_cast<double>(one.dip_keys));
    r.dip_sent.rounds.push_back(static_cast<double>(one.dip.add.rows_moved));
  }
  return r;
}

absl::Status Run(const Params& p, std::ostream& out, std::ostream& log) {
  return MeasureAndReport(p, "migrate", out, log, &MeasureAll, &Ratios,
                          &PrintJson, &PrintReport);
}

}  // namespace

int RunMigrateBench(int argc, const char* const* argv, std::ostream& out,
                    std::ostream& err) {
  return RunScenario<Params>(Flags(), argc, argv, out, err, &ParseParams,
                             [&](Params& p) -> absl::Status {
                               PSDB_RETURN_IF_ERROR(FindBinaries(&p));
                               return Run(p, out, err);
                             });
}

}  // namespace psdb::bench
