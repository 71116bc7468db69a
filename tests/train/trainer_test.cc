#include "train/trainer.h"

#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "psdb/local_client.h"
#include "tests/testing/test_util.h"
#include "train/criteo_reader.h"
#include "train/synthetic.h"
#include "train/wide_deep.h"
#include "util/status_macros.h"

namespace psdb::train {
namespace {

using ::psdb::testing::ScratchDir;

std::string ReadAll(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Everything written to `log` (a tmpfile), which it closes.
std::string ReadLog(std::FILE* log) {
  std::rewind(log);
  std::string text;
  char buf[4096];
  size_t got;
  while ((got = std::fread(buf, 1, sizeof(buf), log)) > 0)
    text.append(buf, got);
  std::fclose(log);
  return text;
}

// The metrics.csv row of `step` that has a train_loss, split into cells.
std::vector<std::string> TrainRow(const std::string& csv, int64_t step) {
  for (absl::string_view line : absl::StrSplit(csv, '\n')) {
    std::vector<std::string> cells = absl::StrSplit(line, ',');
    if (cells.size() > 3 && cells[0] == absl::StrCat(step) &&
        !cells[3].empty()) {
      return cells;
    }
  }
  return {};
}

class TrainerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    GeneratorOptions g;
    g.train_rows = 4000;
    g.test_rows = 2000;
    g.train_files = 2;
    g.max_vocab = 300;
    ASSERT_OK_AND_ASSIGN(gen_, GenerateSynthetic(g, dir_.Sub("data")));
  }

  TrainerOptions Options(const std::string& ckpt) const {
    TrainerOptions o;
    o.data_dir = dir_.Sub("data");
    o.checkpoint_dir = dir_.Sub(ckpt);
    o.epochs = 2;
    o.batch_size = 100;
    o.log_every = 20;
    o.checkpoint_every = 50;
    // No validation split unless a test asks: the exact step counts and
    // losses below are of all 4000 lines.
    o.valid_fraction = 0;
    o.progress = false;
    o.plot = false;
    o.model.deep_dim = 4;
    o.model.hidden = {16, 8};
    o.model.block_dim = 64;
    o.model.wide_lr = 0.1f;
    o.model.deep_lr = 0.01f;
    o.model.dense_lr = 0.003f;
    return o;
  }

  std::unique_ptr<LocalClient> OpenStore(const std::string& name) const {
    auto client = LocalClient::Open(dir_.Sub(name));
    EXPECT_TRUE(client.ok()) << client.status();
    return client.ok() ? std::move(*client) : nullptr;
  }

