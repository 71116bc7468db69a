#include "train/trainer.h"

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "tests/testing/test_util.h"
#include "tests/train/memory_client.h"
#include "train/criteo_reader.h"
#include "train/synthetic.h"

namespace psdb::train {
namespace {

using ::psdb::testing::ScratchDir;

std::string ReadAll(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

class TrainerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    GeneratorOptions g;
    g.train_rows = 6000;
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

  ScratchDir dir_;
  GeneratorResult gen_;
};

TEST_F(TrainerTest, TinyRunBeatsTheConstantBaselineAndWritesReports) {
  MemoryClient client;
  ClientEmbeddingSource embeddings(&client);
  TrainerOptions o = Options("ckpt");
  std::FILE* log = std::tmpfile();
  ASSERT_OK_AND_ASSIGN(TrainResult r,
                       RunTraining(o, &client, &embeddings, log));
  EXPECT_EQ(r.steps, 120);  // 2 epochs of 6000 / 100
  EXPECT_EQ(r.samples, 12000u);
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
                       "eval_logloss\n20,1,2000,"));
  // Log lines in the seeds' style, an eval line per epoch, two mid-run
  // checkpoints plus the final one.
  std::rewind(log);
  std::string text;
  char buf[4096];
  size_t got;
  while ((got = std::fread(buf, 1, sizeof(buf), log)) > 0)
    text.append(buf, got);
  std::fclose(log);
  EXPECT_THAT(text, ::testing::ContainsRegex(
                        "epoch: 1 step: 20, loss is 0\\.[0-9]{4}\n"));
  EXPECT_THAT(text, ::testing::ContainsRegex("epoch: 2 step: 120, loss is"));
  EXPECT_THAT(text, ::testing::HasSubstr("epoch: 1 step: 60, eval AUC is"));
  EXPECT_THAT(text, ::testing::HasSubstr("checkpoint: step 100 ->"));
  EXPECT_THAT(text, ::testing::HasSubstr("checkpoint: step 120 ->"));
  EXPECT_EQ(r.checkpoint, o.checkpoint_dir + "/ckpt-memory-3");
}

TEST_F(TrainerTest, SyncRunsAreDeterministic) {
  MemoryClient a, b;
  ClientEmbeddingSource ea(&a), eb(&b);
  TrainerOptions o = Options("ckpt-a");
  o.epochs = 1;
  std::FILE* log = std::tmpfile();
  ASSERT_OK_AND_ASSIGN(TrainResult ra, RunTraining(o, &a, &ea, log));
  o.checkpoint_dir = dir_.Sub("ckpt-b");
  ASSERT_OK_AND_ASSIGN(TrainResult rb, RunTraining(o, &b, &eb, log));
  std::fclose(log);
  EXPECT_EQ(ra.auc, rb.auc);
  for (const char* table :
       {"wide", "deep", "wide_linear", "mlp.w0", "mlp.b2"}) {
    const auto rows_a = a.Rows(table), rows_b = b.Rows(table);
    ASSERT_EQ(rows_a.size(), rows_b.size()) << table;
    EXPECT_GT(rows_a.size(), 0u) << table;
    for (const auto& [key, row] : rows_a) {
      const auto it = rows_b.find(key);
      ASSERT_NE(it, rows_b.end());
      ASSERT_EQ(row.values, it->second.values) << table << " key " << key;
      ASSERT_EQ(row.state, it->second.state) << table << " key " << key;
    }
  }
}

TEST_F(TrainerTest, AsyncModeAndLineShardingTrain) {
  MemoryClient client;
  ClientEmbeddingSource embeddings(&client);
  TrainerOptions o = Options("ckpt");
  o.mode = SyncMode::kAsync;
  o.epochs = 1;
  o.shard = {.rank = 1, .world = 2, .shard_by = ShardBy::kLine};
  std::FILE* log = std::tmpfile();
  ASSERT_OK_AND_ASSIGN(TrainResult r,
                       RunTraining(o, &client, &embeddings, log));
  std::fclose(log);
  EXPECT_EQ(r.samples, 3000u);
  ASSERT_TRUE(r.auc.has_value());
  EXPECT_GT(*r.auc, 0.55);
}

TEST_F(TrainerTest, BadOptionsAndMissingDataFail) {
  MemoryClient client;
  ClientEmbeddingSource embeddings(&client);
  TrainerOptions o = Options("ckpt");
  o.batch_size = 0;
  EXPECT_THAT(RunTraining(o, &client, &embeddings, stdout),
              StatusIs(absl::StatusCode::kInvalidArgument));
  o = Options("ckpt");
  o.data_dir = dir_.Sub("nope");
  EXPECT_THAT(RunTraining(o, &client, &embeddings, stdout),
              StatusIs(absl::StatusCode::kNotFound));
}

// Not part of the suite: generates the quick start's data set into
// PSDB_TUNE_DATA.
TEST(TrainerTuning, DISABLED_Generate) {
  const char* data = std::getenv("PSDB_TUNE_DATA");
  ASSERT_NE(data, nullptr);
  GeneratorOptions g;
  if (const char* rows = std::getenv("PSDB_TUNE_ROWS")) {
    g.train_rows = std::atoll(rows);
  }
  if (const char* vocab = std::getenv("PSDB_TUNE_VOCAB")) {
    g.max_vocab = std::atoll(vocab);
  }
  ASSERT_OK_AND_ASSIGN(GeneratorResult r, GenerateSynthetic(g, data));
  std::printf("bayes_auc %.4f expected %.4f logloss %.4f ctr %.3f\n",
              r.bayes_auc, r.bayes_auc_expected, r.bayes_logloss, r.train_ctr);
}

// Not part of the suite: trains the quick start's configuration on a data
// directory given by PSDB_TUNE_DATA (for tuning, in a Release build).
TEST(TrainerTuning, DISABLED_QuickstartConfig) {
  const char* data = std::getenv("PSDB_TUNE_DATA");
  ASSERT_NE(data, nullptr);
  ScratchDir dir;
  MemoryClient client;
  ClientEmbeddingSource embeddings(&client);
  TrainerOptions o;
  o.data_dir = data;
  o.checkpoint_dir = dir.Sub("ckpt");
  o.log_every = 200;
  ASSERT_OK_AND_ASSIGN(TrainResult r,
                       RunTraining(o, &client, &embeddings, stdout));
}

}  // namespace
}  // namespace psdb::train
