// The training loop of ps-train: reads a Criteo-format data directory
// (train* / test* files, optional meta.json), trains Wide&Deep through an
// EmbeddingSource and a ParameterClient, evaluates AUC and log-loss on a
// validation split held out of the train files, stops early, keeps the best
// checkpoint, evaluates the test files once at the end, and reports:
//   - two lines per log_every steps in the seeds' style
//     (`epoch: 1 step: 200, loss is 0.4873` and, seed 004's per-part
//     losses, `epoch: 1 step: 200, wide_loss is 0.5712, deep_loss is
//     0.6011`), each the mean over the steps since the previous line of the
//     steps' WideDeepLoss (train/wide_deep.h),
//   - a progress bar with samples/s and ETA on a terminal (plain lines
//     otherwise),
//   - a final summary, CDIR/summary.json, CDIR/metrics.csv and (when gnuplot
//     is installed) CDIR/metrics.png.
//
// Validation and early stopping: a line of the train files is held out when
// its hash says so (InValidSplit in train/criteo_reader.h, valid_fraction of
// them), so every worker agrees without coordination. The held-out lines are
// evaluated after every epoch, every eval_every steps and after the last
// step (every rank evaluates all of them). When the validation log-loss is
// lower than every earlier one, that evaluation is the best: its epoch,
// step, log-loss and AUC are kept and a checkpoint is written under
// CDIR/best (one kept; in a cluster, checkpoint_fn's checkpoint). After
// `patience` evaluations in a row without a new best, training stops.
// The test files are read once, at the end: on the best checkpoint when
// open_checkpoint is set (the model the run hands over is the best one),
// else on the model as training left it (TrainResult::test_model says
// which). The last state is still checkpointed under CDIR, for resuming.
// With several workers (shard.world > 1) the validation split is evaluated
// and reported, but neither stops training nor writes best checkpoints:
// those are collective decisions every rank must take at the same step, and
// the ranks' validation losses may differ (async pushes, worker caches);
// agreeing on them (e.g. an AllReduce of the loss) is not built yet.
//
// The next batch is read and parsed in the background while the current one
// trains, and its ids are handed to EmbeddingSource::Prefetch.
//
// Checkpoints are written by rank 0 only (in a cluster every server writes
// its shard of one checkpoint); every rank flushes its cache at those points.
//
// Determinism: with mode kSync, the same seed, data and order give the same
// pushes in the same order, hence identical checkpoint rows.
//
// Thread-safety: RunTraining is a blocking call; the client and embedding
// source must be thread-safe (they are used from a background push thread
// in kAsync mode).
#ifndef PSDB_TRAIN_TRAINER_H_
#define PSDB_TRAIN_TRAINER_H_

#include <cstdint>
#include <cstdio>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "psdb/parameter_client.h"
#include "train/criteo_reader.h"
#include "train/embedding_source.h"
#include "train/wide_deep.h"

