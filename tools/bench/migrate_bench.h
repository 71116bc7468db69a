// ps-bench's `migrate` scenario (issue 15's benchmark): live resharding
// (ps-scheduler add-server, rpc/control/README.md) against a peer that moves
// the same rows through the public API, and the training throughput while a
// migration runs, on real processes on loopback.
//
// Each of --repeats rounds (default 3) builds a fresh cluster: one
// ps-scheduler (in-process state) and 3 ps-servers (async), one table "emb"
// (dim 64, Adagrad: 64 floats of state per row) filled with --rows rows
// (keys 0..rows-1, whole rows written with PutRows through a RemoteClient
// routed by the scheduler's map; with --checkpoint_first=true the cluster
// then checkpoints, untimed, so no row is dirty), and then:
//  1. peer: a fresh ps-server alone (no scheduler; a RemoteClient over the
//     1-server static list) gets the rows that the add below moves: the
//     keys the map with the joining server on the ring (ClusterMap::
//     WithState of the scheduler's map, the ring every server computes)
//     gives it. Timed from the first call to the last: RemoteClient::
//     PullRows from the 3-server cluster and RemoteClient::PutRows to the
//     lone server, --batch_rows keys per call, one call at a time. It runs
//     before the migration (after it the sources no longer hold the rows).
//  2. migrate: a ps-server started with --join, then AddServer (the admin
//     command's code, rpc/control/admin_membership.h) with --batch_rows,
//     timed from the call to its return (PREPARE to COMMIT). Its
//     rows_moved must equal the peer's key count (else the round fails).
//     Its phases as the coordinator timed them (MigrationStatus's
//     *_seconds: PREPARE, COPY, CLOSE + HANDOFF + publish, COMMIT); the
//     admin call's own round trip is the rest of the whole. Nothing polls
//     the scheduler meanwhile (the peer is not observed either). CPU
//     seconds of every process of the benchmark (this one, the scheduler,
//     the servers) are counted over the peer and over the add.
//  3. dip: --workers threads in this process, each with its own RemoteClient
//     routed by the scheduler's map (OpenSchedulerRemoteClient), loop Pull +
//     Push (async) of --train_batch Zipf(--alpha) keys over the table. Keys
//     (samples) per second are counted in three windows: --window_s seconds
//     before a second add-server (a second joining ps-server), during it
//     (the call to its return), and --window_s seconds after it. The
//     migration of step 2 runs without training so that its rows/s is the
//     migration's alone. The second add's status counts more rows than
//     the keys it moves (reported apart): HANDOFF re-sends the leaving rows
//     that training touched since PREPARE, and they are counted again.
//
// --json: one object: "params", "figures" (per figure: median, min, max and
// the rounds), and report.h's ratio blocks:
//   migrate_vs_pullrows_putrows       migration rows/s over the peer's
//                                     (target >= 2)
//   migrate_copy_vs_pullrows_putrows  the COPY phase's rows/s over the peer's
//   train_during_vs_before            samples/s during the second add over
//                                     before it (the dip)
//   train_after_vs_before             after it over before it
//
// Thread-safety: one call at a time (it starts and kills processes).
#ifndef PSDB_TOOLS_BENCH_MIGRATE_BENCH_H_
#define PSDB_TOOLS_BENCH_MIGRATE_BENCH_H_

#include <ostream>

namespace psdb::bench {

// argv[0] = "migrate"; see the usage text (--help) for flags.
int RunMigrateBench(int argc, const char* const* argv, std::ostream& out,
                    std::ostream& err);

}  // namespace psdb::bench

#endif  // PSDB_TOOLS_BENCH_MIGRATE_BENCH_H_
