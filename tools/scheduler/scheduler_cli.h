// ps-scheduler's command line (the logic behind tools/ps_scheduler_main.cc):
// forms a psdb cluster (rpc/control/scheduler.h). Settings come from the
// PS_* variables or the same-named flags (rpc/control/node_config.h):
//
//   PS_SERVER_NUM=2 PS_WORKER_NUM=2 PS_SCHED_PORT=7100 ps-scheduler
//   ps-scheduler --server_num=2 --worker_num=0 --sched_host=0.0.0.0
//                --sched_port=7100 --insecure   (one command line)
//
// Prints "scheduler listening on HOST:PORT" once it serves (after "metrics
// on HOST:PORT" with --metrics_port: Prometheus text at /metrics,
// rpc/control/scheduler_metrics.h), then one line per assignment on
// stderr ("server node id:<id> addr:<host:port> assigned rank 0", "cluster
// ready: 2 servers, 2 workers, epoch 1", deaths, recoveries). From then on
// it answers grpc.health.v1's Check(service="") with SERVING (Kubernetes'
// gRPC probes, grpc_health_probe), before the cluster is complete too.
// SIGTERM or SIGINT stops it (exit 0); a bad or missing setting exits 1 at
// once with the reason. With PS_ENABLE_RECOVERY=1 and PS_RECOVERY_PATH=DIR
// the membership is saved under DIR after every change and reloaded at
// start, so a restarted scheduler carries on with the running nodes (they
// reconnect on their own).
//
// --dry_run: resolve and check every setting (reading the TLS files, as a
// start would), print one line "ps-scheduler (dry run): ..." and exit 0,
// or 1 with the reason; binds nothing.
//
// --health: ask the scheduler at --sched_host (default 127.0.0.1) and
// --sched_port for its status (GetStatus); print "healthy: ..." and exit
// 0, or "unhealthy: ..." and exit 1.
//
// Live resharding (rpc/control/migration_coordinator.h), admin commands
// against a running scheduler (with --etcd, the leader):
//   ps-scheduler add-server --scheduler=HOST:PORT --node_id=ID
//                [--batch_rows=N] [--max_rows_per_second=N]
//   ps-scheduler drain-server --scheduler=HOST:PORT --node_id=ID [...]
// add-server moves to a server started with `ps-server --join` the rows
// it will own and puts it on the ring (a new epoch); drain-server moves
// every row of a server to the others and takes it out of the map. Both
// print a progress line about once a second ("add-server s3: copy
// 12000/40000 rows moved (30%)") and a last one ("add-server s3: done,
// epoch 1 -> 2, 40000 rows moved in 1.2 s"); exit 0, or 1 with the error
// (an aborted migration leaves the map unchanged).
//
// The flags and how they resolve: scheduler_flags.h.
//
// Thread-safety: RunScheduler is the process's main: it parses the
// process-wide absl flags and blocks SIGTERM / SIGINT; call it once, from
// main, before any other thread starts.
#ifndef PSDB_TOOLS_SCHEDULER_SCHEDULER_CLI_H_
#define PSDB_TOOLS_SCHEDULER_SCHEDULER_CLI_H_

#include <ostream>

namespace psdb::tools {

// Runs ps-scheduler with argv; its lines go to `out` (the ready lines,
// --dry_run, --health and add-server / drain-server) and `err` (errors and
// the shutdown lines; the scheduler's own log goes to stderr). Returns the
// exit code: 0 success, 1 failure.
int RunScheduler(int argc, char** argv, std::ostream& out, std::ostream& err);

}  // namespace psdb::tools

#endif  // PSDB_TOOLS_SCHEDULER_SCHEDULER_CLI_H_