  ScratchDir dir_;
  GeneratorResult gen_;
};

TEST_F(TrainerTest, TinyRunBeatsTheConstantBaselineAndWritesReports) {
  auto client = OpenStore("store");
  ASSERT_NE(client, nullptr);
  ClientEmbeddingSource embeddings(client.get());
  TrainerOptions o = Options("ckpt");
  std::FILE* log = std::tmpfile();
  ASSERT_OK_AND_ASSIGN(TrainResult r,
                       RunTraining(o, client.get(), &embeddings, log));
  EXPECT_EQ(r.steps, 80);  // 2 epochs of 4000 / 100
  EXPECT_EQ(r.samples, 8000u);
  ASSERT_TRUE(r.auc.has_value());
  ASSERT_TRUE(r.bayes_auc.has_value());
  // A constant predictor scores AUC 0.5 and log-loss H(ctr).
  const double ctr = gen_.test_ctr;
  const double entropy = -(ctr * std::log(ctr) + (1 - ctr) * std::log(1 - ctr));
  EXPECT_GT(*r.auc, 0.5 + 0.5 * (*r.bayes_auc - 0.5))
      << "bayes " << *r.bayes_auc;
  EXPECT_LT(*r.logloss, entropy);
  EXPECT_LE(*r.auc, *r.bayes_auc + 0.02);

  const std::string summary = ReadAll(o.checkpoint_dir + "/summary.json");
  for (const char* key :
       {"\"auc\"", "\"bayes_auc\"", "\"logloss\"", "\"samples_per_sec\"",
        "\"cache_hit_rate\"", "\"checkpoint\""}) {
    EXPECT_THAT(summary, ::testing::HasSubstr(key));
  }
  EXPECT_NEAR(JsonNumber(summary, "auc").value_or(-1), *r.auc, 1e-5);
  const std::string csv = ReadAll(o.checkpoint_dir + "/metrics.csv");
  EXPECT_THAT(csv, ::testing::StartsWith(
                       "step,epoch,samples,train_loss,train_auc,eval_auc,"
                       "eval_logloss,wide_loss,deep_loss,valid_auc,"
                       "valid_logloss\n20,1,2000,"));
  // Log lines in the seeds' style (the loss, then seed 004's per-part
  // losses), an eval line per epoch, two mid-run checkpoints plus the final
  // one.
  const std::string text = ReadLog(log);
  EXPECT_THAT(text, ::testing::ContainsRegex(
                        "epoch: 1 step: 20, loss is 0\\.[0-9]{4}\n"
                        "epoch: 1 step: 20, wide_loss is 0\\.[0-9]+, "
                        "deep_loss is 0\\.[0-9]+\n"));
  EXPECT_THAT(text, ::testing::ContainsRegex("epoch: 2 step: 80, loss is"));
  EXPECT_THAT(text, ::testing::HasSubstr("epoch: 2 step: 80, wide_loss is "));
  // Every loss line has its per-part line, and metrics.csv the same values.
  int loss_lines = 0, part_lines = 0;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    if (absl::StrContains(line, ", loss is ")) ++loss_lines;
    if (!absl::StrContains(line, ", wide_loss is ")) continue;
    ++part_lines;
    int epoch;
    long long step;
    float wide, deep;
    ASSERT_EQ(std::sscanf(std::string(line).c_str(),
                          "epoch: %d step: %lld, wide_loss is %f, "
                          "deep_loss is %f",
                          &epoch, &step, &wide, &deep),
              4)
        << line;
    EXPECT_EQ(PartLossLine(epoch, step, wide, deep), line);
    const std::vector<std::string> row = TrainRow(csv, step);
    ASSERT_EQ(row.size(), 11u) << "step " << step << "\n" << csv;
    // The CSV cells are %.6f of the same doubles the log rounds to float:
    // they agree within 5e-7 (the cell) + 6e-8 (the float, values < 1).
    EXPECT_NEAR(std::stod(row[7]), wide, 6e-7) << line;
    EXPECT_NEAR(std::stod(row[8]), deep, 6e-7) << line;
  }
  EXPECT_EQ(loss_lines, 4);  // steps 20, 40, 60, 80
  EXPECT_EQ(part_lines, 4);
  // The test files are read once, at the end.
  EXPECT_THAT(text, ::testing::Not(::testing::HasSubstr("step: 40, eval AUC")));
  EXPECT_THAT(text, ::testing::HasSubstr("epoch: 2 step: 80, eval AUC is"));
  EXPECT_THAT(text, ::testing::HasSubstr("checkpoint: step 50 ->"));
  EXPECT_THAT(text, ::testing::HasSubstr("checkpoint: step 80 ->"));
  EXPECT_THAT(r.checkpoint, ::testing::StartsWith(o.checkpoint_dir + "/ckpt-"));
  EXPECT_TRUE(std::filesystem::exists(r.checkpoint + "/MANIFEST.json"));
}

TEST_F(TrainerTest, AsyncModeAndLineShardingTrain) {
  auto client = OpenStore("store");
  ASSERT_NE(client, nullptr);
  ClientEmbeddingSource embeddings(client.get());
  TrainerOptions o = Options("ckpt");
  o.mode = SyncMode::kAsync;
  o.epochs = 1;
  o.shard = {.rank = 1, .world = 2, .shard_by = ShardBy::kLine};
  std::FILE* log = std::tmpfile();
  ASSERT_OK_AND_ASSIGN(TrainResult r,
                       RunTraining(o, client.get(), &embeddings, log));
  std::fclose(log);
  EXPECT_EQ(r.samples, 2000u);
  ASSERT_TRUE(r.auc.has_value());
  EXPECT_GT(*r.auc, 0.55);
}

