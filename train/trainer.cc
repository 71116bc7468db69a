#include "train/trainer.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <future>
#include <memory>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "train/metrics.h"
#include "train/progress.h"
#include "train/rare_ids.h"
#include "train/report.h"
#include "util/file_io.h"
#include "util/status_macros.h"

namespace psdb::train {
namespace {

// Batches of every epoch in order, read one step ahead in the background.
class BatchLoader {
 public:
  struct Item {
    std::shared_ptr<CriteoBatch> batch;  // null at the end
    int epoch = 0;                       // 1-based
  };

  BatchLoader(CriteoReader* reader, int epochs, size_t batch_size)
      : reader_(reader), epochs_(epochs), batch_size_(batch_size) {}
  ~BatchLoader() {
    if (next_.valid()) next_.wait();
  }

  // Starts reading the first batch.
  void Start() {
    next_ = std::async(std::launch::async, [this] { return Read(); });
  }

  // The batch read in the background, and starts reading the one after.
  absl::StatusOr<Item> Next() {
    absl::StatusOr<Item> item = next_.get();
    if (item.ok() && item->batch != nullptr) Start();
    return item;
  }

 private:
  absl::StatusOr<Item> Read() {
    auto batch = std::make_shared<CriteoBatch>();
    while (epoch_ <= epochs_) {
      PSDB_ASSIGN_OR_RETURN(size_t n, reader_->Next(batch_size_, batch.get()));
      if (n > 0) return Item{batch, epoch_};
      ++epoch_;
      if (epoch_ <= epochs_) reader_->Rewind();
    }
    return Item{};
  }

