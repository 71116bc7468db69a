// ps-train end to end through its command line (tools/train/train_cli.h) on
// the embedded store: gen, train, checkpoints, reports, determinism.
#include "tools/train/train_cli.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "manifest/manifest.h"
#include "psdb/checkpoint_reader.h"
#include "rocksdb/iterator.h"
#include "store/row_codec.h"
#include "tests/testing/child_process.h"
#include "tests/testing/test_util.h"
#include "tests/train/compress.h"
#include "train/criteo_reader.h"

namespace psdb::train {
namespace {

using ::psdb::testing::ScratchDir;

int RunPsTrain(std::vector<std::string> args, std::string* out_text = nullptr,
               std::string* err_text = nullptr) {
  args.insert(args.begin(), "ps-train");
  std::vector<const char*> argv;
  for (const auto& a : args) argv.push_back(a.c_str());
  std::ostringstream out, err;
  const int rc = RunTrain(static_cast<int>(argv.size()), argv.data(), out, err);
  if (out_text != nullptr) *out_text = out.str();
  if (err_text != nullptr) *err_text = err.str();
  return rc;
}

std::string ReadAll(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Every table's rows of the newest checkpoint under `root`: table -> key ->
// encoded row bytes.
using Rows = std::map<std::string, std::map<uint64_t, std::string>>;
Rows CheckpointRows(const std::string& root) {
  Rows rows;
  auto reader = ckpt::CheckpointReader::Open(root);
  EXPECT_TRUE(reader.ok()) << reader.status();
  if (!reader.ok()) return rows;
  for (const ckpt::TableInfo& t : (*reader)->tables()) {
    for (size_t shard = 0; shard < (*reader)->shards().size(); ++shard) {
      auto it = (*reader)->NewIterator(shard, t.spec.name);
      EXPECT_TRUE(it.ok()) << it.status();
      for ((*it)->SeekToFirst(); (*it)->Valid(); (*it)->Next()) {
        uint64_t key;
        EXPECT_OK(DecodeKey(
            absl::string_view((*it)->key().data(), (*it)->key().size()), &key));
        rows[t.spec.name][key] = (*it)->value().ToString();
      }
    }
  }
  return rows;
}

class TrainCliTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string out;
    ASSERT_EQ(RunPsTrain({"gen", "--out", data(), "--train_rows", "3000",
                          "--test_rows", "1000", "--train_files", "2",
                          "--max_vocab", "200"},
                         &out),
              0);
    EXPECT_THAT(out, ::testing::HasSubstr("Bayes-optimal test AUC"));
  }
  std::string data() const { return dir_.Sub("data"); }
  std::vector<std::string> TrainArgs(const std::string& ckpt) const {
    return {"--data",        data(),      "--checkpoint_dir",   dir_.Sub(ckpt),
            "--batch_size",  "100",       "--deep_dim",         "4",
            "--hidden",      "16,8",      "--block_dim",        "64",
            "--log_every",   "10",        "--checkpoint_every", "20",
            "--deep_lr",     "0.01",      "--dense_lr",         "0.003",
            "--no_progress", "--no_plot", "--valid_fraction",   "0"};
  }