// Seed 004's loss.log lines come back byte for byte from their values.
TEST(PartLossLineTest, IsSeed004sFormat) {
  struct SeedLine {
    int step;
    double wide, deep;
    const char* line;
  };
  const SeedLine seed[] = {
      {1, 0.6873926, 0.8878349,
       "epoch: 1 step: 1, wide_loss is 0.6873926, deep_loss is 0.8878349"},
      {2, 0.6442529, 0.8342661,
       "epoch: 1 step: 2, wide_loss is 0.6442529, deep_loss is 0.8342661"},
      {3, 0.6227323, 0.80273706,
       "epoch: 1 step: 3, wide_loss is 0.6227323, deep_loss is 0.80273706"},
      {8, 0.57553077, 0.7123517,
       "epoch: 1 step: 8, wide_loss is 0.57553077, deep_loss is 0.7123517"},
      {9, 0.5733629, 0.70278376,
       "epoch: 1 step: 9, wide_loss is 0.5733629, deep_loss is 0.70278376"},
      {10, 0.566089, 0.6884129,
       "epoch: 1 step: 10, wide_loss is 0.566089, deep_loss is 0.6884129"},
  };
  for (const SeedLine& s : seed) {
    EXPECT_EQ(PartLossLine(1, s.step, s.wide, s.deep), s.line);
  }
  // A double is shown as the float it rounds to.
  EXPECT_EQ(PartLossLine(3, 12345, 0.1, 1.0 / 3),
            "epoch: 3 step: 12345, wide_loss is 0.1, deep_loss is 0.33333334");
}

// With a line per step, the logged losses are exactly the model's for that
// step: a second store trained by hand on the same batches through
// WideDeepModel gives the same three numbers.
TEST_F(TrainerTest, LoggedPartLossesAreTheModelsOwn) {
  auto client = OpenStore("store");
  ASSERT_NE(client, nullptr);
  ClientEmbeddingSource embeddings(client.get());
  TrainerOptions o = Options("ckpt");
  o.epochs = 1;
  o.log_every = 1;
  o.max_steps = 3;
  std::FILE* log = std::tmpfile();
  ASSERT_OK(RunTraining(o, client.get(), &embeddings, log).status());
  const std::string text = ReadLog(log);

  auto by_hand = OpenStore("by-hand");
  ASSERT_NE(by_hand, nullptr);
  ClientEmbeddingSource hand_embeddings(by_hand.get());
  ASSERT_OK_AND_ASSIGN(
      std::unique_ptr<WideDeepModel> model,
      WideDeepModel::Create(o.model, by_hand.get(), &hand_embeddings));
  ASSERT_OK_AND_ASSIGN(DataDir data, LoadDataDir(o.data_dir));
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<CriteoReader> reader,
                       CriteoReader::Open(data.train_files));
  std::vector<CriteoBatch> batches(4);
  for (CriteoBatch& b : batches) {
    ASSERT_OK_AND_ASSIGN(size_t n, reader->Next(o.batch_size, &b));
    ASSERT_EQ(n, static_cast<size_t>(o.batch_size));
  }
  model->Begin(batches[0]);
  std::vector<float> probs;
  for (int step = 1; step <= 3; ++step) {
    // The trainer hands the next batch over for prefetch, except at its
    // last step.
    ASSERT_OK_AND_ASSIGN(
        const WideDeepLoss loss,
        model->TrainStep(batches[step - 1], step < 3 ? &batches[step] : nullptr,
                         step, &probs));
    EXPECT_THAT(text,
                ::testing::HasSubstr(absl::StrFormat(
                    "epoch: 1 step: %d, loss is %.4f\n", step, loss.loss)));
    const std::string part = absl::StrCat(
        PartLossLine(1, step, loss.wide_loss, loss.deep_loss), "\n");
    EXPECT_THAT(text, ::testing::HasSubstr(part));
  }
}

TEST_F(TrainerTest, BadOptionsAndMissingDataFail) {
  auto client = OpenStore("store");
  ASSERT_NE(client, nullptr);
  ClientEmbeddingSource embeddings(client.get());
  TrainerOptions o = Options("ckpt");
  o.batch_size = 0;
  EXPECT_THAT(RunTraining(o, client.get(), &embeddings, stdout),
              StatusIs(absl::StatusCode::kInvalidArgument));
  o = Options("ckpt");
  o.data_dir = dir_.Sub("nope");
  EXPECT_THAT(RunTraining(o, client.get(), &embeddings, stdout),
              StatusIs(absl::StatusCode::kNotFound));
  // Time-based checkpoints: not negative, and one worker only (the ranks'
  // clocks would pick different steps).
  o = Options("ckpt");
  o.checkpoint_interval = absl::Seconds(-1);
  EXPECT_THAT(RunTraining(o, client.get(), &embeddings, stdout),
              StatusIs(absl::StatusCode::kInvalidArgument));
  o = Options("ckpt");
  o.checkpoint_interval = absl::Seconds(1);
  o.shard.world = 2;
  EXPECT_THAT(RunTraining(o, client.get(), &embeddings, stdout),
              StatusIs(absl::StatusCode::kInvalidArgument));
}

}  // namespace
}  // namespace psdb::train