  CriteoReader* const reader_;
  const int epochs_;
  const size_t batch_size_;
  int epoch_ = 1;
  std::future<absl::StatusOr<Item>> next_;
};

struct EvalResult {
  double auc = NAN;
  double logloss = NAN;
  uint64_t examples = 0;
};

// AUC and log-loss of `model` on `files` (the lines `read` selects);
// examples == 0 and NaN metrics when it selects none.
absl::StatusOr<EvalResult> Evaluate(WideDeepModel* model,
                                    const std::vector<std::string>& files,
                                    size_t batch_size, const RareIdMapper& rare,
                                    int64_t as_of_step,
                                    const ReaderOptions& read = {}) {
  PSDB_ASSIGN_OR_RETURN(std::unique_ptr<CriteoReader> reader,
                        CriteoReader::Open(files, read));
  std::vector<float> probs, all_probs, all_labels;
  CriteoBatch batch;
  while (true) {
    PSDB_ASSIGN_OR_RETURN(size_t n, reader->Next(batch_size, &batch));
    if (n == 0) break;
    rare.MapEval(&batch, as_of_step);
    PSDB_RETURN_IF_ERROR(model->Predict(batch, &probs));
    all_probs.insert(all_probs.end(), probs.begin(), probs.end());
    all_labels.insert(all_labels.end(), batch.labels.begin(),
                      batch.labels.end());
  }
  EvalResult result;
  result.examples = all_probs.size();
  if (result.examples == 0) return result;
  PSDB_ASSIGN_OR_RETURN(result.auc, Auc(all_probs, all_labels));
  PSDB_ASSIGN_OR_RETURN(result.logloss, LogLoss(all_probs, all_labels));
  return result;
}

}  // namespace

std::string PartLossLine(int epoch, int64_t step, double wide_loss,
                         double deep_loss) {
  // The seed's values are float32 printed in their shortest round-trip form
  // (0.6873926, 0.80273706, 0.566089): std::to_chars on the float does that.
  auto shortest = [](double v) {
    char buf[64];
    const auto [end, ec] =
        std::to_chars(buf, buf + sizeof(buf), static_cast<float>(v));
    return std::string(buf, end);
  };
  return absl::StrCat("epoch: ", epoch, " step: ", step, ", wide_loss is ",
                      shortest(wide_loss), ", deep_loss is ",
                      shortest(deep_loss));
}

absl::StatusOr<uint64_t> CountLines(const std::vector<std::string>& files) {
  uint64_t lines = 0;
  std::vector<char> buf(1 << 20);
  for (const std::string& path : files) {
    std::FILE* f = std::fopen(path.c_str(), "r");
    if (f == nullptr) {
      return absl::NotFoundError(absl::StrCat("cannot open data file ", path));
    }
    char last = '\n';
    size_t got;
    while ((got = std::fread(buf.data(), 1, buf.size(), f)) > 0) {
      lines += std::count(buf.data(), buf.data() + got, '\n');
      last = buf[got - 1];
    }
    if (last != '\n') ++lines;
    std::fclose(f);
  }
  return lines;
}

absl::StatusOr<TrainResult> RunTraining(const TrainerOptions& options,
                                        ParameterClient* client,
                                        EmbeddingSource* embeddings,
                                        FILE* log) {
  if (options.data_dir.empty() || options.checkpoint_dir.empty()) {
    return absl::InvalidArgumentError(
        "data_dir and checkpoint_dir are required");
  }
  if (options.batch_size < 1 || options.epochs < 1 || options.log_every < 1) {
    return absl::InvalidArgumentError(
        "batch_size, epochs and log_every must be >= 1");
  }
  if (!(options.valid_fraction >= 0 && options.valid_fraction < 1) ||
      options.patience < 0 || options.eval_every < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "valid_fraction must be in [0, 1) (got ", options.valid_fraction,
        "), patience and eval_every >= 0 (got ", options.patience, ", ",
        options.eval_every, ")"));
  }
  if (options.checkpoint_interval < absl::ZeroDuration()) {
    return absl::InvalidArgumentError(
        absl::StrCat("checkpoint_interval must be >= 0 (got ",
                     absl::FormatDuration(options.checkpoint_interval), ")"));
  }
  if (options.checkpoint_interval > absl::ZeroDuration() &&
      options.shard.world > 1) {
    // A checkpoint is collective: every rank meets at it at the same step.
    // Each rank's clock would pick its own step.
    return absl::InvalidArgumentError(absl::StrCat(
        "time-based checkpoints (--checkpoint_every_s) need one worker: "
        "with ",
        options.shard.world,
        " workers every rank must checkpoint at the same step, which a "
        "clock per rank does not give; use --checkpoint_every N (steps)"));
  }
  // Stopping and best checkpoints are collective decisions: every rank
  // must take them at the same step, and ranks' validation losses may
  // differ (async pushes, worker caches). Agreeing on them needs a
  // collective this loop does not have yet, so with several workers the
  // validation split is evaluated and reported but decides nothing.
  const bool decide = options.shard.world == 1;
  PSDB_ASSIGN_OR_RETURN(DataDir data, LoadDataDir(options.data_dir));
  std::error_code ec;
  std::filesystem::create_directories(options.checkpoint_dir, ec);
  if (ec) {
    return absl::PermissionDeniedError(absl::StrCat(
        "cannot create ", options.checkpoint_dir, ": ", ec.message()));
  }
  ReaderOptions train_read = options.shard;
  train_read.valid_fraction = options.valid_fraction;
  train_read.split = options.valid_fraction > 0 ? Split::kTrain : Split::kAll;
  // Every rank evaluates the whole validation split; its malformed lines
  // were already reported by the training reader.
  ReaderOptions valid_read;
  valid_read.valid_fraction = options.valid_fraction;
  valid_read.split = Split::kValid;
  valid_read.malformed_log = nullptr;
  PSDB_ASSIGN_OR_RETURN(std::unique_ptr<CriteoReader> reader,
                        CriteoReader::Open(data.train_files, train_read));
  WideDeepConfig config = options.model;
  config.async_push = options.mode == SyncMode::kAsync;
  PSDB_ASSIGN_OR_RETURN(std::unique_ptr<WideDeepModel> model,
                        WideDeepModel::Create(config, client, embeddings));

  // Work estimate for the progress bar: this shard's lines times epochs.
  PSDB_ASSIGN_OR_RETURN(uint64_t lines, CountLines(reader->files()));
  if (options.shard.shard_by == ShardBy::kLine) {
    lines = (lines + options.shard.world - 1 - options.shard.rank) /
            options.shard.world;
  }
  lines = static_cast<uint64_t>(lines * (1 - options.valid_fraction));
  uint64_t total = lines * options.epochs;
  if (options.max_steps > 0) {
    total = std::min<uint64_t>(total, options.max_steps * options.batch_size);
  }

  std::fprintf(log,
               "ps-train: %s on %s (%zu train files, %zu test files, "
               "rank %d of %d, shard by %s), mode %s\n",
               std::string(ModelKindTitle(config.kind)).c_str(),
               options.data_dir.c_str(), reader->files().size(),
               data.test_files.size(), options.shard.rank, options.shard.world,
               options.shard.shard_by == ShardBy::kFile ? "file" : "line",
               options.mode == SyncMode::kSync ? "sync" : "async");
  std::fprintf(log,
               "ps-train: store %s; embeddings %s; dense %s; batch %d, %d "
               "epoch(s), ~%llu samples; validation %.3g of the train lines, "
               "patience %d\n",
               options.store_description.c_str(),
               embeddings->Describe().c_str(),
               model->DenseDescription().c_str(), options.batch_size,
               options.epochs, static_cast<unsigned long long>(total),
               options.valid_fraction, options.patience);
  std::fflush(log);

  RareIdMapper rare(options.min_count);
  const bool tty = options.progress && IsTerminal(stderr);
  Progress progress(stderr, tty, total, /*plain_every=*/1);
  TrainResult result;
  result.bayes_auc = data.bayes_auc;
  std::vector<MetricsRow> metrics;
  const std::string csv_path =
      (std::filesystem::path(options.checkpoint_dir) / "metrics.csv").string();

  // Writes a checkpoint of the state after `step` under `root` (keeping
  // `keep`) and returns its path ("" on ranks that write none).
  auto write_checkpoint = [&](int64_t step, const std::string& root, int keep,
                              const char* what) -> absl::StatusOr<std::string> {
    PSDB_RETURN_IF_ERROR(model->WaitForPush());
    // Replicated dense weights reach the store (rank 0's PutRows) before
    // the store checkpoints.
    PSDB_RETURN_IF_ERROR(model->PublishDense());
    PSDB_RETURN_IF_ERROR(embeddings->Flush());
    if (options.checkpoint_fn) {
      PSDB_ASSIGN_OR_RETURN(std::string path, options.checkpoint_fn(step));
      if (path.empty()) return path;
      progress.Clear();
      std::fprintf(log, "%s: step %lld -> %s (cluster)\n", what,
                   static_cast<long long>(step), path.c_str());
      std::fflush(log);
      return path;
    }
    // One checkpoint per cluster: every server writes its shard when asked,
    // so only rank 0 asks.
    if (options.shard.rank != 0) return std::string();
    CheckpointOptions copts;
    copts.keep_last = keep;
    PSDB_ASSIGN_OR_RETURN(CheckpointInfo info, client->Checkpoint(root, copts));
    progress.Clear();
    std::fprintf(log, "%s: step %lld -> %s (%llu rows flushed, %.2fs)\n", what,
                 static_cast<long long>(step), info.path.c_str(),
                 static_cast<unsigned long long>(info.rows_flushed),
                 absl::ToDoubleSeconds(info.duration));
    std::fflush(log);
    return info.path;
  };
  auto checkpoint = [&](int64_t step) -> absl::Status {
    PSDB_ASSIGN_OR_RETURN(
        std::string path,
        write_checkpoint(step, options.checkpoint_dir, options.keep_checkpoints,
                         "checkpoint"));
    if (!path.empty()) result.checkpoint = path;
    return absl::OkStatus();
  };
  const std::string best_root =
      (std::filesystem::path(options.checkpoint_dir) / "best").string();
  int bad_evaluations = 0;
  // Evaluates the validation split after `step`; true when training should
  // stop (patience exhausted).
  auto validate = [&](int epoch, int64_t step) -> absl::StatusOr<bool> {
    if (options.valid_fraction <= 0) return false;
    PSDB_RETURN_IF_ERROR(model->WaitForPush());
    PSDB_RETURN_IF_ERROR(embeddings->Flush());
    PSDB_ASSIGN_OR_RETURN(
        EvalResult eval,
        Evaluate(model.get(), data.train_files, options.batch_size * 4, rare,
                 step, valid_read));
    progress.Clear();
    if (eval.examples == 0) {
      std::fprintf(log,
                   "epoch: %d step: %lld, no validation example (the "
                   "hash split held out no line)\n",
                   epoch, static_cast<long long>(step));
      std::fflush(log);
      return false;
    }
    std::fprintf(log,
                 "epoch: %d step: %lld, valid AUC is %.4f, log-loss is %.4f "
                 "(%llu validation examples)\n",
                 epoch, static_cast<long long>(step), eval.auc, eval.logloss,
                 static_cast<unsigned long long>(eval.examples));
    MetricsRow row;
    row.step = step;
    row.epoch = epoch;
    row.samples = result.samples;
    row.valid_auc = eval.auc;
    row.valid_logloss = eval.logloss;
    metrics.push_back(row);
    PSDB_RETURN_IF_ERROR(WriteMetricsCsv(csv_path, metrics));
    if (!result.best_valid_logloss.has_value() ||
        eval.logloss < *result.best_valid_logloss) {
      result.best_epoch = epoch;
      result.best_step = step;
      result.best_valid_logloss = eval.logloss;
      result.best_valid_auc = eval.auc;
      bad_evaluations = 0;
      if (decide) {
        PSDB_ASSIGN_OR_RETURN(
            result.best_checkpoint,
            write_checkpoint(step, best_root, /*keep=*/1, "best checkpoint"));
      }
      return false;
    }
    ++bad_evaluations;
    std::fprintf(log,
                 "epoch: %d step: %lld, no better than the best valid "
                 "log-loss %.4f (step %lld): %d of patience %d\n",
                 epoch, static_cast<long long>(step),
                 *result.best_valid_logloss,
                 static_cast<long long>(*result.best_step), bad_evaluations,
                 options.patience);
    std::fflush(log);
    return decide && options.patience > 0 &&
           bad_evaluations >= options.patience;
  };
  // The test evaluation, once, at the end: of the best checkpoint when it
  // can be opened and is not the last state, else of the model as it is.
  auto evaluate = [&](int epoch, int64_t step) -> absl::Status {
    if (data.test_files.empty()) return absl::OkStatus();
    PSDB_RETURN_IF_ERROR(model->WaitForPush());
    PSDB_RETURN_IF_ERROR(embeddings->Flush());
    const bool last_is_best =
        result.best_step.has_value() && *result.best_step == step;
    EvalResult eval;
    if (!last_is_best && options.open_checkpoint &&
        !result.best_checkpoint.empty()) {
      PSDB_ASSIGN_OR_RETURN(std::unique_ptr<ParameterClient> best_client,
                            options.open_checkpoint(result.best_checkpoint));
      ClientEmbeddingSource best_embeddings(best_client.get());
      WideDeepConfig best_config = config;
      best_config.dense_reducer = nullptr;  // the checkpoint holds them
      best_config.async_push = false;
      PSDB_ASSIGN_OR_RETURN(
          std::unique_ptr<WideDeepModel> best_model,
          WideDeepModel::Create(best_config, best_client.get(),
                                &best_embeddings));
      PSDB_ASSIGN_OR_RETURN(
          eval, Evaluate(best_model.get(), data.test_files,
                         options.batch_size * 4, rare, *result.best_step));
      result.test_model = "best";
      epoch = *result.best_epoch;
      step = *result.best_step;
    } else {
      PSDB_ASSIGN_OR_RETURN(eval, Evaluate(model.get(), data.test_files,
                                           options.batch_size * 4, rare, step));
      result.test_model = last_is_best ? "best" : "last";
    }
    if (eval.examples == 0) {
      return absl::DataLossError(absl::StrCat(
          "the test files of ", options.data_dir, " hold no valid example"));
    }
    result.auc = eval.auc;
    result.logloss = eval.logloss;
    progress.Clear();
    std::fprintf(
        log,
        "epoch: %d step: %lld, eval AUC is %.4f, log-loss is %.4f"
        " (%llu test examples, %s model%s)\n",
        epoch, static_cast<long long>(step), eval.auc, eval.logloss,
        static_cast<unsigned long long>(eval.examples),
        result.test_model.c_str(),
        data.bayes_auc.has_value()
            ? absl::StrFormat("; Bayes-optimal AUC %.4f", *data.bayes_auc)
                  .c_str()
            : "");
    std::fflush(log);
    MetricsRow row;
    row.step = step;
    row.epoch = epoch;
    row.samples = result.samples;
    row.eval_auc = eval.auc;
    row.eval_logloss = eval.logloss;
    metrics.push_back(row);
    return WriteMetricsCsv(csv_path, metrics);
  };

  BatchLoader loader(reader.get(), options.epochs, options.batch_size);
  loader.Start();
  PSDB_ASSIGN_OR_RETURN(BatchLoader::Item current, loader.Next());
  if (current.batch == nullptr) {
    return absl::FailedPreconditionError(
        absl::StrCat("no training example in ", options.data_dir));
  }
  // Batches are mapped as they arrive, in training order, on this thread
  // (before the next one is announced to the embedding source).
  rare.MapTraining(current.batch.get(), /*step=*/1);
  const absl::Time start = absl::Now();
  absl::Time last_checkpoint = start;  // for checkpoint_interval
  int64_t step = 0;
  // Sums of the steps' mean losses since the last log line: each line
  // reports the mean over its window of steps.
  double window_loss = 0, window_wide_loss = 0, window_deep_loss = 0;
  int window_steps = 0;
  std::vector<float> window_probs, window_labels, probs;
  int last_epoch = current.epoch;
  model->Begin(*current.batch);
  while (current.batch != nullptr) {
    PSDB_ASSIGN_OR_RETURN(BatchLoader::Item next, loader.Next());
    // `next` trains at step + 2 (this iteration trains step + 1).
    if (next.batch != nullptr) rare.MapTraining(next.batch.get(), step + 2);
    ++step;
    const bool stop_here = options.max_steps > 0 && step >= options.max_steps;
    PSDB_ASSIGN_OR_RETURN(
        const WideDeepLoss loss,
        model->TrainStep(
            *current.batch,
            stop_here || !options.prefetch ? nullptr : next.batch.get(), step,
            &probs));
    if (options.after_step) PSDB_RETURN_IF_ERROR(options.after_step(step));
    result.samples += current.batch->size();
    window_loss += loss.loss;
    window_wide_loss += loss.wide_loss;
    window_deep_loss += loss.deep_loss;
    ++window_steps;
    window_probs.insert(window_probs.end(), probs.begin(), probs.end());
    window_labels.insert(window_labels.end(), current.batch->labels.begin(),
                         current.batch->labels.end());
    const bool last_step = next.batch == nullptr || stop_here;
    if (step % options.log_every == 0 || last_step) {
      const double mean_loss = window_loss / window_steps;
      result.last_loss = mean_loss;
      absl::StatusOr<double> window_auc = Auc(window_probs, window_labels);
      progress.Clear();
      const double mean_wide_loss = window_wide_loss / window_steps;
      const double mean_deep_loss = window_deep_loss / window_steps;
      std::fprintf(log, "epoch: %d step: %lld, loss is %.4f\n", current.epoch,
                   static_cast<long long>(step), mean_loss);
      std::fprintf(
          log, "%s\n",
          PartLossLine(current.epoch, step, mean_wide_loss, mean_deep_loss)
              .c_str());
      if (std::optional<uint64_t> fp = model->DenseFingerprint()) {
        // Equal on every rank when the replicas agree.
        std::fprintf(log, "dense: step %lld fingerprint %016llx\n",
                     static_cast<long long>(step),
                     static_cast<unsigned long long>(*fp));
      }
      std::fflush(log);
      MetricsRow row;
      row.step = step;
      row.epoch = current.epoch;
      row.samples = result.samples;
      row.train_loss = mean_loss;
      if (window_auc.ok()) row.train_auc = *window_auc;
      row.wide_loss = mean_wide_loss;
      row.deep_loss = mean_deep_loss;
      metrics.push_back(row);
      PSDB_RETURN_IF_ERROR(WriteMetricsCsv(csv_path, metrics));
      window_loss = window_wide_loss = window_deep_loss = 0;
      window_steps = 0;
      window_probs.clear();
      window_labels.clear();
    }
    if (!tty) {
      if (step % options.log_every == 0) {
        progress.Update(result.samples, "");
      }
    } else {
      progress.Update(
          result.samples,
          absl::StrFormat("loss %.4f", window_steps > 0
                                           ? window_loss / window_steps
                                           : result.last_loss));
    }
    const bool steps_due =
        options.checkpoint_every > 0 && step % options.checkpoint_every == 0;
    const bool time_due =
        options.checkpoint_interval > absl::ZeroDuration() &&
        absl::Now() - last_checkpoint >= options.checkpoint_interval;
    if ((steps_due || time_due) && !last_step) {
      PSDB_RETURN_IF_ERROR(checkpoint(step));
      // From the checkpoint's end: a checkpoint slower than the interval
      // still leaves a step of training before the next.
      last_checkpoint = absl::Now();
    }
    const bool epoch_ends =
        next.batch == nullptr || next.epoch != current.epoch;
    last_epoch = current.epoch;
    if (epoch_ends || last_step ||
        (options.eval_every > 0 && step % options.eval_every == 0)) {
      PSDB_ASSIGN_OR_RETURN(const bool stop, validate(current.epoch, step));
      if (stop && !last_step) {
        result.stopped_early = true;
        std::fprintf(log,
                     "early stopping: epoch %d step %lld, best valid "
                     "log-loss %.4f at epoch %d step %lld\n",
                     current.epoch, static_cast<long long>(step),
                     *result.best_valid_logloss, *result.best_epoch,
                     static_cast<long long>(*result.best_step));
        std::fflush(log);
        break;
      }
    }
    if (last_step) break;
    current = std::move(next);
  }
  PSDB_RETURN_IF_ERROR(model->WaitForPush());
  result.steps = step;
  result.seconds = absl::ToDoubleSeconds(absl::Now() - start);
  result.samples_per_sec =
      result.seconds > 0 ? result.samples / result.seconds : 0;
  progress.Finish(result.samples);
  PSDB_RETURN_IF_ERROR(evaluate(last_epoch, step));
  PSDB_RETURN_IF_ERROR(checkpoint(step));

  result.malformed_lines = reader->malformed_lines();
  result.ids_tracked = rare.tracked();
  result.ids_admitted = rare.admitted();
  result.embedding_stats = embeddings->Stats();
  const EmbeddingStats& es = result.embedding_stats;
  if (es.has_cache && es.lookups > 0) {
    result.cache_hit_rate = static_cast<double>(es.hits) / es.lookups;
  }
  PSDB_ASSIGN_OR_RETURN(StoreStats stats, client->Stats());

  // Summary.
  std::fprintf(log, "== summary\n");
  std::fprintf(log,
               "trained: %llu samples, %lld steps in %.1fs: %.0f samples/s "
               "(%llu malformed lines skipped)\n",
               static_cast<unsigned long long>(result.samples),
               static_cast<long long>(result.steps), result.seconds,
               result.samples_per_sec,
               static_cast<unsigned long long>(result.malformed_lines));
  if (result.malformed_lines > 0) {
    std::fprintf(log, "first malformed line: %s\n",
                 reader->first_error().c_str());
  }
  if (result.best_step.has_value()) {
    std::fprintf(log,
                 "validation: best log-loss %.4f (AUC %.4f) at epoch %d step "
                 "%lld%s%s%s\n",
                 *result.best_valid_logloss, *result.best_valid_auc,
                 *result.best_epoch, static_cast<long long>(*result.best_step),
                 result.stopped_early ? ", stopped early" : "",
                 result.best_checkpoint.empty() ? "" : "; best checkpoint ",
                 result.best_checkpoint.c_str());
  }
  if (rare.enabled()) {
    std::fprintf(log,
                 "ids: %llu distinct, %llu seen >= %u times have their own "
                 "rows; %llu training positions used a fallback row\n",
                 static_cast<unsigned long long>(rare.tracked()),
                 static_cast<unsigned long long>(rare.admitted()),
                 rare.min_count(),
                 static_cast<unsigned long long>(rare.mapped()));
  }
  if (result.auc.has_value()) {
    std::fprintf(log, "eval: AUC %.4f, log-loss %.4f (%s model)", *result.auc,
                 *result.logloss, result.test_model.c_str());
    if (data.bayes_auc.has_value()) {
      std::fprintf(log, "; Bayes-optimal AUC %.4f (gap %.4f)", *data.bayes_auc,
                   *data.bayes_auc - *result.auc);
    }
    std::fprintf(log, "\n");
  } else {
    std::fprintf(log, "eval: no test* files in %s, no evaluation\n",
                 options.data_dir.c_str());
  }
  if (es.has_cache) {
    std::fprintf(
        log,
        "worker cache: hit rate %s (%llu lookups, %llu misses, %llu stale "
        "rows refreshed, %llu evictions), %llu rows cached\n",
        result.cache_hit_rate.has_value()
            ? absl::StrFormat("%.1f%%", 100 * *result.cache_hit_rate).c_str()
            : "n/a",
        static_cast<unsigned long long>(es.lookups),
        static_cast<unsigned long long>(es.misses),
        static_cast<unsigned long long>(es.refreshes),
        static_cast<unsigned long long>(es.evictions),
        static_cast<unsigned long long>(es.cached_rows));
  } else {
    std::fprintf(log, "worker cache: none (%s)\n",
                 embeddings->Describe().c_str());
  }
  std::string tiers_json = "{";
  for (const TableStats& t : stats.tables) {
    std::fprintf(log,
                 "store table %-12s rows: %llu in memory, ~%llu on disk "
                 "(%llu created)\n",
                 t.name.c_str(), static_cast<unsigned long long>(t.memory_rows),
                 static_cast<unsigned long long>(t.disk_rows),
                 static_cast<unsigned long long>(t.created));
    absl::StrAppend(&tiers_json, tiers_json.size() > 1 ? ", " : "",
                    JsonEscape(t.name), ": {\"memory_rows\": ", t.memory_rows,
                    ", \"disk_rows\": ", t.disk_rows, "}");
  }
  tiers_json += "}";
  if (result.checkpoint.empty()) {
    std::fprintf(log, "checkpoint: none from rank %d (rank 0 writes them)\n",
                 options.shard.rank);
  } else {
    std::fprintf(log, "checkpoint: %s\n", result.checkpoint.c_str());
  }

  JsonObject summary;
  summary.Add("auc", result.auc)
      .Add("bayes_auc", result.bayes_auc)
      .Add("logloss", result.logloss)
      .Add("samples_per_sec", result.samples_per_sec)
      .Add("cache_hit_rate", result.cache_hit_rate)
      .Add("checkpoint", result.checkpoint)
      .Add("test_model", result.test_model)
      .Add("best_epoch", result.best_epoch.has_value()
                             ? std::optional<double>(*result.best_epoch)
                             : std::nullopt)
      .Add("best_step", result.best_step.has_value()
                            ? std::optional<double>(*result.best_step)
                            : std::nullopt)
      .Add("best_valid_logloss", result.best_valid_logloss)
      .Add("best_valid_auc", result.best_valid_auc)
      .Add("best_checkpoint", result.best_checkpoint)
      .AddRaw("stopped_early", result.stopped_early ? "true" : "false")
      .Add("valid_fraction", options.valid_fraction)
      .Add("patience", static_cast<int64_t>(options.patience))
      .Add("min_count", static_cast<uint64_t>(options.min_count))
      .Add("ids_admitted", result.ids_admitted)
      .Add("ids_tracked", result.ids_tracked)
      .Add("steps", result.steps)
      .Add("samples", result.samples)
      .Add("seconds", result.seconds)
      .Add("last_train_loss", result.last_loss)
      .Add("malformed_lines", result.malformed_lines)
      .Add("mode", options.mode == SyncMode::kSync ? "sync" : "async")
      .Add("store", options.store_description)
      .Add("embeddings", embeddings->Describe())
      .Add("dense", model->DenseDescription())
      .AddRaw("store_rows", tiers_json);
  result.summary_json =
      (std::filesystem::path(options.checkpoint_dir) / "summary.json").string();
  PSDB_RETURN_IF_ERROR(LocalFileIo().WriteFileAtomically(result.summary_json,
                                                         summary.ToString()));
  std::string outputs =
      absl::StrCat("reports: ", result.summary_json, ", ", csv_path);
  if (options.plot) {
    const std::string png =
        (std::filesystem::path(options.checkpoint_dir) / "metrics.png")
            .string();
    absl::Status plotted = PlotMetrics(csv_path, png, data.bayes_auc);
    if (plotted.ok()) {
      absl::StrAppend(&outputs, ", ", png);
    } else {
      std::fprintf(log, "plot: %s\n", std::string(plotted.message()).c_str());
    }
  }
  std::fprintf(log, "%s\n", outputs.c_str());
  std::fflush(log);
  return result;
}

}  // namespace psdb::train
