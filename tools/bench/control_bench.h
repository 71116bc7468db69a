// ps-bench's `control` scenario (issue 14's benchmark): the control plane
// with its state in etcd (ps-scheduler --etcd) against the in-process
// scheduler, on real processes on loopback.
//
// Setup: one local etcd (tools/common/local_etcd.h, --etcd_members members,
// default 1) started and serving before any clock starts, kept for the
// whole run; every etcd measurement uses a cluster name of its own
// ("ctl-<what>-<round>"), so no round sees another's keys. ps-scheduler and
// ps-server are the built binaries (--bin); every node beats every
// --heartbeat_interval_ms (ps-scheduler's flag, default 1000 as there).
// Workers are in this process.
//
// Measured, each in --repeats rounds (default 5; each round runs all five,
// in this order):
//  1. formation_etcd / formation_memory: 1 ps-scheduler (--etcd, fresh
//     --cluster; or in-process state) + 3 ps-servers + 2 workers. From
//     starting the ps-scheduler process until both workers
//     (ClusterWorker::Join, one thread each) have joined and all three
//     ps-servers (started together once the scheduler listens, each given
//     PS_SCHED_ADDRESSES) have printed "listening on" — a ps-server prints
//     it once the cluster it joined is ready. Also reported apart: when the
//     last server printed it (<id>_servers) and when the last worker's Join
//     returned (<id>_workers), both from the same start.
//  2. takeover: 2 ps-schedulers --etcd on one cluster. Once one leads and
//     the other stands by (GetStatus: leader true on one, false on the
//     other, whose log says "standing by"), the leader is SIGKILLed; from
//     the kill until the standby's SchedulerService.GetStatus says leader,
//     polled every 5 ms through a gRPC stub. The dead leader's key lives
//     until its lease ends, --lease_ttl_s after its last renewal (every
//     TTL/3), so the figure is the TTL less the time since that renewal,
//     plus etcd's expiry check and the standby's watch. The kill comes as
//     soon as the standby stands by, a few ms after the leader took its
//     lease (takeover_leader_up: the leader's listening line to the kill),
//     so no renewal came between: the figure is the worst case, TTL +
//     detection. A leader killed at a random moment is replaced up to
//     TTL/3 sooner.
//  3. kill_to_map_etcd: 2 ps-schedulers --etcd, 2 ps-servers and 2 workers
//     (SchedulerClients registered as workers with StartHeartbeats, which
//     opens their WatchClusterMap streams). Once both workers' latest_map()
//     is ready with both servers alive, one ps-server (the rank --seed and
//     the round pick) is SIGKILLed; from the kill until every worker's
//     latest_map() shows it NODE_STATE_DEAD (each worker waits in a
//     WaitForMapVersion loop on its own thread; the figure is the later of
//     the two). Its lease ends --lease_ttl_s after its last heartbeat, so
//     the figure is at least TTL - heartbeat interval. The kill comes as
//     soon as both workers hold the ready map, within ms of the victim's
//     listening line (kill_to_map_etcd_victim_up), which it prints after
//     registering (which granted its lease) and before its first beat: the
//     lease was not renewed after the grant, so the figure is the worst
//     case, and the figure minus the TTL (kill_to_map_etcd_minus_ttl) is
//     etcd's expiry, the leader marking the server dead and the watch
//     carrying the map (plus the few ms from the grant to the kill). A
//     server killed at a random moment is seen dead up to one heartbeat
//     interval sooner.
//     kill_to_map_memory: the same with one in-process ps-scheduler whose
//     --heartbeat_timeout_ms is the TTL (it checks every heartbeat
//     interval / 4), the server's registration standing for its last beat.
//
// --json: one object: "params", "times_s" (per measurement: median, min,
// max and the rounds, in seconds; with the "minus TTL" and "up" series
// above), and
// report.h's ratio blocks ("ratios" etc., no targets):
//   formation_etcd_vs_memory      formation with etcd over in-process
//   takeover_vs_ttl               takeover over the lease TTL
//   kill_to_map_etcd_vs_ttl       kill-to-map with etcd over the TTL
//   kill_to_map_memory_vs_timeout the same in-process over its timeout
//
// Thread-safety: one call at a time (it starts and kills processes).
#ifndef PSDB_TOOLS_BENCH_CONTROL_BENCH_H_
#define PSDB_TOOLS_BENCH_CONTROL_BENCH_H_

#include <ostream>

namespace psdb::bench {

// argv[0] = "control"; see the usage text (--help) for flags.
int RunControlBench(int argc, const char* const* argv, std::ostream& out,
                    std::ostream& err);

}  // namespace psdb::bench

#endif  // PSDB_TOOLS_BENCH_CONTROL_BENCH_H_