namespace psdb::train {
namespace {

// The cluster hooks: after_step sees every step once, in order, after its
// pushes (the rows already moved in sync mode); checkpoint_fn replaces the
// client's checkpoint at every checkpoint point and its path is reported.
TEST_F(TrainerTest, ClusterHooksRunEveryStepAndReplaceCheckpoints) {
  auto client = OpenStore("store");
  ASSERT_NE(client, nullptr);
  ClientEmbeddingSource embeddings(client.get());
  TrainerOptions o = Options("ckpt");
  o.epochs = 1;
  o.prefetch = false;
  std::vector<int64_t> steps, table_steps, checkpoints;
  o.after_step = [&](int64_t step) -> absl::Status {
    steps.push_back(step);
    PSDB_ASSIGN_OR_RETURN(StoreStats stats, client->Stats());
    table_steps.push_back(stats.tables.front().step);
    return absl::OkStatus();
  };
  o.checkpoint_fn = [&](int64_t step) -> absl::StatusOr<std::string> {
    checkpoints.push_back(step);
    return absl::StrCat("cluster-ckpt-", step);
  };
  std::FILE* log = std::tmpfile();
  ASSERT_OK_AND_ASSIGN(TrainResult r,
                       RunTraining(o, client.get(), &embeddings, log));
  std::fclose(log);
  ASSERT_EQ(r.steps, 40);
  std::vector<int64_t> want;
  for (int64_t s = 1; s <= 40; ++s) want.push_back(s);
  EXPECT_EQ(steps, want);
  EXPECT_EQ(table_steps, want);
  EXPECT_EQ(checkpoints, (std::vector<int64_t>{40}));  // every 50: only the end
  EXPECT_EQ(r.checkpoint, "cluster-ckpt-40");
  // Nothing was written by the client's own Checkpoint.
  EXPECT_FALSE(std::filesystem::exists(dir_.Sub("ckpt/MANIFEST.json")));
  for (const auto& e : std::filesystem::directory_iterator(dir_.Sub("ckpt"))) {
    EXPECT_NE(e.path().filename().string().rfind("ckpt-", 0), 0u) << e.path();
  }
  // A failing step hook stops training with its error.
  o = Options("ckpt2");
  o.after_step = [](int64_t step) -> absl::Status {
    if (step == 3) return absl::DeadlineExceededError("clock");
    return absl::OkStatus();
  };
  EXPECT_THAT(RunTraining(o, client.get(), &embeddings, stdout),
              StatusIs(absl::StatusCode::kDeadlineExceeded));
}

}  // namespace
}  // namespace psdb::train

