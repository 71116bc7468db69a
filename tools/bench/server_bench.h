// ps-bench's `server` scenario (issue 3's benchmark). In one run, over
// loopback, pulls and pushes of batch_keys-key batches of dim-float rows
// drawn Zipf(alpha) over `rows` keys (all created before measuring), with
// the same number of client threads (one connection each) on:
//   psdb       one ps-server process and RemoteClient (Adagrad applied
//              server-side on push)
//   redis      Debian's redis-server, started and stopped by the benchmark
//              on a free loopback port: MGET / MSET of the same rows stored
//              as dim*4-byte values through hiredis, pipelined in chunks
//   tcp_limit  the limit: a minimal in-process server with no RPC layer that
//              gathers the rows from a flat hash map and writes them to a raw
//              loopback TCP socket, one request/response per batch (pulls
//              only)
// All three stay up for the whole run and are measured in --repeats rounds
// (default 5), alternating (psdb, redis, tcp_limit, psdb, ...); each timed
// phase (a system's pulls, its pushes) cycles through the threads' batches
// for at least --min_seconds (default 2), so a burst of load from elsewhere
// on a shared machine moves one round, not the figure.
// Output: a report, or with --json one JSON object whose "ratios" map holds
// psdb_vs_redis_pull, psdb_vs_redis_push and psdb_vs_tcp_limit_pull
// (keys/s of psdb over keys/s of the peer in the same round; the median over
// rounds, with "ratios_min" / "ratios_max" beside it, report.h). Targets:
// >= 2, >= 1.5, >= 0.5. Per system: "pull_keys_per_s" / "push_keys_per_s"
// are medians over rounds (each round's in "..._rounds"); "keys" / "pull_s"
// and "push_keys" / "push_s" are totals over all rounds.
//
// Thread-safety: one call at a time (it owns the process's benchmark run).
#ifndef PSDB_TOOLS_BENCH_SERVER_BENCH_H_
#define PSDB_TOOLS_BENCH_SERVER_BENCH_H_

#include <ostream>

namespace psdb::bench {

// argv[0] = "server"; see the usage text (--help) for flags.
int RunServerBench(int argc, const char* const* argv, std::ostream& out,
                   std::ostream& err);

}  // namespace psdb::bench

#endif  // PSDB_TOOLS_BENCH_SERVER_BENCH_H_
