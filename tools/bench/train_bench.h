// ps-bench's `train` scenario (issue 6's benchmark): training throughput
// and test AUC of ps-train's models (--models, default
// wide_deep,deepfm,dcn,lr; the first one is the one the cluster runs train)
// on generated datasets (`ps-train gen`), run as real processes:
//   embedded      one ps-train on its embedded store (local:DIR)
//   cluster_on    ps-scheduler + --servers ps-servers (+ --sync_mode=sync in
//                 sync mode) on free loopback ports and --workers ps-train
//                 processes (--store scheduler:HOST:PORT, shard by line),
//                 the worker cache prefetching the next batch's misses
//   cluster_off   the same cluster, started afresh, with --no_prefetch
//   cluster_allreduce  (sync mode, 2+ workers) cluster_on's cluster with
//                 --dense=allreduce: the dense weights replicated on the
//                 workers and averaged by gloo (cluster_on/off use
//                 --dense=ps, the dense weights as psdb tables)
//   embedded_<kind>  one embedded run on each further generated kind
//                 (--kinds, default additive,pairs,longtail; the first kind
//                 is the one above), to report the model on data it was not
//                 tuned to
//   embedded_<kind>_<model>  each further model, embedded, on each kind
// With lr among the models, the report adds per kind and model the AUC over
// lr's and the samples/s ratio to lr's (JSON: auc_over_lr,
// samples_per_s_vs_lr on the embedded runs).
// Every run uses the worker cache (--cache_rows); samples/s come from each
// ps-train's summary.json (training loop only): a cluster's is its workers'
// samples over the slowest worker's seconds. Test AUC and the data's
// Bayes-optimal AUC come from rank 0's summary.json.
//
// Output: a report, or with --json one JSON object with "runs" (kind, model,
// samples, seconds, samples_per_s, cache_hit_rate, auc, bayes_auc, auc_gap
// per run) and "ratios": prefetch_on_vs_off (cluster samples/s with
// prefetch over without), cluster_vs_embedded (cluster with prefetch over
// embedded) and, with the allreduce run, allreduce_vs_ps (cluster_allreduce
// over cluster_on).
//
// Thread-safety: one call at a time (it starts and stops processes).
#ifndef PSDB_TOOLS_BENCH_TRAIN_BENCH_H_
#define PSDB_TOOLS_BENCH_TRAIN_BENCH_H_

#include <ostream>

namespace psdb::bench {

// argv[0] = "train"; see the usage text (--help) for flags.
int RunTrainBench(int argc, const char* const* argv, std::ostream& out,
                  std::ostream& err);

}  // namespace psdb::bench

#endif  // PSDB_TOOLS_BENCH_TRAIN_BENCH_H_
