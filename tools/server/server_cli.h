// ps-server's command line (the logic behind tools/ps_server_main.cc):
// hosts one Store shard behind gRPC (rpc/server/server.h).
//
//   ps-server --data_dir=/data/psdb --port=7000
//   ps-server --data_dir=D --host=0.0.0.0 --port=7000
//             --servers=h1:7000,h2:7000,h3:7000 --shard_id=1
//             --tls_cert=server.pem --tls_key=server.key  (one command)
//
// With a scheduler (PS_SCHED_HOST + PS_SCHED_PORT, or --sched_host and
// --sched_port; or several sharing etcd, PS_SCHED_ADDRESSES=h1:p1,h2:p2 or
// --sched_addresses; rpc/control/node_config.h) the server registers as
// PS_NODE_ID, waits for the cluster to form and takes its rank, server list
// and epoch from the scheduler's map instead of --servers/--shard_id:
//   PS_SCHED_HOST=10.0.0.9 PS_SCHED_PORT=7100 PS_NODE_ID=server-0
//     ps-server --data_dir=D --port=7000 [--sync_mode=sync]  (one command)
//
// Growing a running cluster: --join (PS_JOIN=1) registers the server as
// JOINING under a new rank; it serves but owns no key until `ps-scheduler
// add-server --node_id=ID` moves its rows to it and publishes the map.
// After `ps-scheduler drain-server` the drained server logs "drained: this
// server owns no keys and may be stopped" and stops beating; stop it then.
//
// Prints "listening on HOST:PORT" once it serves (--port=0 picks a free
// port). SIGTERM or SIGINT: stop accepting, let in-flight requests finish
// (up to --shutdown_grace_seconds), then close the store cleanly (dirty rows
// and memtables flushed). Exit status 0 after a clean shutdown, 1 on a
// startup error or a shutdown that could not flush (the message says how
// many rows are not in files; psdb/store.h, "Disk full and I/O errors").
// While the disk refuses writes, pushes that need room fail with
// RESOURCE_EXHAUSTED naming the table and the cause; reads keep working.
// With --metrics_port (training or serving) it first prints "metrics on
// HOST:PORT": Prometheus text at /metrics (rpc/server/server_metrics.h).
//
// Read-only serving replica (rpc/server/checkpoint_follower.h): serves shard
// K of the newest complete checkpoint under ROOT that verifies, with a
// memory tier of --memory_budget_mb over the checkpoint's files, and swaps
// in each newer one (looked for every --follow_interval_s seconds):
//   ps-server --serve_from=/shared/ckpt [--shard_id=K | --serve_all_shards]
//             --port=7400  (one command)
// No --data_dir and no scheduler: replicas are outside the training cluster.
//
// Admin call: a cluster checkpoint (rpc/control/admin_checkpoint.h). Every
// server writes its shard of every table under one checkpoint id, then the
// cluster manifest is written; prints "checkpoint PATH" and exits 0, or exits 1
// with the error naming the failed server (no manifest is left):
//   PS_SCHED_HOST=10.0.0.9 PS_SCHED_PORT=7100
//     ps-server checkpoint --root=/shared/ckpt [--step=S]  (one command)
//   ps-server checkpoint --servers=h1:7000,h2:7000 --root=/shared/ckpt
//
// --dry_run (any of the above): resolve and validate every flag and PS_*
// variable as that start would, print the settings (and which PS_*
// variables of the environment it reads and which it ignores) and exit 0,
// or exit 1 naming the problem. Binds no port, opens no store, creates no
// file and connects to nothing (it reads the TLS files, as a start would):
// tests/deploy/check_deploy.py runs each manifest's ps-server this way.
//
// The flags and how they resolve: server_flags.h.
//
// Thread-safety: RunServer is the process's main: it parses the
// process-wide absl flags, sets malloc's options and blocks SIGTERM /
// SIGINT; call it once, from main, before any other thread starts.
#ifndef PSDB_TOOLS_SERVER_SERVER_CLI_H_
#define PSDB_TOOLS_SERVER_SERVER_CLI_H_

#include <ostream>

namespace psdb::tools {

// Runs ps-server with argv; its lines go to `out` (the ready lines,
// --dry_run's settings, "checkpoint PATH") and `err` (errors and what the
// server does: joining, restoring, shutting down). Returns the exit code:
// 0 success, 1 failure.
int RunServer(int argc, char** argv, std::ostream& out, std::ostream& err);

}  // namespace psdb::tools

#endif  // PSDB_TOOLS_SERVER_SERVER_CLI_H_
