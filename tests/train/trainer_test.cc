#include "train/trainer.h"

#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "store/local_client.h"
#include "tests/testing/test_util.h"
#include "train/criteo_reader.h"
#include "train/synthetic.h"
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
  EXPECT_THAT(text, ::testing::ContainsRegex("epoch: 2 step: 80, loss is"));
  EXPECT_THAT(text, ::testing::HasSubstr("epoch: 1 step: 40, eval AUC is"));
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