namespace psdb::train {
namespace {

// A line whose 26 ids are group `g`'s (field 25 unique per line: `tag`).
std::string GroupLine(int label, int g, int tag) {
  std::string line = absl::StrCat(label);
  for (int j = 0; j < kNumIntFeatures; ++j) line += "\t";
  for (int j = 0; j < kNumCatFeatures - 1; ++j) {
    absl::StrAppend(&line, "\t", absl::Hex(0x100 * (g + 1) + j));
  }
  absl::StrAppend(&line, "\t", absl::Hex(0x100000 + tag));
  return line;
}

// A crafted case where training makes validation worse at every step: the
// held-out lines (the hash's choice) carry the opposite labels of the
// training lines of the same group. The first evaluation is the best;
// after `patience` = 2 worse ones training stops; the best checkpoint is the
// step-1 state, and the test files (the validation lines themselves) are
// evaluated on it: their log-loss is the best validation log-loss exactly.
TEST(EarlyStoppingTest, StopsAfterPatienceAndReportsTheBestCheckpoint) {
  ScratchDir dir;
  constexpr double kFraction = 0.25;
  std::vector<std::string> train, valid;
  for (int tag = 0; train.size() < 400; ++tag) {
    const int g = tag % 2;
    // Validation lines: group 0 clicks, group 1 does not; training lines
    // the reverse.
    const std::string held = GroupLine(g == 0 ? 1 : 0, g, tag);
    const std::string kept = GroupLine(g == 0 ? 0 : 1, g, tag);
    if (InValidSplit(held, kFraction)) {
      valid.push_back(held);
    } else if (!InValidSplit(kept, kFraction)) {
      train.push_back(kept);
    }
  }
  ASSERT_GT(valid.size(), 20u);
  std::filesystem::create_directories(dir.Sub("data"));
  {
    std::ofstream out(dir.Sub("data/train.txt"));
    for (const auto& l : train) out << l << "\n";
    for (const auto& l : valid) out << l << "\n";
    std::ofstream test(dir.Sub("data/test.txt"));
    for (const auto& l : valid) test << l << "\n";
  }
  auto client = LocalClient::Open(dir.Sub("store"));
  ASSERT_OK(client.status());
  ClientEmbeddingSource embeddings(client->get());
  TrainerOptions o;
  o.data_dir = dir.Sub("data");
  o.checkpoint_dir = dir.Sub("ckpt");
  o.epochs = 3;
  o.batch_size = 40;
  o.log_every = 1;
  o.eval_every = 1;
  o.valid_fraction = kFraction;
  o.patience = 2;
  o.progress = false;
  o.plot = false;
  o.model.deep_dim = 4;
  o.model.hidden = {8};
  o.model.block_dim = 64;
  o.model.wide_lr = 0.1f;
  o.open_checkpoint = [](const std::string& path)
      -> absl::StatusOr<std::unique_ptr<ParameterClient>> {
    PSDB_ASSIGN_OR_RETURN(std::unique_ptr<LocalClient> c,
                          LocalClient::OpenCheckpoint(path));
    return std::unique_ptr<ParameterClient>(std::move(c));
  };
  std::FILE* log = std::tmpfile();
  ASSERT_OK_AND_ASSIGN(TrainResult r,
                       RunTraining(o, client->get(), &embeddings, log));
  const std::string text = ReadLog(log);
  EXPECT_EQ(r.steps, 3) << text;
  EXPECT_TRUE(r.stopped_early);
  EXPECT_EQ(r.samples, 120u);
  ASSERT_TRUE(r.best_step.has_value());
  EXPECT_EQ(*r.best_step, 1);
  EXPECT_EQ(*r.best_epoch, 1);
  EXPECT_THAT(text, ::testing::HasSubstr("2 of patience 2"));
  EXPECT_THAT(text, ::testing::HasSubstr("early stopping: epoch 1 step 3"));
  // The best checkpoint holds step 1; the last state (step 3) is CDIR's.
  // (Checkpoint ids are ckpt-<step>-<seq>, the step the tables' own.)
  EXPECT_THAT(
      r.best_checkpoint,
      ::testing::StartsWith(o.checkpoint_dir + "/best/ckpt-000000000001-"));
  EXPECT_TRUE(std::filesystem::exists(r.best_checkpoint + "/MANIFEST.json"));
  EXPECT_THAT(r.checkpoint, ::testing::StartsWith(o.checkpoint_dir + "/ckpt-"));
  // Test = the validation lines, evaluated on the best checkpoint.
  EXPECT_EQ(r.test_model, "best");
  ASSERT_TRUE(r.logloss.has_value());
  EXPECT_DOUBLE_EQ(*r.logloss, *r.best_valid_logloss);
  EXPECT_DOUBLE_EQ(*r.auc, *r.best_valid_auc);
  // The test files are read once.
  int test_lines = 0;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    if (absl::StrContains(line, "eval AUC is")) ++test_lines;
  }
  EXPECT_EQ(test_lines, 1);
  const std::string summary = ReadAll(o.checkpoint_dir + "/summary.json");
  EXPECT_EQ(JsonNumber(summary, "best_step"), 1.0);
  EXPECT_EQ(JsonNumber(summary, "best_epoch"), 1.0);
  EXPECT_NEAR(JsonNumber(summary, "best_valid_logloss").value_or(-1),
              *r.best_valid_logloss, 1e-5);
  EXPECT_THAT(summary, ::testing::HasSubstr("\"stopped_early\": true"));
  EXPECT_THAT(summary, ::testing::HasSubstr(r.best_checkpoint));

