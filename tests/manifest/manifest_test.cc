#include "manifest/manifest.h"

#include <filesystem>
#include <fstream>

#include "gtest/gtest.h"
#include "tests/testing/test_util.h"

namespace psdb {
namespace {

namespace fs = std::filesystem;
using ::psdb::testing::ScratchDir;

TableSpec FullSpec() {
  TableSpec s;
  s.name = "user.emb-1";
  s.dim = 8;
  s.initializer = {InitKind::kTruncatedNormal, 0.5f, 0.25f};
  s.optimizer.kind = optim::OptimizerKind::kFtrl;
  s.optimizer.learning_rate = 0.05f;
  s.optimizer.l1 = 0.001f;
  s.optimizer.l2 = 0.002f;
  s.optimizer.lr_power = -0.5f;
  s.optimizer.accumulator_decay = 0.99f;
  s.optimizer.nesterov = true;
  s.seed = 0xfedcba9876543210ULL;
  s.admission_threshold = 3;
  s.ttl_steps = 100;
  s.non_finite = NonFinitePolicy::kSkipRow;
  s.serving_default = MissingRowValue::kZeros;
  return s;
}

void WriteFile(const std::string& path, const std::string& text) {
  std::ofstream(path) << text;
}

TEST(ManifestTest, TableSpecProtoAndJsonRoundTrip) {
  const TableSpec s = FullSpec();
  const v1::TableSpec p = TableSpecToProto(s);
  EXPECT_EQ(p.initializer().kind(), "truncated_normal");
  EXPECT_EQ(p.optimizer().kind(), "ftrl");
  EXPECT_EQ(p.non_finite(), "skip_row");
  EXPECT_EQ(p.serving_default(), "zeros");
  ASSERT_OK_AND_ASSIGN(TableSpec back, TableSpecFromProto(p));
  EXPECT_TRUE(back == s);
  const std::string json = TableSpecToJson(s);
  EXPECT_NE(json.find("\"seed\""), std::string::npos);
  ASSERT_OK_AND_ASSIGN(TableSpec back2, TableSpecFromJson(json));
  EXPECT_TRUE(back2 == s);
  EXPECT_EQ(back2.seed, 0xfedcba9876543210ULL);
  for (InitKind k : {InitKind::kZeros, InitKind::kConstant, InitKind::kUniform,
                     InitKind::kNormal}) {
    TableSpec t = s;
    t.initializer.kind = k;
    ASSERT_OK_AND_ASSIGN(TableSpec u, TableSpecFromProto(TableSpecToProto(t)));
    EXPECT_TRUE(u == t);
  }
}

// Negative zeros are written as 0: protobuf prints -0.0 as "-0", which its
// own JSON parser reads back as the integer 0, so the text would change on
// every rewrite (found by manifest_fuzz).
TEST(ManifestTest, NegativeZeroIsWrittenAsZeroAndReadsBackTheSame) {
  TableSpec s = FullSpec();
  s.initializer = {InitKind::kUniform, -0.0f, 0.05f};
  s.optimizer.l1 = -0.0f;
  v1::Manifest m;
  *m.add_tables()->mutable_spec() = TableSpecToProto(s);
  const std::string json = ManifestToJson(m);
  EXPECT_EQ(json.find("-0,"), std::string::npos) << json;
  EXPECT_EQ(json.find("-0\n"), std::string::npos) << json;
  ASSERT_OK_AND_ASSIGN(v1::Manifest back, ManifestFromJson(json, "test"));
  EXPECT_EQ(ManifestToJson(back), json);
  ASSERT_OK_AND_ASSIGN(TableSpec spec,
                       TableSpecFromProto(back.tables(0).spec()));
  EXPECT_TRUE(spec == s);  // -0.0f == 0.0f
  const std::string line = TableSpecToJson(s);
  ASSERT_OK_AND_ASSIGN(TableSpec from_line, TableSpecFromJson(line));
  EXPECT_EQ(TableSpecToJson(from_line), line);
}

// Unset fields take the C++ defaults; set fields keep their value even when
// it is zero (proto3 optional: presence, not value, decides).
TEST(ManifestTest, UnsetFieldsTakeTheCppDefaults) {
  v1::TableSpec p;
  p.set_name("minimal");
  p.set_dim(3);
  ASSERT_OK_AND_ASSIGN(TableSpec minimal, TableSpecFromProto(p));
  TableSpec expected;
  expected.name = "minimal";
  expected.dim = 3;
  EXPECT_TRUE(minimal == expected);
  EXPECT_EQ(minimal.initializer.kind, InitKind::kUniform);
  EXPECT_EQ(minimal.optimizer.kind, optim::OptimizerKind::kSgd);
  EXPECT_EQ(minimal.optimizer.learning_rate, 0.01f);
  EXPECT_EQ(minimal.optimizer.momentum, 0.9f);
  EXPECT_EQ(minimal.optimizer.lr_power, -0.5f);
  EXPECT_EQ(minimal.optimizer.accumulator_decay, 1.0f);
  // The same from JSON naming only the name and the dim, and with empty
  // enum strings (proto3 JSON clients send "" for "not set").
  ASSERT_OK_AND_ASSIGN(TableSpec from_json,
                       TableSpecFromJson(R"({"name":"minimal","dim":3})"));
  EXPECT_TRUE(from_json == expected);
  p.mutable_initializer()->set_kind("");
  p.mutable_optimizer()->set_kind("");
  p.set_non_finite("");
  p.set_serving_default("");
  ASSERT_OK_AND_ASSIGN(TableSpec empty_strings, TableSpecFromProto(p));
  EXPECT_TRUE(empty_strings == expected);

  // Explicit zeros stay zeros, through the proto and through JSON.
  p.mutable_optimizer()->set_kind("momentum");
  p.mutable_optimizer()->set_momentum(0.0f);
  p.mutable_optimizer()->set_lr_power(0.0f);
  p.mutable_initializer()->set_a(0.0f);
  ASSERT_OK_AND_ASSIGN(TableSpec zeros, TableSpecFromProto(p));
  EXPECT_EQ(zeros.optimizer.kind, optim::OptimizerKind::kMomentum);
  EXPECT_EQ(zeros.optimizer.momentum, 0.0f);
  EXPECT_EQ(zeros.optimizer.lr_power, 0.0f);
  EXPECT_EQ(zeros.initializer.a, 0.0f);
  EXPECT_EQ(zeros.initializer.b, 0.05f);
  ASSERT_OK_AND_ASSIGN(TableSpec zeros_json,
                       TableSpecFromJson(TableSpecToJson(zeros)));
  EXPECT_TRUE(zeros_json == zeros);
}

TEST(ManifestTest, UnknownEnumNamesAreInvalid) {
  v1::TableSpec p = TableSpecToProto(FullSpec());
  p.mutable_optimizer()->set_kind("rmsprop");
  EXPECT_THAT(TableSpecFromProto(p),
              StatusIs(absl::StatusCode::kInvalidArgument));
  p = TableSpecToProto(FullSpec());
  p.mutable_initializer()->set_kind("glorot");
  EXPECT_THAT(TableSpecFromProto(p),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(TableSpecFromJson("{not json"),
              StatusIs(absl::StatusCode::kInvalidArgument));
}

TEST(ManifestTest, CheckpointIds) {
  EXPECT_EQ(CheckpointId(1200, 3), "ckpt-000000001200-000003");
  int64_t step;
  uint64_t seq;
  ASSERT_TRUE(ParseCheckpointId("ckpt-000000001200-000003", &step, &seq));
  EXPECT_EQ(step, 1200);
  EXPECT_EQ(seq, 3u);
  EXPECT_FALSE(ParseCheckpointId("ckpt-12", &step, &seq));
  EXPECT_FALSE(ParseCheckpointId("ckpt-1-2.tmp", &step, &seq));
  EXPECT_FALSE(ParseCheckpointId("other-1-2", &step, &seq));
  EXPECT_EQ(ShardDirName(4), "shard-4");
}

TEST(ManifestTest, WriteReadAtomic) {
  ScratchDir dir;
  v1::Manifest m;
  m.set_checkpoint_id("ckpt-000000000007-000001");
  m.set_step(7);
  auto* t = m.add_tables();
  *t->mutable_spec() = TableSpecToProto(FullSpec());
  t->set_step(7);
  t->add_shard_rows(42);
  t->set_rows(42);
  ASSERT_OK(WriteManifestAtomic(dir.path(), m));
  EXPECT_FALSE(fs::exists(dir.Sub("MANIFEST.json.tmp")));
  ASSERT_OK_AND_ASSIGN(v1::Manifest back, ReadManifest(dir.path()));
  EXPECT_EQ(back.format_version(), kManifestFormatVersion);
  EXPECT_EQ(back.step(), 7);
  ASSERT_EQ(back.tables_size(), 1);
  EXPECT_EQ(back.tables(0).rows(), 42u);
  ASSERT_OK_AND_ASSIGN(TableSpec spec,
                       TableSpecFromProto(back.tables(0).spec()));
  EXPECT_TRUE(spec == FullSpec());
}

TEST(ManifestTest, NewerVersionRefusedAndGarbageIsDataLoss) {
  ScratchDir dir;
  WriteFile(dir.Sub("MANIFEST.json"), R"({"formatVersion": 99, "step": "1"})");
  absl::StatusOr<v1::Manifest> m = ReadManifest(dir.path());
  EXPECT_THAT(m, StatusIs(absl::StatusCode::kFailedPrecondition));
  EXPECT_NE(std::string(m.status().message()).find("99"), std::string::npos);
  EXPECT_NE(std::string(m.status().message()).find("MANIFEST.json"),
            std::string::npos);
  WriteFile(dir.Sub("MANIFEST.json"), "{\"formatVersion\": ");
  m = ReadManifest(dir.path());
  EXPECT_THAT(m, StatusIs(absl::StatusCode::kDataLoss));
  EXPECT_NE(std::string(m.status().message()).find("MANIFEST.json"),
            std::string::npos);
  ScratchDir empty;
  EXPECT_THAT(ReadManifest(empty.path()),
              StatusIs(absl::StatusCode::kNotFound));
}

TEST(ManifestTest, ListingNewestFirstIgnoresIncomplete) {
  ScratchDir root;
  EXPECT_TRUE(ListCheckpoints(root.Sub("missing"))->empty());
  EXPECT_THAT(LatestCheckpoint(root.path()),
              StatusIs(absl::StatusCode::kNotFound));
  EXPECT_EQ(*NextCheckpointSeq(root.path()), 1u);
  v1::Manifest m;
  for (auto [step, seq] :
       {std::pair<int64_t, uint64_t>{50, 1}, {10, 2}, {30, 3}}) {
    const std::string d = root.Sub(CheckpointId(step, seq));
    fs::create_directories(d);
    ASSERT_OK(WriteManifestAtomic(d, m));
  }
  fs::create_directories(root.Sub(CheckpointId(40, 4)));  // incomplete
  fs::create_directories(root.Sub("unrelated"));
  ASSERT_OK_AND_ASSIGN(auto all, ListCheckpoints(root.path()));
  ASSERT_EQ(all.size(), 3u);
  EXPECT_EQ(all[0].seq, 3u);
  EXPECT_EQ(all[0].step, 30);
  EXPECT_EQ(all[1].seq, 2u);
  EXPECT_EQ(all[2].seq, 1u);
  EXPECT_EQ(all[0].path, root.Sub("ckpt-000000000030-000003"));
  ASSERT_OK_AND_ASSIGN(auto partial, ListIncompleteCheckpoints(root.path()));
  ASSERT_EQ(partial.size(), 1u);
  EXPECT_EQ(partial[0].seq, 4u);
  ASSERT_OK_AND_ASSIGN(CheckpointRef latest, LatestCheckpoint(root.path()));
  EXPECT_EQ(latest.id, "ckpt-000000000030-000003");
  EXPECT_EQ(*NextCheckpointSeq(root.path()), 5u);
  ASSERT_OK_AND_ASSIGN(std::string resolved, ResolveCheckpointDir(root.path()));
  EXPECT_EQ(resolved, latest.path);
  ASSERT_OK_AND_ASSIGN(resolved, ResolveCheckpointDir(all[2].path));
  EXPECT_EQ(resolved, all[2].path);
  EXPECT_THAT(ResolveCheckpointDir(root.Sub("unrelated")),
              StatusIs(absl::StatusCode::kNotFound));
}

}  // namespace
}  // namespace psdb