namespace psdb::train {

enum class SyncMode : int {
  kSync = 0,   // a step's pushes complete before the next step pulls
  kAsync = 1,  // pushes run in the background, overlapping the next pull
};

struct TrainerOptions {
  // Data directory (train*, test*, meta.json). REQUIRED.
  std::string data_dir;
  // Root of the checkpoints and reports (summary.json, metrics.csv).
  // REQUIRED.
  std::string checkpoint_dir;
  // Default: 1
  int epochs = 1;
  // Examples per step. Default: 512
  int batch_size = 512;
  // Stop after this many steps (0 = no limit). Default: 0
  int64_t max_steps = 0;
  // A loss line every this many steps. Default: 200
  int log_every = 200;
  // Checkpoint every this many steps (0 = only at the end). Default: 0
  int64_t checkpoint_every = 0;
  // Also checkpoint once this long has passed since the last checkpoint
  // under checkpoint_dir was written (or since training started), checked
  // between steps, so that training can feed serving replicas every few
  // seconds (ps-train --checkpoint_every_s). Combines with
  // checkpoint_every: either one due writes one checkpoint, and it restarts
  // this clock. Zero: off. REQUIRES: >= 0, and shard.world == 1 when set:
  // with several workers every rank must checkpoint at the same step and
  // their clocks would not agree on one (no collective decides it yet).
  // Default: 0
  absl::Duration checkpoint_interval = absl::ZeroDuration();
  // Checkpoints kept. Default: 3
  int keep_checkpoints = 3;
  // Evaluate the validation split every this many steps, besides after
  // each epoch and the last step (0 = only those). Default: 0
  int64_t eval_every = 0;
  // Fraction of the train files' lines held out for validation, in [0, 1)
  // (0 = no validation, no early stopping, no best checkpoint).
  // Default: 0.05
  double valid_fraction = 0.05;
  // Stop after this many validation evaluations in a row without a lower
  // validation log-loss (0 = never stop early). Default: 2
  int patience = 2;
  // Ids seen fewer than this many times in training share their field's
  // fallback row (train/rare_ids.h), in training and evaluation alike
  // (the test evaluation of the best checkpoint maps the ids admitted after
  // its step too); 0 or 1 = every id has its own row. Default: 0
  uint32_t min_count = 0;
  // Default: kSync
  SyncMode mode = SyncMode::kSync;
  // Data sharding of this worker. Default: rank 0 of 1, by file
  ReaderOptions shard;
  WideDeepConfig model;
  // Hand the next batch's ids to EmbeddingSource::Prefetch while the
  // current one trains. Default: true
  bool prefetch = true;
  // Draw a progress bar (if stderr is a terminal). Default: true
  bool progress = true;
  // Render metrics.png with gnuplot when it is installed. Default: true
  bool plot = true;
  // How the store was opened, for the summary (e.g. "local:/data/psdb").
  // Default: ""
  std::string store_description;
  // Cluster hooks (rpc/client/cluster_worker.h); null in embedded mode.
  // after_step(s) runs when step s's training and pushes have been issued
  // (in kSync mode: completed), e.g. SchedulerClient::StepClock. Default: null
  std::function<absl::Status(int64_t step)> after_step;
  // checkpoint_fn(s) replaces client->Checkpoint at a checkpoint point: it
  // runs on every rank after the rank's pushes and cache flush, and returns
  // the checkpoint's path ("" on ranks that write none). Default: null
  std::function<absl::StatusOr<std::string>(int64_t step)> checkpoint_fn;
  // Opens a checkpoint this run wrote (a path from Checkpoint or
  // checkpoint_fn) read-only, for the test evaluation of the best model
  // (ps-train: Store::OpenCheckpoint for a local store). Null = the test
  // files are evaluated on the model as training left it. Default: null
  std::function<absl::StatusOr<std::unique_ptr<ParameterClient>>(
      const std::string& checkpoint)>
      open_checkpoint;
};

struct TrainResult {
  int64_t steps = 0;
  uint64_t samples = 0;
  double seconds = 0;
  double samples_per_sec = 0;
  double last_loss = 0;       // mean loss of the last log window
  std::optional<double> auc;  // on the test split (if any)
  std::optional<double> logloss;
  std::optional<double> bayes_auc;  // from meta.json
  std::optional<double> cache_hit_rate;
  EmbeddingStats embedding_stats;
  uint64_t malformed_lines = 0;
  std::string checkpoint;  // path of the last checkpoint
  // The best validation evaluation (lowest log-loss), if any.
  std::optional<int> best_epoch;
  std::optional<int64_t> best_step;
  std::optional<double> best_valid_logloss;
  std::optional<double> best_valid_auc;
  std::string best_checkpoint;  // its checkpoint ("" on ranks that write none)
  bool stopped_early = false;
  // With min_count: distinct ids seen, and of those the ones admitted.
  uint64_t ids_tracked = 0;
  uint64_t ids_admitted = 0;
  // Which model auc/logloss measure: "best" (the best checkpoint, or the
  // last state when that was the best) or "last" (the last state: no
  // validation, or the best checkpoint could not be opened).
  std::string test_model;
  std::string summary_json;
};

// Runs the whole job; progress and log lines go to `log` (stdout in
// ps-train), the bar to stderr.
absl::StatusOr<TrainResult> RunTraining(const TrainerOptions& options,
                                        ParameterClient* client,
                                        EmbeddingSource* embeddings, FILE* log);

// The per-part loss line (no newline), in seed 004's format:
// `epoch: E step: S, wide_loss is W, deep_loss is D`, W and D rounded to
// float32 and printed in their shortest round-trip decimal form, as the seed's
// (float32) values are, so the line parses back to the exact floats.
std::string PartLossLine(int epoch, int64_t step, double wide_loss,
                         double deep_loss);

// Lines of `files` (counting a final line without newline).
absl::StatusOr<uint64_t> CountLines(const std::vector<std::string>& files);

}  // namespace psdb::train

#endif  // PSDB_TRAIN_TRAINER_H_