  ScratchDir dir_;
};

TEST_F(TrainCliTest, TrainsOnTheEmbeddedStoreWithTheCacheAndIsDeterministic) {
  std::vector<std::string> a = TrainArgs("ckpt-a");
  a.insert(a.end(), {"--cache_rows", "6000"});
  ASSERT_EQ(RunPsTrain(a), 0);
  const std::string summary = ReadAll(dir_.Sub("ckpt-a/summary.json"));
  const std::optional<double> auc = JsonNumber(summary, "auc");
  const std::optional<double> bayes = JsonNumber(summary, "bayes_auc");
  ASSERT_TRUE(auc.has_value() && bayes.has_value()) << summary;
  EXPECT_GT(*auc, 0.5 + 0.4 * (*bayes - 0.5)) << summary;
  const std::optional<double> hit_rate = JsonNumber(summary, "cache_hit_rate");
  ASSERT_TRUE(hit_rate.has_value()) << summary;
  EXPECT_GT(*hit_rate, 0.3);
  EXPECT_LE(*hit_rate, 1.0);
  EXPECT_THAT(summary, ::testing::HasSubstr("\"checkpoint\": \"" +
                                            dir_.Sub("ckpt-a/ckpt-")));

  // Same seed, same data, same order: identical checkpoint rows.
  std::vector<std::string> b = TrainArgs("ckpt-b");
  b.insert(b.end(), {"--cache_rows", "6000"});
  ASSERT_EQ(RunPsTrain(b), 0);
  const Rows rows_a = CheckpointRows(dir_.Sub("ckpt-a"));
  const Rows rows_b = CheckpointRows(dir_.Sub("ckpt-b"));
  // wide, deep, wide_linear, wide.scale, mlp.{w,b}{0,1,2}, fwfm.r (the
  // default model's).
  ASSERT_EQ(rows_a.size(), 11u);
  EXPECT_GT(rows_a.at("deep").size(), 500u);
  EXPECT_TRUE(rows_a == rows_b);

  // Without the worker cache (straight pulls and pushes) the values and
  // optimizer state are the same: the write-back cache is exact.
  std::vector<std::string> c = TrainArgs("ckpt-c");
  c.insert(c.end(), {"--cache_rows", "0"});
  ASSERT_EQ(RunPsTrain(c), 0);
  const Rows rows_c = CheckpointRows(dir_.Sub("ckpt-c"));
  ASSERT_EQ(rows_c.size(), rows_a.size());
  for (const auto& [table, keyed] : rows_a) {
    ASSERT_EQ(keyed.size(), rows_c.at(table).size()) << table;
    for (const auto& [key, bytes] : keyed) {
      int dim, state_size;
      ASSERT_OK(PeekRowShape(bytes, &dim, &state_size));
      std::vector<float> va(dim), sa(state_size), vc(dim), sc(state_size);
      RowHeader ha, hc;
      ASSERT_OK(DecodeRow(bytes, dim, state_size, &ha, absl::MakeSpan(va),
                          absl::MakeSpan(sa)));
      ASSERT_OK(DecodeRow(rows_c.at(table).at(key), dim, state_size, &hc,
                          absl::MakeSpan(vc), absl::MakeSpan(sc)));
      ASSERT_EQ(va, vc) << table << " key " << key;
      ASSERT_EQ(sa, sc) << table << " key " << key;
    }
  }
}

// --cache_staleness: a push-through cache re-reads a row only once more
// than N of its pushes have passed it, so it serves more of the lookups
// and reads fewer rows; every lookup is still a hit, a miss or a refresh.
TEST_F(TrainCliTest, CacheStalenessServesPushThroughRowsLonger) {
  auto stats = [&](const std::string& ckpt, const std::string& staleness) {
    std::vector<std::string> args = TrainArgs(ckpt);
    args.insert(args.end(), {"--cache_rows", "6000", "--cache_mode",
                             "push_through", "--cache_staleness", staleness});
    EXPECT_EQ(RunPsTrain(args), 0);
    const std::string summary = ReadAll(dir_.Sub(ckpt + "/summary.json"));
    EXPECT_GT(*JsonNumber(summary, "auc"), 0.6) << summary;
    return *JsonNumber(summary, "cache_hit_rate");
  };
  const double fresh = stats("ckpt-s0", "0");
  const double stale = stats("ckpt-s4", "4");
  EXPECT_GT(stale, fresh + 0.05);
  EXPECT_LE(stale, 1.0);
}

// --model: each model trains through the worker cache, checkpoints exactly
// its own tables and beats the constant predictor; the cache-less run gives
// the same rows (its tables go through the same pulls and pushes).
TEST_F(TrainCliTest, EveryModelTrainsItsOwnTables) {
  const std::map<std::string, std::vector<std::string>> tables = {
      {"deepfm",
       {"deep", "mlp.b0", "mlp.b1", "mlp.b2", "mlp.w0", "mlp.w1", "mlp.w2",
        "wide", "wide.scale", "wide_linear"}},
      {"dcn",
       {"cross.b0", "cross.out", "cross.w0", "deep", "mlp.b0", "mlp.b1",
        "mlp.b2", "mlp.w0", "mlp.w1", "mlp.w2", "wide", "wide.scale",
        "wide_linear"}},
      {"lr", {"wide", "wide_linear"}}};
  auto args = [&](const std::string& ckpt, const std::string& model) {
    std::vector<std::string> a = TrainArgs(ckpt);
    a.insert(a.end(), {"--model", model});
    if (model == "dcn") a.insert(a.end(), {"--cross_layers", "1"});
    return a;
  };
  for (const auto& [model, want] : tables) {
    SCOPED_TRACE(model);
    std::vector<std::string> a = args("ckpt-" + model, model);
    a.insert(a.end(), {"--cache_rows", "6000"});
    ASSERT_EQ(RunPsTrain(a), 0);
    const std::string summary =
        ReadAll(dir_.Sub("ckpt-" + model + "/summary.json"));
    const std::optional<double> auc = JsonNumber(summary, "auc");
    const std::optional<double> bayes = JsonNumber(summary, "bayes_auc");
    ASSERT_TRUE(auc.has_value() && bayes.has_value()) << summary;
    EXPECT_GT(*auc, 0.5 + 0.4 * (*bayes - 0.5)) << summary;
    const Rows rows = CheckpointRows(dir_.Sub("ckpt-" + model));
    std::vector<std::string> names;
    for (const auto& [table, keyed] : rows) names.push_back(table);
    EXPECT_EQ(names, want);
    EXPECT_GT(rows.at("wide").size(), 500u);

    std::vector<std::string> c = args("ckpt-" + model + "-nocache", model);
    c.insert(c.end(), {"--cache_rows", "0"});
    ASSERT_EQ(RunPsTrain(c), 0);
    const Rows uncached =
        CheckpointRows(dir_.Sub("ckpt-" + model + "-nocache"));
    ASSERT_EQ(uncached.size(), rows.size());
    for (const auto& [table, keyed] : rows) {
      // Row headers may differ (the cache counts its own writes); values
      // and optimizer state may not.
      ASSERT_EQ(keyed.size(), uncached.at(table).size()) << table;
      for (const auto& [key, bytes] : keyed) {
        int dim, state_size;
        ASSERT_OK(PeekRowShape(bytes, &dim, &state_size));
        std::vector<float> va(dim), sa(state_size), vc(dim), sc(state_size);
        RowHeader ha, hc;
        ASSERT_OK(DecodeRow(bytes, dim, state_size, &ha, absl::MakeSpan(va),
                            absl::MakeSpan(sa)));
        ASSERT_OK(DecodeRow(uncached.at(table).at(key), dim, state_size, &hc,
                            absl::MakeSpan(vc), absl::MakeSpan(sc)));
        ASSERT_EQ(va, vc) << table << " key " << key;
        ASSERT_EQ(sa, sc) << table << " key " << key;
      }
    }
  }
}

// The wide part defaults to FTRL-Proximal at its per-example scale (beta 1
// at batch 100): alpha 0.1 without l1/l2 and with field scales, alpha 0.2
// and lambda1 = lambda2 = 1 without them for the lr baseline; explicit
// flags win. Read back from the checkpoint's table specs.
TEST_F(TrainCliTest, WidePartDefaultsToFtrlProximalAtItsPerExampleScale) {
  std::vector<std::string> last_tables;
  optim::OptimizerSpec last_wide;
  auto wide_lr = [&](const std::string& ckpt,
                     std::vector<std::string> flags) -> float {
    std::vector<std::string> args = TrainArgs(ckpt);
    args.insert(args.end(), {"--max_steps", "2", "--cache_rows", "0"});
    args.insert(args.end(), flags.begin(), flags.end());
    EXPECT_EQ(RunPsTrain(args), 0);
    auto reader = ckpt::CheckpointReader::Open(dir_.Sub(ckpt));
    EXPECT_TRUE(reader.ok()) << reader.status();
    if (!reader.ok()) return -1;
    last_tables.clear();
    float lr = -1;
    for (const ckpt::TableInfo& t : (*reader)->tables()) {
      last_tables.push_back(t.spec.name);
      if (t.spec.name == "wide") {
        last_wide = t.spec.optimizer;
        lr = t.spec.optimizer.learning_rate;
      }
    }
    return lr;
  };
  auto has_scale = [&] {
    return std::find(last_tables.begin(), last_tables.end(), "wide.scale") !=
           last_tables.end();
  };
  // lr: alpha 0.2, lambda1 = lambda2 = 1, no scales.
  EXPECT_EQ(wide_lr("ckpt-lr", {"--model", "lr"}), 0.2f);
  EXPECT_EQ(last_wide.initial_accumulator, 1e-4f);  // (1 / 100)^2
  EXPECT_EQ(last_wide.l1, 0.01f);                   // 1 / 100
  EXPECT_EQ(last_wide.l2, 0.005f);                  // 1 / (2 * 100)
  EXPECT_EQ(last_wide.lr_power, -0.5f);
  EXPECT_EQ(last_wide.accumulator_decay, 1.0f);
  EXPECT_FALSE(has_scale());
  EXPECT_EQ(wide_lr("ckpt-lr2", {"--model", "lr", "--wide_lr", "0.3",
                                 "--wide_l2", "0", "--wide_field_scale"}),
            0.3f);
  EXPECT_EQ(last_wide.l2, 0.0f);
  EXPECT_TRUE(has_scale());
  // The others: alpha 0.1, no l1/l2, field scales.
  EXPECT_EQ(wide_lr("ckpt-wd", {}), 0.1f);
  EXPECT_EQ(last_wide.initial_accumulator, 1e-4f);
  EXPECT_EQ(last_wide.lr_power, -0.5f);
  EXPECT_EQ(last_wide.accumulator_decay, 1.0f);
  EXPECT_EQ(last_wide.l1, 0.0f);
  EXPECT_EQ(last_wide.l2, 0.0f);
  EXPECT_TRUE(has_scale());
  // The Newton step of earlier defaults, by flags.
  EXPECT_EQ(
      wide_lr("ckpt-ws", {"--wide_field_scale=false", "--wide_decay", "0.99",
                          "--wide_lr_power", "-1", "--wide_init_acc", "0.5",
                          "--wide_lr", "0.002"}),
      0.002f);
  EXPECT_EQ(last_wide.initial_accumulator, 0.5f);
  EXPECT_EQ(last_wide.lr_power, -1.0f);
  EXPECT_EQ(last_wide.accumulator_decay, 0.99f);
  EXPECT_FALSE(has_scale());
  // --min_count: 2 by default, 0 for lr, an explicit value wins.
  auto min_count = [&](const std::string& ckpt) {
    return JsonNumber(ReadAll(dir_.Sub(ckpt + "/summary.json")), "min_count");
  };
  EXPECT_EQ(min_count("ckpt-wd"), 2);
  EXPECT_EQ(min_count("ckpt-lr"), 0);
  EXPECT_EQ(wide_lr("ckpt-mc", {"--min_count", "0"}), 0.1f);
  EXPECT_EQ(min_count("ckpt-mc"), 0);
}

// The default model is deepfwfm: its pair weights are a table of the
// checkpoint, 325 of them at 0.1 learning at 0.01 (--pair_init, --pair_lr
// set them); new deep rows start in [-0.002, 0.002].
TEST_F(TrainCliTest, DefaultModelIsDeepFwFm) {
  std::vector<std::string> args = TrainArgs("ckpt-fwfm");
  args.insert(args.end(), {"--max_steps", "2", "--cache_rows", "0"});
  ASSERT_EQ(RunPsTrain(args), 0);
  auto reader = ckpt::CheckpointReader::Open(dir_.Sub("ckpt-fwfm"));
  ASSERT_TRUE(reader.ok()) << reader.status();
  bool found = false;
  for (const ckpt::TableInfo& t : (*reader)->tables()) {
    if (t.spec.name == "deep") {
      EXPECT_EQ(t.spec.initializer.a, -0.002f);
      EXPECT_EQ(t.spec.initializer.b, 0.002f);
    }
    if (t.spec.name != "fwfm.r") continue;
    found = true;
    EXPECT_EQ(t.spec.initializer.kind, InitKind::kConstant);
    EXPECT_EQ(t.spec.initializer.a, 0.1f);
    EXPECT_EQ(t.spec.optimizer.learning_rate, 0.01f);
  }
  EXPECT_TRUE(found);
  args = TrainArgs("ckpt-pairs");
  args.insert(args.end(), {"--max_steps", "2", "--cache_rows", "0", "--pair_lr",
                           "0.03", "--pair_init", "0.5"});
  ASSERT_EQ(RunPsTrain(args), 0);
  reader = ckpt::CheckpointReader::Open(dir_.Sub("ckpt-pairs"));
  ASSERT_TRUE(reader.ok()) << reader.status();
  found = false;
  for (const ckpt::TableInfo& t : (*reader)->tables()) {
    if (t.spec.name != "fwfm.r") continue;
    found = true;
    EXPECT_EQ(t.spec.initializer.a, 0.5f);
    EXPECT_EQ(t.spec.optimizer.learning_rate, 0.03f);
  }
  EXPECT_TRUE(found);
  std::string err;
  args = TrainArgs("ckpt-init");
  args.insert(args.end(), {"--deep_init", "0"});
  EXPECT_EQ(RunPsTrain(args, nullptr, &err), 2);
  EXPECT_THAT(err, ::testing::HasSubstr("deep_init"));
  EXPECT_FALSE(std::filesystem::exists(dir_.Sub("ckpt-init")));
}

TEST_F(TrainCliTest, RejectsBadModelFlags) {
  std::string err;
  std::vector<std::string> args = TrainArgs("ckpt-model");
  args.insert(args.end(), {"--model", "xgboost"});
  EXPECT_EQ(RunPsTrain(args, nullptr, &err), 2);
  EXPECT_THAT(err, ::testing::HasSubstr("unknown model 'xgboost'"));
  args = TrainArgs("ckpt-model");
  args.insert(args.end(), {"--model", "deepfm", "--cross_layers", "2"});
  EXPECT_EQ(RunPsTrain(args, nullptr, &err), 2);
  EXPECT_THAT(err, ::testing::HasSubstr("--cross_layers is for --model dcn"));
  args = TrainArgs("ckpt-model");
  args.insert(args.end(), {"--model", "dcn", "--cross_layers", "0"});
  EXPECT_EQ(RunPsTrain(args, nullptr, &err), 2);
  // The pair-weight flags belong to deepfwfm, and its rate must be > 0.
  for (const char* model : {"wide_deep", "deepfm", "dcn", "lr"}) {
    for (const char* flag : {"--pair_lr", "--pair_init"}) {
      args = TrainArgs("ckpt-model");
      args.insert(args.end(), {"--model", model, flag, "0.1"});
      EXPECT_EQ(RunPsTrain(args, nullptr, &err), 2) << model << " " << flag;
      EXPECT_THAT(err, ::testing::HasSubstr(
                           absl::StrCat(flag, " is for --model deepfwfm")));
    }
  }
  args = TrainArgs("ckpt-model");
  args.insert(args.end(), {"--pair_lr", "0"});
  EXPECT_EQ(RunPsTrain(args, nullptr, &err), 2);
  EXPECT_THAT(err, ::testing::HasSubstr("pair_lr"));
  // Nothing was created.
  EXPECT_FALSE(std::filesystem::exists(dir_.Sub("ckpt-model")));
  std::string out;
  args = TrainArgs("ckpt-model");
  args.insert(args.end(),
              {"--model", "dcn", "--cross_layers", "3", "--dry_run"});
  EXPECT_EQ(RunPsTrain(args, &out), 0);
  EXPECT_THAT(out, ::testing::HasSubstr("\n  model dcn (3 cross layers)\n"));
  EXPECT_FALSE(std::filesystem::exists(dir_.Sub("ckpt-model")));
  EXPECT_EQ(RunPsTrain({"--help"}, &out), 0);
  EXPECT_THAT(out,
              ::testing::HasSubstr("--model deepfwfm|wide_deep|deepfm|dcn|lr"));
  EXPECT_THAT(out, ::testing::HasSubstr("[--deep_init F]"));
  EXPECT_THAT(out, ::testing::HasSubstr("[--pair_lr F] [--pair_init F]"));
  EXPECT_THAT(out,
              ::testing::HasSubstr(
                  "[--wide_init_acc F] [--wide_lr_power F] [--wide_decay F]"));
  EXPECT_THAT(out, ::testing::HasSubstr(
                       "[--wide_field_scale[=false]] [--wide_scale_lr F]"));
}

// The built ps-train binary's stdout: each loss line is followed by seed
// 004's per-part line for the same step, and metrics.csv ends with their
// columns.
TEST_F(TrainCliTest, TheBinaryLogsTheLossAndThePerPartLossLines) {
  std::string cmd = ::psdb::testing::BuiltBinary("tools/ps-train");
  ASSERT_TRUE(std::filesystem::exists(cmd)) << cmd;
  for (const std::string& a : TrainArgs("ckpt-log")) {
    absl::StrAppend(&cmd, " '", a, "'");
  }
  absl::StrAppend(&cmd, " --max_steps 20");
  const ::psdb::testing::ShellResult run =
      ::psdb::testing::RunShell(cmd, /*merge_stderr=*/false);
  ASSERT_EQ(run.exit_code, 0) << run.output;
  for (int step : {10, 20}) {
    EXPECT_THAT(run.output,
                ::testing::ContainsRegex(absl::StrCat(
                    "\nepoch: 1 step: ", step, ", loss is 0\\.[0-9]{4}\n",
                    "epoch: 1 step: ", step,
                    ", wide_loss is 0\\.[0-9]+, deep_loss is 0\\.[0-9]+\n")))
        << run.output;
  }
  EXPECT_THAT(ReadAll(dir_.Sub("ckpt-log/metrics.csv")),
              ::testing::StartsWith("step,epoch,samples,train_loss,train_auc,"
                                    "eval_auc,eval_logloss,wide_loss,"
                                    "deep_loss,valid_auc,valid_logloss\n"
                                    "10,1,1000,"));
}

// The new user: the same data set gzip- and zstd-compressed (the
// test file as test.txt.zst) trains to exactly the rows the plain files do.
TEST_F(TrainCliTest, TrainsOnGzipAndZstdFilesExactlyAsOnPlainOnes) {
  const std::string packed = dir_.Sub("packed");
  std::filesystem::create_directories(packed);
  for (const char* name : {"train.txt-00000", "train.txt-00001"}) {
    testing::WriteBytes(packed + "/" + name + ".gz",
                        testing::GzipMember(ReadAll(data() + "/" + name)));
  }
  const std::string test = ReadAll(data() + "/test.txt");
  testing::WriteBytes(packed + "/test.txt.zst",
                      testing::ZstdFrame(test.substr(0, test.size() / 2)) +
                          testing::ZstdFrame(test.substr(test.size() / 2)));
  std::filesystem::copy_file(data() + "/meta.json", packed + "/meta.json");

  std::vector<std::string> plain = TrainArgs("ckpt-plain");
  plain.insert(plain.end(), {"--cache_rows", "0"});
  ASSERT_EQ(RunPsTrain(plain), 0);
  std::vector<std::string> compressed = TrainArgs("ckpt-packed");
  compressed[1] = packed;  // --data
  compressed.insert(compressed.end(), {"--cache_rows", "0"});
  ASSERT_EQ(RunPsTrain(compressed), 0);

  const std::string s_plain = ReadAll(dir_.Sub("ckpt-plain/summary.json"));
  const std::string s_packed = ReadAll(dir_.Sub("ckpt-packed/summary.json"));
  EXPECT_EQ(JsonNumber(s_packed, "samples"), 3000.0);
  EXPECT_EQ(JsonNumber(s_packed, "malformed_lines"), 0.0);
  ASSERT_TRUE(JsonNumber(s_plain, "auc").has_value()) << s_plain;
  EXPECT_EQ(JsonNumber(s_packed, "auc"), JsonNumber(s_plain, "auc"));
  const Rows rows_plain = CheckpointRows(dir_.Sub("ckpt-plain"));
  ASSERT_EQ(rows_plain.size(), 11u);
  EXPECT_TRUE(CheckpointRows(dir_.Sub("ckpt-packed")) == rows_plain);
}

TEST(TrainCliGenTest, KindsWriteTheirDataAndRejectOtherKindsFlags) {
  ScratchDir dir;
  std::string out, err;
  ASSERT_EQ(RunPsTrain({"gen", "--out", dir.Sub("lt"), "--kind=longtail",
                        "--train_rows", "2000", "--test_rows", "500",
                        "--singleton_rate", "0.5", "--max_vocab", "100"},
                       &out, &err),
            0)
      << err;
  EXPECT_THAT(out, ::testing::HasSubstr("ps-train gen: longtail data: wrote "
                                        "2000 train rows"));
  const std::string meta = ReadAll(dir.Sub("lt/meta.json"));
  EXPECT_THAT(meta, ::testing::HasSubstr("\"kind\": \"longtail\""));
  const std::optional<double> singletons = JsonNumber(meta, "singleton_values");
  ASSERT_TRUE(singletons.has_value());
  EXPECT_THAT(out, ::testing::HasSubstr(
                       absl::StrCat(static_cast<int64_t>(*singletons),
                                    " categorical values are singletons")));

  ASSERT_EQ(RunPsTrain({"gen", "--out", dir.Sub("pairs"), "--kind", "pairs",
                        "--train_rows", "2000", "--test_rows", "500",
                        "--interaction_pairs", "5", "--factor_dim", "2"},
                       &out, &err),
            0)
      << err;
  EXPECT_THAT(ReadAll(dir.Sub("pairs/meta.json")),
              ::testing::HasSubstr("\"kind\": \"pairs\""));

  for (const std::vector<std::string>& bad :
       std::vector<std::vector<std::string>>{
           {"--kind=zipf"},
           {"--kind=pairs", "--singleton_rate=0.1"},
           {"--kind=longtail", "--factor_dim=3"},
           {"--interaction_std=1"},
           {"--kind=pairs", "--interaction_pairs=400"}}) {
    std::vector<std::string> args = {"gen", "--out", dir.Sub("bad")};
    args.insert(args.end(), bad.begin(), bad.end());
    EXPECT_EQ(RunPsTrain(args, &out, &err), 2) << bad[0];
    EXPECT_FALSE(std::filesystem::exists(dir.Sub("bad"))) << bad[0];
  }
}

// The steps of the complete checkpoints under `root`, ascending.
std::vector<int64_t> CheckpointSteps(const std::string& root) {
  std::vector<int64_t> steps;
  absl::StatusOr<std::vector<CheckpointRef>> refs = ListCheckpoints(root);
  EXPECT_TRUE(refs.ok()) << refs.status();
  if (!refs.ok()) return steps;
  for (const CheckpointRef& ref : *refs) steps.push_back(ref.step);
  std::sort(steps.begin(), steps.end());
  return steps;
}

// --checkpoint_every_s: a checkpoint between steps once that long has
// passed since the last, beside --checkpoint_every's (TrainArgs: 20).
TEST_F(TrainCliTest, TimeBasedCheckpointsComeBetweenSteps) {
  // 1 us is due after every step (one step pulls, trains and pushes 100
  // examples: far longer), so steps 1..9 each write one and the last step
  // writes the final one.
  std::vector<std::string> a = TrainArgs("ckpt-us");
  a.insert(a.end(), {"--max_steps", "10", "--checkpoint_every_s", "0.000001",
                     "--keep_checkpoints", "100"});
  ASSERT_EQ(RunPsTrain(a), 0);
  EXPECT_EQ(CheckpointSteps(dir_.Sub("ckpt-us")),
            (std::vector<int64_t>{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}));

  // An hour never comes due here: --checkpoint_every 20's checkpoint and
  // the final one, as without the flag.
  std::vector<std::string> b = TrainArgs("ckpt-hour");
  b.insert(b.end(), {"--max_steps", "25", "--checkpoint_every_s", "3600",
                     "--keep_checkpoints", "100"});
  ASSERT_EQ(RunPsTrain(b), 0);
  EXPECT_EQ(CheckpointSteps(dir_.Sub("ckpt-hour")),
            (std::vector<int64_t>{20, 25}));

  // Refused: negative or not a number (usage errors), and with several
  // workers, whose ranks must checkpoint at the same step.
  std::string err;
  for (const auto& [bad, says] :
       std::vector<std::pair<std::string, std::string>>{
           {"-1",
            "--checkpoint_every_s must be seconds between time-based "
            "checkpoints, >= 0 (0 = off) and at most a year; got -1"},
           {"-0.5", "got -0.5"},
           {"soon", "--checkpoint_every_s='soon' is not a number"}}) {
    std::vector<std::string> c = TrainArgs("ckpt-bad");
    c.insert(c.end(), {"--checkpoint_every_s", bad});
    EXPECT_EQ(RunPsTrain(c, nullptr, &err), 2) << bad;
    EXPECT_THAT(err, ::testing::HasSubstr(says)) << bad;
  }
  std::vector<std::string> d = TrainArgs("ckpt-world");
  d.insert(d.end(), {"--world", "2", "--checkpoint_every_s", "1"});
  EXPECT_EQ(RunPsTrain(d, nullptr, &err), 1);
  EXPECT_THAT(err, ::testing::HasSubstr("need one worker"));
  EXPECT_TRUE(CheckpointSteps(dir_.Sub("ckpt-world")).empty());
  std::string help;
  EXPECT_EQ(RunPsTrain({"--help"}, &help), 0);
  EXPECT_THAT(help, ::testing::HasSubstr("--checkpoint_every_s S"));
}

TEST_F(TrainCliTest, RejectsBadStoresAndFlags) {
  std::string err;
  std::vector<std::string> args = TrainArgs("ckpt");
  args.insert(args.end(), {"--store", "bogus:x"});
  EXPECT_EQ(RunPsTrain(args, nullptr, &err), 2);
  EXPECT_THAT(err, ::testing::HasSubstr("--store must be local:DIR"));
  // SSP staleness only for async cluster workers.
  args = TrainArgs("ckpt");
  args.insert(args.end(), {"--staleness", "1"});
  EXPECT_EQ(RunPsTrain(args, nullptr, &err), 2);
  EXPECT_THAT(err, ::testing::HasSubstr("--staleness is SSP"));
  EXPECT_EQ(RunPsTrain({"--data", data()}, nullptr, &err), 2);
  EXPECT_THAT(err, ::testing::HasSubstr("--checkpoint_dir"));
  args = TrainArgs("ckpt");
  args.insert(args.end(), {"--bogus", "1"});
  EXPECT_EQ(RunPsTrain(args, nullptr, &err), 2);
  args = TrainArgs("ckpt");
  args.insert(args.end(), {"--mode", "sometimes"});
  EXPECT_EQ(RunPsTrain(args, nullptr, &err), 2);
  args = TrainArgs("ckpt");
  args.insert(args.end(), {"--cache_rows", "10"});
  EXPECT_EQ(RunPsTrain(args, nullptr, &err), 2);
  EXPECT_THAT(err, ::testing::HasSubstr("too small"));
  EXPECT_EQ(RunPsTrain({"gen"}, nullptr, &err), 2);
  EXPECT_EQ(RunPsTrain({"frobnicate"}, nullptr, &err), 2);
  // --cache_staleness: push_through only, with a cache, not negative.
  for (const auto& [flags, says] :
       std::vector<std::pair<std::vector<std::string>, std::string>>{
           {{"--cache_staleness", "2"}, "is for --cache_mode push_through"},
           {{"--cache_staleness", "2", "--cache_mode", "write_back"},
            "is for --cache_mode push_through"},
           {{"--cache_staleness", "2", "--cache_rows", "0"},
            "--cache_staleness needs a worker cache"},
           {{"--cache_staleness", "-1", "--cache_mode", "push_through"},
            "--cache_staleness"}}) {
    args = TrainArgs("ckpt");
    args.insert(args.end(), flags.begin(), flags.end());
    EXPECT_EQ(RunPsTrain(args, nullptr, &err), 2) << says;
    EXPECT_THAT(err, ::testing::HasSubstr(says));
  }
  // The generalization flags: listed by --help, ranges checked.
  std::string help;
  EXPECT_EQ(RunPsTrain({"--help"}, &help), 0);
  for (const char* flag :
       {"--valid_fraction", "--patience", "--eval_every", "--wide_l1",
        "--wide_l2", "--deep_l2", "--dropout", "--min_count"}) {
    EXPECT_THAT(help, ::testing::HasSubstr(flag));
  }
  for (const std::vector<std::string>& bad :
       std::vector<std::vector<std::string>>{{"--valid_fraction", "1"},
                                             {"--patience", "-1"},
                                             {"--deep_l2", "-0.1"},
                                             {"--dropout", "1"},
                                             {"--min_count", "-2"}}) {
    args = TrainArgs("ckpt");
    args.insert(args.end(), bad.begin(), bad.end());
    EXPECT_EQ(RunPsTrain(args, nullptr, &err), 2) << bad[0];
  }
}

// --dense / --dense_backend: refused, saying why, before anything opens.
TEST_F(TrainCliTest, RejectsBadDenseFlags) {
  std::string out, err;
  std::vector<std::string> args = TrainArgs("ckpt-dense");
  args.insert(args.end(), {"--dense", "mpi"});
  EXPECT_EQ(RunPsTrain(args, nullptr, &err), 2);
  EXPECT_THAT(
      err, ::testing::HasSubstr("--dense must be ps or allreduce, not 'mpi'"));
  // AllReduce forms its group through a scheduler, in sync mode.
  args = TrainArgs("ckpt-dense");
  args.insert(args.end(), {"--dense", "allreduce"});
  EXPECT_EQ(RunPsTrain(args, nullptr, &err), 2);
  EXPECT_THAT(err, ::testing::HasSubstr(
                       "--dense allreduce needs --store scheduler:HOST:PORT"));
  args = TrainArgs("ckpt-dense");
  args.insert(args.end(), {"--dense", "allreduce", "--store",
                           "scheduler:127.0.0.1:1", "--mode", "async"});
  EXPECT_EQ(RunPsTrain(args, nullptr, &err), 2);
  EXPECT_THAT(err, ::testing::HasSubstr("and --mode sync"));
  args = TrainArgs("ckpt-dense");
  args.insert(args.end(), {"--dense_backend", "mpi"});
  EXPECT_EQ(RunPsTrain(args, nullptr, &err), 2);
  EXPECT_THAT(err, ::testing::HasSubstr(
                       "--dense_backend must be gloo or nccl, not 'mpi'"));
  EXPECT_FALSE(std::filesystem::exists(dir_.Sub("ckpt-dense")));
  // The dry run tells which the default is.
  args = TrainArgs("ckpt-dense");
  args.insert(args.end(), {"--store", "scheduler:127.0.0.1:1", "--mode", "sync",
                           "--cache_rows", "0", "--dry_run"});
  EXPECT_EQ(RunPsTrain(args, &out, &err), 0) << err;
  EXPECT_THAT(out, ::testing::HasSubstr(
                       "dense weights: allreduce with 2+ workers, else ps "
                       "(default), backend gloo"));
  args = TrainArgs("ckpt-dense");
  args.insert(args.end(), {"--dense", "ps", "--dry_run"});
  EXPECT_EQ(RunPsTrain(args, &out, &err), 0) << err;
  EXPECT_THAT(out, ::testing::HasSubstr("dense weights: ps\n"));
}

// --dry_run: the settings a start would use, and nothing touched: no store,
// no checkpoint directory, no cluster joined (the scheduler address below
// has nobody listening; a join would fail after its timeout).
// The cache's rows in GPU memory train the same model as in host memory,
// bit for bit. Without a CUDA build or device, --cache_backend cuda is a
// clear error before anything is created.
TEST_F(TrainCliTest, CacheOnTheGpuTrainsTheSameRowsAsOnTheCpu) {
  std::vector<std::string> g = TrainArgs("ckpt-gpu");
  g.insert(g.end(), {"--cache_rows", "6000", "--cache_backend", "cuda"});
  std::string out, err;
  const int rc = RunPsTrain(g, &out, &err);
  if (rc != 0) {
    EXPECT_EQ(rc, 2);
    EXPECT_THAT(err, ::testing::HasSubstr("--cache_backend cuda: no CUDA"));
    EXPECT_FALSE(std::filesystem::exists(dir_.Sub("ckpt-gpu")));
    GTEST_SKIP() << "no CUDA backend or device: " << err.substr(0, 200);
  }
  std::vector<std::string> c = TrainArgs("ckpt-cpu");
  c.insert(c.end(), {"--cache_rows", "6000", "--cache_backend", "cpu"});
  ASSERT_EQ(RunPsTrain(c), 0);
  const Rows rows_g = CheckpointRows(dir_.Sub("ckpt-gpu"));
  ASSERT_EQ(rows_g.size(), 11u);
  EXPECT_GT(rows_g.at("deep").size(), 500u);
  EXPECT_TRUE(rows_g == CheckpointRows(dir_.Sub("ckpt-cpu")));
  EXPECT_EQ(JsonNumber(ReadAll(dir_.Sub("ckpt-gpu/summary.json")), "auc"),
            JsonNumber(ReadAll(dir_.Sub("ckpt-cpu/summary.json")), "auc"));
}

TEST_F(TrainCliTest, DryRunValidatesAndTouchesNothing) {
  setenv("PS_NODE_ID", "worker-3", 1);
  setenv("PS_ROLE", "worker", 1);
  std::string out, err;
  std::vector<std::string> args = TrainArgs("ckpt-dry");
  args.insert(args.end(), {"--store", "scheduler:127.0.0.1:1", "--mode",
                           "async", "--staleness", "2", "--dry_run"});
  EXPECT_EQ(RunPsTrain(args, &out, &err), 0) << err;
  EXPECT_THAT(out, ::testing::HasSubstr(
                       "ps-train --dry_run: async training of " + data()));
  EXPECT_THAT(out, ::testing::HasSubstr(
                       "store scheduler:127.0.0.1:1 as node id worker-3, rank "
                       "and world from the cluster map"));
  EXPECT_THAT(out, ::testing::HasSubstr("PS_* read: PS_NODE_ID=worker-3\n"));
  EXPECT_THAT(out, ::testing::HasSubstr(
                       "PS_* ignored (not read by ps-train): PS_ROLE=worker"));
  EXPECT_THAT(out, ::testing::EndsWith("ps-train --dry_run: ok\n"));
  EXPECT_FALSE(std::filesystem::exists(dir_.Sub("ckpt-dry")));

  // On the embedded store PS_NODE_ID is not read, and no store is opened.
  args = TrainArgs("ckpt-dry");
  args.push_back("--dry_run");
  EXPECT_EQ(RunPsTrain(args, &out, &err), 0) << err;
  EXPECT_THAT(out, ::testing::HasSubstr("store local:" + dir_.Sub("ckpt-dry") +
                                        "/store, rank 0 of 1"));
  EXPECT_THAT(out, ::testing::HasSubstr("PS_* read: none\n"));
  EXPECT_FALSE(std::filesystem::exists(dir_.Sub("ckpt-dry")));
  unsetenv("PS_NODE_ID");
  unsetenv("PS_ROLE");

  // A dry run fails as the start would, before anything is opened.
  args = TrainArgs("ckpt-dry");
  args.insert(args.end(), {"--cache_policy", "fifo", "--dry_run"});
  EXPECT_EQ(RunPsTrain(args, &out, &err), 2);
  EXPECT_THAT(err, ::testing::HasSubstr("--cache_policy must be lru, lfu or "
                                        "lookahead, not 'fifo'"));
  // With 2+ workers there is no cache unless --cache_rows asks for one,
  // which then pushes through; write-back is refused.
  args = TrainArgs("ckpt-dry");
  args.insert(args.end(), {"--store", "servers:127.0.0.1:1", "--rank", "1",
                           "--world", "2", "--dry_run"});
  EXPECT_EQ(RunPsTrain(args, &out, &err), 0) << err;
  EXPECT_THAT(out, ::testing::HasSubstr("batch 100, cache 0 rows\n"));
  // So a batch the default cache could not hold is no reason to refuse.
  args.insert(args.end() - 1, {"--batch_size", "6000"});
  EXPECT_EQ(RunPsTrain(args, &out, &err), 0) << err;
  EXPECT_THAT(out, ::testing::HasSubstr("batch 6000, cache 0 rows\n"));
  args = TrainArgs("ckpt-dry");
  args.insert(args.end(), {"--batch_size", "6000", "--dry_run"});
  EXPECT_EQ(RunPsTrain(args, &out, &err), 2);
  EXPECT_THAT(err, ::testing::HasSubstr(
                       "--cache_rows 262144 is too small for --batch_size "
                       "6000"));
  args = TrainArgs("ckpt-dry");
  args.insert(args.end(),
              {"--store", "servers:127.0.0.1:1", "--rank", "1", "--world", "2",
               "--cache_rows", "6000", "--dry_run"});
  EXPECT_EQ(RunPsTrain(args, &out, &err), 0) << err;
  EXPECT_THAT(out, ::testing::HasSubstr("cache 6000 rows (lru, push_through"));
  args.insert(args.end() - 1, {"--cache_mode", "write_back"});
  EXPECT_EQ(RunPsTrain(args, &out, &err), 2);
  EXPECT_THAT(err, ::testing::HasSubstr(
                       "--cache_mode write_back with 2 workers: each worker's "
                       "cache would write whole rows back over the other "
                       "workers' updates"));
  args = TrainArgs("ckpt-dry");
  args.insert(args.end(), {"--cache_backend", "gpu", "--dry_run"});
  EXPECT_EQ(RunPsTrain(args, &out, &err), 2);
  EXPECT_THAT(err, ::testing::HasSubstr(
                       "--cache_backend must be cpu or cuda, not 'gpu'"));
  args = TrainArgs("ckpt-dry");
  args.insert(args.end(), {"--rank", "2", "--world", "2", "--dry_run"});
  EXPECT_EQ(RunPsTrain(args, &out, &err), 2);
  EXPECT_THAT(err, ::testing::HasSubstr("--rank"));
  EXPECT_FALSE(std::filesystem::exists(dir_.Sub("ckpt-dry")));
}

}  // namespace
}  // namespace psdb::train