  // Without open_checkpoint the test files measure the last state instead,
  // and say so.
  auto client2 = LocalClient::Open(dir.Sub("store2"));
  ASSERT_OK(client2.status());
  ClientEmbeddingSource embeddings2(client2->get());
  o.checkpoint_dir = dir.Sub("ckpt2");
  o.open_checkpoint = nullptr;
  std::FILE* log2 = std::tmpfile();
  ASSERT_OK_AND_ASSIGN(TrainResult last,
                       RunTraining(o, client2->get(), &embeddings2, log2));
  std::fclose(log2);
  EXPECT_EQ(last.test_model, "last");
  EXPECT_EQ(last.best_step, 1);
  EXPECT_GT(*last.logloss, *r.logloss);
}

// With patience 0 training runs every epoch; a fraction out of range fails.
TEST(EarlyStoppingTest, PatienceZeroNeverStopsAndBadFractionFails) {
  ScratchDir dir;
  GeneratorOptions g;
  g.train_rows = 1000;
  g.test_rows = 200;
  g.max_vocab = 100;
  ASSERT_OK(GenerateSynthetic(g, dir.Sub("data")).status());
  auto client = LocalClient::Open(dir.Sub("store"));
  ASSERT_OK(client.status());
  ClientEmbeddingSource embeddings(client->get());
  TrainerOptions o;
  o.data_dir = dir.Sub("data");
  o.checkpoint_dir = dir.Sub("ckpt");
  o.epochs = 2;
  o.batch_size = 100;
  o.patience = 0;
  o.valid_fraction = 0.1;
  o.progress = false;
  o.plot = false;
  o.model.deep_dim = 4;
  o.model.hidden = {8};
  o.model.block_dim = 64;
  std::FILE* log = std::tmpfile();
  ASSERT_OK_AND_ASSIGN(TrainResult r,
                       RunTraining(o, client->get(), &embeddings, log));
  std::fclose(log);
  EXPECT_FALSE(r.stopped_early);
  // Both epochs ran over the ~90% of lines not held out.
  EXPECT_GT(r.samples, 2u * 800);
  EXPECT_LT(r.samples, 2u * 990);
  EXPECT_EQ(r.samples % 2, 0u);
  ASSERT_TRUE(r.best_step.has_value());
  o.valid_fraction = 1.0;
  EXPECT_THAT(RunTraining(o, client->get(), &embeddings, stdout),
              StatusIs(absl::StatusCode::kInvalidArgument));
}

}  // namespace
}  // namespace psdb::train

namespace psdb::train {
namespace {

// --min_count: rows are created only for ids seen min_count times, plus the
// per-field fallback rows the rest share; the model still learns.
TEST_F(TrainerTest, MinCountCreatesRowsOnlyForAdmittedIdsAndFallbacks) {
  auto client = OpenStore("store");
  ASSERT_NE(client, nullptr);
  ClientEmbeddingSource embeddings(client.get());
  TrainerOptions o = Options("ckpt");
  o.epochs = 1;
  o.min_count = 20;
  std::FILE* log = std::tmpfile();
  ASSERT_OK_AND_ASSIGN(TrainResult r,
                       RunTraining(o, client.get(), &embeddings, log));
  const std::string text = ReadLog(log);
  EXPECT_GT(r.ids_admitted, 0u);
  EXPECT_LT(r.ids_admitted, r.ids_tracked);
  ASSERT_OK_AND_ASSIGN(StoreStats stats, client->Stats());
  for (const TableStats& t : stats.tables) {
    if (t.name != "deep" && t.name != "wide") continue;
    // Admitted ids, and at most one fallback row per field.
    EXPECT_GT(t.created, r.ids_admitted) << t.name;
    EXPECT_LE(t.created, r.ids_admitted + kNumCatFeatures) << t.name;
  }
  EXPECT_THAT(text, ::testing::HasSubstr("have their own rows"));
  ASSERT_TRUE(r.auc.has_value());
  EXPECT_GT(*r.auc, 0.55);
}

}  // namespace
}  // namespace psdb::train
