// ps-dump's library (info / export / verify over a CheckpointReader) and
// its command line, on checkpoints written by hand (checkpoint_fixture.h)
// so every expected byte is known.
#include "tools/dump/dump.h"

#include <cstdio>
#include <fstream>
#include <functional>
#include <iterator>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "manifest/manifest.h"
#include "optim/optimizer.h"
#include "psdb/checkpoint_reader.h"
#include "psdb/store.h"
#include "shard/ring.h"
#include "store/row_codec.h"
#include "tests/checkpoint/checkpoint_fixture.h"
#include "tests/testing/child_process.h"
#include "tests/testing/test_util.h"
#include "tools/common/text.h"
#include "tools/dump/dump_cli.h"
#include "tools/dump/npy.h"

namespace psdb::dump {
namespace {

using ckpt::RowCheck;
using ckpt::Verify;
using ckpt::VerifyOptions;
using ckpt::VerifyReport;

using ::psdb::testing::FixtureTable;
using ::psdb::testing::MakeRow;
using ::psdb::testing::ScratchDir;
using ::testing::ContainsRegex;
using ::testing::HasSubstr;

TableSpec AdagradSpec(const std::string& name, int dim) {
  TableSpec spec;
  spec.name = name;
  spec.dim = dim;
  spec.optimizer.kind = optim::OptimizerKind::kAdagrad;
  return spec;
}

FixtureTable Table(const TableSpec& spec, const std::vector<uint64_t>& keys,
                   int64_t step) {
  FixtureTable t;
  t.spec = spec;
  t.step = step;
  const int state = optim::StateSize(spec.optimizer, spec.dim);
  for (uint64_t k : keys) t.rows[k] = MakeRow(k, spec.dim, state);
  return t;
}

std::string ReadFile(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(f), {});
}

struct CliResult {
  int code;
  std::string out;
  std::string err;
};

CliResult Cli(std::vector<std::string> words) {
  words.insert(words.begin(), "ps-dump");
  std::vector<const char*> argv;
  for (const std::string& w : words) argv.push_back(w.c_str());
  std::ostringstream out, err;
  const int code =
      RunDump(static_cast<int>(argv.size()), argv.data(), out, err);
  return {code, out.str(), err.str()};
}

class DumpTest : public ::testing::Test {
 protected:
  // One shard: "emb" (dim 2, Adagrad) with keys 1, 2, 300 and "wide"
  // (dim 1, SGD) with key 7, under a root holding one checkpoint.
  void SetUp() override {
    ckpt_ = dir_.Sub("root/ckpt-000000000007-000001");
    TableSpec wide;
    wide.name = "wide";
    wide.dim = 1;
    ASSERT_OK(testing::WriteCheckpoint(
        ckpt_,
        {Table(AdagradSpec("emb", 2), {300, 1, 2}, 7), Table(wide, {7}, 5)},
        /*shards=*/1, /*step=*/7));
  }
  ScratchDir dir_;
  std::string ckpt_;
};

TEST_F(DumpTest, OpensACheckpointOrTheNewestUnderARoot) {
  ASSERT_OK_AND_ASSIGN(auto by_dir, CheckpointReader::Open(ckpt_));
  EXPECT_EQ(by_dir->dir(), ckpt_);
  ASSERT_OK_AND_ASSIGN(auto by_root, CheckpointReader::Open(dir_.Sub("root")));
  EXPECT_EQ(by_root->dir(), ckpt_);
  ASSERT_EQ(by_root->tables().size(), 2u);
  EXPECT_EQ(by_root->tables()[0].spec.name, "emb");
  EXPECT_EQ(by_root->tables()[0].state_size, 2);
  EXPECT_EQ(by_root->tables()[0].rows, 3u);
  ASSERT_EQ(by_root->shards().size(), 1u);
  EXPECT_THAT(CheckpointReader::Open(dir_.Sub("nothing-here")),
              StatusIs(absl::StatusCode::kNotFound));
}

TEST_F(DumpTest, InfoListsTablesSpecsRowsAndBytes) {
  ASSERT_OK_AND_ASSIGN(auto reader, CheckpointReader::Open(ckpt_));
  std::ostringstream out;
  PrintInfo(*reader, out);
  const std::string s = out.str();
  EXPECT_THAT(s, HasSubstr("checkpoint  " + ckpt_ + "\n"));
  EXPECT_THAT(s, HasSubstr("step        7\n"));
  EXPECT_THAT(s, HasSubstr("created     2023-11-14 22:13:20 UTC\n"));
  EXPECT_THAT(s, HasSubstr("shards      1 (shard-0)\n"));
  EXPECT_THAT(s, HasSubstr("tables      2\n"));
  EXPECT_THAT(s,
              ContainsRegex("table +dim +optimizer +state +initializer +seed "
                            "+step +rows +bytes"));
  EXPECT_THAT(s,
              ContainsRegex("emb +2 +adagrad\\(lr=0.01\\) +2 +"
                            "uniform\\(-0.05,0.05\\) +0 +7 +3 +[1-9][0-9]*\n"));
  EXPECT_THAT(s,
              ContainsRegex("wide +1 +sgd\\(lr=0.01\\) +0 +"
                            "uniform\\(-0.05,0.05\\) +0 +5 +1 +[1-9][0-9]*\n"));
  // One shard: no balance section.
  EXPECT_THAT(s, ::testing::Not(HasSubstr("rows per shard")));
}

TEST_F(DumpTest, ExportTsvInKeyOrder) {
  ASSERT_OK_AND_ASSIGN(auto reader, CheckpointReader::Open(ckpt_));
  ExportOptions options;
  options.table = "emb";
  std::ostringstream out;
  ASSERT_OK_AND_ASSIGN(ExportResult r, Export(*reader, options, out));
  EXPECT_EQ(r.rows, 3u);
  EXPECT_EQ(out.str(),
            "key\tv0\tv1\n"
            "1\t1\t1.25\n"
            "2\t2\t2.25\n"
            "300\t300\t300.25\n");

  options.with_state = true;
  options.limit = 1;
  std::ostringstream with_state;
  ASSERT_OK(Export(*reader, options, with_state));
  EXPECT_EQ(with_state.str(),
            "key\tv0\tv1\ts0\ts1\tlast_update_step\tupdate_count\tfrequency\n"
            "1\t1\t1.25\t0.5\t1.5\t1\t2\t3\n");
}

TEST_F(DumpTest, ExportJsonlSelectedKeysToAFile) {
  ASSERT_OK_AND_ASSIGN(auto reader, CheckpointReader::Open(ckpt_));
  ExportOptions options;
  options.table = "emb";
  options.format = ExportFormat::kJsonl;
  options.keys = std::vector<uint64_t>{300, 2, 300};
  options.with_state = true;
  options.out = dir_.Sub("out.jsonl");
  std::ostringstream unused;
  ASSERT_OK_AND_ASSIGN(ExportResult r, Export(*reader, options, unused));
  EXPECT_EQ(r.rows, 2u);
  EXPECT_EQ(unused.str(), "");
  EXPECT_EQ(ReadFile(options.out),
            "{\"key\":2,\"values\":[2,2.25],\"state\":[0.5,1.5],"
            "\"last_update_step\":2,\"update_count\":4,\"frequency\":3}\n"
            "{\"key\":300,\"values\":[300,300.25],\"state\":[0.5,1.5],"
            "\"last_update_step\":300,\"update_count\":600,\"frequency\":3}\n");

  options.keys = std::vector<uint64_t>{2, 3};
  absl::StatusOr<ExportResult> missing = Export(*reader, options, unused);
  EXPECT_THAT(missing, StatusIs(absl::StatusCode::kNotFound));
  EXPECT_THAT(std::string(missing.status().message()),
              HasSubstr("table 'emb' has no key 3"));
  options.table = "nope";
  EXPECT_THAT(Export(*reader, options, unused),
              StatusIs(absl::StatusCode::kNotFound));
}

TEST_F(DumpTest, ExportNpyWritesExactFiles) {
  ASSERT_OK_AND_ASSIGN(auto reader, CheckpointReader::Open(ckpt_));
  ExportOptions options;
  options.table = "emb";
  options.format = ExportFormat::kNpy;
  options.out = dir_.Sub("emb.npy");  // the ".npy" is dropped
  std::ostringstream unused;
  ASSERT_OK_AND_ASSIGN(ExportResult r, Export(*reader, options, unused));
  ASSERT_EQ(r.files.size(), 2u);
  EXPECT_EQ(r.files[0], dir_.Sub("emb_keys.npy"));
  EXPECT_EQ(r.files[1], dir_.Sub("emb_values.npy"));

  std::string keys = NpyPreamble("<u8", 3, 0);
  for (uint64_t k : {1ull, 2ull, 300ull}) {
    keys.append(reinterpret_cast<const char*>(&k), 8);
  }
  EXPECT_EQ(ReadFile(r.files[0]), keys);
  std::string values = NpyPreamble("<f4", 3, 2);
  for (float v : {1.0f, 1.25f, 2.0f, 2.25f, 300.0f, 300.25f}) {
    values.append(reinterpret_cast<const char*>(&v), 4);
  }
  EXPECT_EQ(ReadFile(r.files[1]), values);

  options.with_state = true;
  ASSERT_OK_AND_ASSIGN(r, Export(*reader, options, unused));
  ASSERT_EQ(r.files.size(), 6u);
  std::string counts = NpyPreamble("<u8", 3, 0);
  for (uint64_t c : {2ull, 4ull, 600ull}) {
    counts.append(reinterpret_cast<const char*>(&c), 8);
  }
  EXPECT_EQ(ReadFile(dir_.Sub("emb_update_count.npy")), counts);

  options.out.clear();
  EXPECT_THAT(Export(*reader, options, unused),
              StatusIs(absl::StatusCode::kInvalidArgument));
}

TEST_F(DumpTest, VerifyPassesOnAGoodCheckpoint) {
  ASSERT_OK_AND_ASSIGN(auto reader, CheckpointReader::Open(ckpt_));
  ASSERT_OK_AND_ASSIGN(VerifyReport report, Verify(*reader));
  EXPECT_TRUE(report.ok()) << absl::StrJoin(report.errors, "\n");
  EXPECT_EQ(report.tables, 2u);
  EXPECT_EQ(report.rows, 4u);
}

// A RowCheck (the hook the ring-ownership check will use) sees every row
// and its failures become errors naming shard, table and key.
class RejectKey : public RowCheck {
 public:
  explicit RejectKey(uint64_t key) : key_(key) {}
  absl::Status Check(const CheckpointReader&, const TableInfo&, size_t,
                     uint64_t key) override {
    ++calls;
    if (key == key_) return absl::FailedPreconditionError("not owned");
    return absl::OkStatus();
  }
  int calls = 0;

 private:
  uint64_t key_;
};

TEST_F(DumpTest, VerifyRunsRowChecks) {
  ASSERT_OK_AND_ASSIGN(auto reader, CheckpointReader::Open(ckpt_));
  RejectKey check(2);
  VerifyOptions options;
  options.checks.push_back(&check);
  ASSERT_OK_AND_ASSIGN(VerifyReport report, Verify(*reader, options));
  EXPECT_EQ(check.calls, 4);
  ASSERT_EQ(report.error_count, 1u);
  EXPECT_EQ(report.errors[0], absl::StrCat(ckpt_,
                                           "/shard-0: table 'emb' key 2: "
                                           "not owned"));
}

TEST(DumpVerifyTest, ReportsCorruptRowsAndCountMismatches) {
  ScratchDir dir;
  const std::string ckpt = dir.Sub("ckpt");
  std::string short_row = "\x01garbage";
  std::string wrong_dim;
  EncodeRow(RowHeader{}, std::vector<float>{1, 2, 3},
            std::vector<float>{1, 2, 3}, &wrong_dim);
  ASSERT_OK(testing::WriteCheckpoint(
      ckpt, {Table(AdagradSpec("emb", 2), {1, 2, 3, 4}, 1)}, 2, 1,
      {{{"emb", 3}, short_row}, {{"emb", 4}, wrong_dim}}));
  ASSERT_OK_AND_ASSIGN(auto reader, CheckpointReader::Open(ckpt));
  ASSERT_OK_AND_ASSIGN(VerifyReport report, Verify(*reader));
  EXPECT_EQ(report.rows, 4u);
  ASSERT_EQ(report.error_count, 2u);
  // Shard 0 holds 2 and 4, shard 1 holds 1 and 3.
  EXPECT_THAT(report.errors[0],
              HasSubstr(ckpt + "/shard-0: table 'emb' key 4"));
  EXPECT_THAT(report.errors[1],
              HasSubstr(ckpt + "/shard-1: table 'emb' key 3"));

  // The CLI prints them and exits 1.
  CliResult r = Cli({"verify", ckpt});
  EXPECT_EQ(r.code, 1);
  EXPECT_THAT(r.out, HasSubstr("FAILED: "));
  EXPECT_THAT(r.out,
              HasSubstr("error: " + ckpt + "/shard-1: table 'emb' key 3"));
}

TEST(DumpVerifyTest, ReportsRowCountsThatDisagreeWithTheManifest) {
  ScratchDir dir;
  const std::string ckpt = dir.Sub("ckpt");
  ASSERT_OK(testing::WriteCheckpoint(
      ckpt, {Table(AdagradSpec("emb", 2), {1, 2}, 1)}, 1, 1));
  // Rewrite the manifest claiming 5 rows.
  ASSERT_OK_AND_ASSIGN(v1::Manifest m, ReadManifest(ckpt));
  m.mutable_tables(0)->set_shard_rows(0, 5);
  m.mutable_tables(0)->set_rows(5);
  ASSERT_OK(WriteManifestAtomic(ckpt, m));
  ASSERT_OK_AND_ASSIGN(auto reader, CheckpointReader::Open(ckpt));
  ASSERT_OK_AND_ASSIGN(VerifyReport report, Verify(*reader));
  ASSERT_EQ(report.error_count, 1u);
  EXPECT_EQ(report.errors[0],
            ckpt + "/shard-0: table 'emb': 2 rows, manifest says 5");
}

// A manifest that omits a table the shards hold, or lists one they do not,
// fails verify naming the table and both files, once per shard; the CLI
// and the binary exit 1. (Before, an omitted table passed with exit 0.)
TEST(DumpVerifyTest, ReportsTablesTheManifestOmitsOrInvents) {
  ScratchDir dir;
  TableSpec wide;
  wide.name = "wide";
  wide.dim = 1;
  const std::vector<FixtureTable> tables = {
      Table(AdagradSpec("emb", 2), {1, 2, 3}, 1), Table(wide, {7}, 1)};
  const std::string bin = testing::BuiltBinary("tools/ps-dump");
  struct Case {
    std::string name;
    std::function<void(v1::Manifest*)> edit;
    std::string problem;
    uint64_t rows;  // rows of the manifest's tables, all read and checked
  };
  const std::vector<Case> cases = {
      {"omitted", [](v1::Manifest* m) { m->mutable_tables()->RemoveLast(); },
       "table 'wide' is in the shard's files but not in the manifest", 3},
      {"invented",
       [](v1::Manifest* m) {
         v1::TableManifest* t = m->add_tables();
         *t = m->tables(1);
         t->mutable_spec()->set_name("ghost");
         t->set_shard_rows(0, 0);
         t->set_shard_rows(1, 0);
         t->set_rows(0);
       },
       "table 'ghost' is in the manifest but not in the shard's files", 4},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    const std::string ckpt = dir.Sub(c.name);
    ASSERT_OK(testing::WriteCheckpoint(ckpt, tables, 2, 1));
    ASSERT_OK_AND_ASSIGN(v1::Manifest m, ReadManifest(ckpt));
    c.edit(&m);
    ASSERT_OK(WriteManifestAtomic(ckpt, m));
    ASSERT_OK_AND_ASSIGN(auto reader, CheckpointReader::Open(ckpt));
    ASSERT_OK_AND_ASSIGN(VerifyReport report, Verify(*reader));
    ASSERT_EQ(report.error_count, 2u);
    for (int s = 0; s < 2; ++s) {
      EXPECT_EQ(report.errors[s],
                absl::StrCat(ckpt, "/shard-", s, ": ", c.problem, " (", ckpt,
                             "/MANIFEST.json)"));
    }
    EXPECT_EQ(report.rows, c.rows);

    CliResult r = Cli({"verify", ckpt});
    EXPECT_EQ(r.code, 1);
    EXPECT_THAT(r.out, HasSubstr(absl::StrCat("error: ", ckpt,
                                              "/shard-1: ", c.problem)));
    EXPECT_THAT(r.out, HasSubstr("FAILED: "));
    EXPECT_EQ(
        testing::RunShell(bin + " verify " + ckpt + " >/dev/null").exit_code,
        1);
  }
}

TEST(DumpShardsTest, ExportMergesShardsAndInfoShowsBalance) {
  ScratchDir dir;
  const std::string ckpt = dir.Sub("ckpt");
  ASSERT_OK(testing::WriteCheckpoint(
      ckpt, {Table(AdagradSpec("emb", 1), {10, 9, 8, 7, 6, 5, 4, 3, 2, 1}, 4)},
      /*shards=*/3, 4));
  ASSERT_OK_AND_ASSIGN(auto reader, CheckpointReader::Open(ckpt));
  ExportOptions options;
  options.table = "emb";
  std::ostringstream out;
  ASSERT_OK(Export(*reader, options, out));
  EXPECT_EQ(out.str(),
            "key\tv0\n1\t1\n2\t2\n3\t3\n4\t4\n5\t5\n6\t6\n7\t7\n8\t8\n9\t9\n"
            "10\t10\n");

  std::ostringstream info;
  PrintInfo(*reader, info);
  EXPECT_THAT(info.str(),
              HasSubstr("shards      3 (shard-0, shard-1, shard-2)"));
  // Shard 0: 3, 6, 9; shard 1: 1, 4, 7, 10; shard 2: 2, 5, 8.
  EXPECT_THAT(info.str(),
              ContainsRegex("table +shard-0 +shard-1 +shard-2 +max/mean\n"
                            "emb +3 +4 +3 +1.200\n"));
  ASSERT_OK_AND_ASSIGN(VerifyReport report, Verify(*reader));
  EXPECT_TRUE(report.ok()) << absl::StrJoin(report.errors, "\n");
}

TEST_F(DumpTest, CliUsageErrorsExit2) {
  EXPECT_EQ(Cli({}).code, 2);
  EXPECT_EQ(Cli({"frobnicate", ckpt_}).code, 2);
  EXPECT_EQ(Cli({"info"}).code, 2);
  EXPECT_EQ(Cli({"info", ckpt_, ckpt_}).code, 2);
  EXPECT_EQ(Cli({"info", "--table=emb", ckpt_}).code, 2);
  CliResult no_table = Cli({"export", ckpt_});
  EXPECT_EQ(no_table.code, 2);
  EXPECT_THAT(no_table.err, HasSubstr("export needs --table=NAME"));
  EXPECT_THAT(no_table.err, HasSubstr("usage: ps-dump"));
  EXPECT_EQ(Cli({"export", "--table=emb", "--format=csv", ckpt_}).code, 2);
  EXPECT_EQ(Cli({"export", "--table=emb", "--format=npy", ckpt_}).code, 2);
  EXPECT_EQ(Cli({"export", "--table=emb", "--limit=-1", ckpt_}).code, 2);
  EXPECT_EQ(Cli({"export", "--table=emb", "--keys=a", ckpt_}).code, 2);
  EXPECT_EQ(Cli({"export", "--table=emb", "--limit"}).code, 2);
  EXPECT_EQ(Cli({"help"}).code, 0);
}

TEST_F(DumpTest, CliRuntimeErrorsExit1) {
  CliResult r = Cli({"info", dir_.Sub("missing")});
  EXPECT_EQ(r.code, 1);
  EXPECT_THAT(r.err, HasSubstr("no checkpoint at " + dir_.Sub("missing")));
  r = Cli({"export", "--table=nope", ckpt_});
  EXPECT_EQ(r.code, 1);
  EXPECT_THAT(r.err, HasSubstr("no table 'nope'"));
  EXPECT_THAT(r.err, HasSubstr("tables: emb, wide"));
}

TEST_F(DumpTest, CliExportAndVerify) {
  CliResult r = Cli({"export", "--table", "emb", "--format=jsonl", "--limit=2",
                     dir_.Sub("root")});
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(
      r.out,
      "{\"key\":1,\"values\":[1,1.25]}\n{\"key\":2,\"values\":[2,2.25]}\n");
  EXPECT_THAT(r.err, HasSubstr("exported 2 rows of table 'emb'"));
  r = Cli({"verify", ckpt_});
  EXPECT_EQ(r.code, 0);
  EXPECT_EQ(r.out, "OK: " + ckpt_ +
                       ": 2 tables, 4 rows in 1 shards checked, 0 errors\n");
}

TEST_F(DumpTest, CliReshard) {
  const std::string out = dir_.Sub("resharded");
  CliResult r = Cli({"reshard", "--servers=2", "--out=" + out, ckpt_});
  ASSERT_EQ(r.code, 0) << r.err;
  // Keys 1, 2, 300 (emb) and 7 (wide) on the ring of servers 0 and 1.
  std::vector<RingMember> members = {{0, 1.0f}, {1, 1.0f}};
  ASSERT_OK_AND_ASSIGN(Ring ring, Ring::Create(RingOptions(), members));
  uint64_t rows[2] = {0, 0};
  for (uint64_t key : {1, 2, 300, 7}) ++rows[ring.OwnerIndex(key)];
  EXPECT_EQ(r.out, absl::StrCat("ps-dump: resharded 4 rows of 1 shards into "
                                "2 shards at ",
                                out, "; rows per shard: ", rows[0], " ",
                                rows[1], "\n"));
  r = Cli({"verify", out});
  EXPECT_EQ(r.code, 0) << r.out;
  for (const std::string table : {"emb", "wide"}) {
    const std::string a = dir_.Sub("a-" + table + ".tsv");
    const std::string b = dir_.Sub("b-" + table + ".tsv");
    ASSERT_EQ(
        Cli({"export", "--table=" + table, "--with-state", "--out=" + a, ckpt_})
            .code,
        0);
    ASSERT_EQ(
        Cli({"export", "--table=" + table, "--with-state", "--out=" + b, out})
            .code,
        0);
    EXPECT_EQ(ReadFile(a), ReadFile(b));
  }
  // Usage errors exit 2, an existing output 1.
  EXPECT_EQ(Cli({"reshard", "--servers=0", "--out=" + out + "2", ckpt_}).code,
            2);
  EXPECT_EQ(Cli({"reshard", "--out=" + out + "2", ckpt_}).code, 2);
  EXPECT_EQ(Cli({"reshard", "--servers=2", ckpt_}).code, 2);
  EXPECT_EQ(
      Cli({"reshard", "--servers=2", "--out=" + out, "--batch_rows=0", ckpt_})
          .code,
      2);
  r = Cli({"reshard", "--servers=3", "--out=" + out, ckpt_});
  EXPECT_EQ(r.code, 1);
  EXPECT_THAT(r.err, HasSubstr("exists and is not an empty directory"));
}

// The real binary, as a separate process.
TEST_F(DumpTest, BinaryRuns) {
  const std::string bin = testing::BuiltBinary("tools/ps-dump");
  auto [code, out] =
      testing::RunShell(bin + " info " + ckpt_, /*merge_stderr=*/false);
  EXPECT_EQ(code, 0);
  EXPECT_THAT(out, ContainsRegex("emb +2 +adagrad"));
  EXPECT_EQ(testing::RunShell(bin + " export " + ckpt_ + " 2>/dev/null",
                              /*merge_stderr=*/false)
                .exit_code,
            2);
  EXPECT_EQ(
      testing::RunShell(bin + " 2>/dev/null", /*merge_stderr=*/false).exit_code,
      2);
}

// RocksDB's own ldb reads the checkpoint: the column families are the
// tables, and a row fetched by its big-endian key decodes to the row.
TEST_F(DumpTest, RocksDbLdbReadsTheCheckpoint) {
  const std::string ldb = "/usr/bin/ldb";
  if (testing::RunShell("test -x " + ldb, /*merge_stderr=*/false).exit_code !=
      0) {
    GTEST_SKIP() << ldb << " not installed (Debian package rocksdb-tools)";
  }
  const std::string shard = ckpt_ + "/shard-0";
  auto [code, cfs] = testing::RunShell(
      ldb + " list_column_families --db=" + shard, /*merge_stderr=*/false);
  ASSERT_EQ(code, 0) << cfs;
  EXPECT_THAT(cfs, HasSubstr("{default, emb, wide}"));

  // Key 300 = 0x000000000000012C big-endian.
  auto [get_code, hex] = testing::RunShell(
      ldb + " get --db=" + shard +
          " --column_family=emb --key_hex --value_hex 0x000000000000012C",
      /*merge_stderr=*/false);
  ASSERT_EQ(get_code, 0) << hex;
  ASSERT_EQ(hex.substr(0, 2), "0x");
  std::string bytes;
  for (size_t i = 2; i + 1 < hex.size() && hex[i] != '\n'; i += 2) {
    bytes.push_back(
        static_cast<char>(std::stoi(hex.substr(i, 2), nullptr, 16)));
  }
  RowHeader header;
  float values[2], state[2];
  ASSERT_OK(DecodeRow(bytes, 2, 2, &header, absl::MakeSpan(values),
                      absl::MakeSpan(state)));
  const testing::FixtureRow expected = MakeRow(300, 2, 2);
  EXPECT_EQ(header, expected.header);
  EXPECT_EQ(values[0], expected.values[0]);
  EXPECT_EQ(values[1], expected.values[1]);
  EXPECT_EQ(state[1], expected.state[1]);
}

}  // namespace
}  // namespace psdb::dump

namespace psdb::dump {
namespace {

using ckpt::Verify;
using ckpt::VerifyReport;

// A checkpoint written by the real Store: ldb reads a row by its big-endian
// key and the bytes decode to exactly the row the store returned;
// ps-dump's export returns the same rows in key order and verify passes.
TEST(DumpStoreTest, StoreCheckpointReadByLdbAndPsDump) {
  testing::ScratchDir dir;
  TableSpec spec = AdagradSpec("emb", 4);
  std::vector<uint64_t> keys = {0x0102030405060708ull, 5, 77};
  RowBatch rows;
  {
    ASSERT_OK_AND_ASSIGN(auto store, Store::Open({}, dir.Sub("store")));
    ASSERT_OK(store->CreateTable(spec));
    std::vector<float> grads(keys.size() * 4, 0.25f);
    ASSERT_OK(store->Push("emb", keys, grads));
    ASSERT_OK(store->PullRows("emb", keys, &rows));
    ASSERT_OK(store->Checkpoint(dir.Sub("ckpt")));
  }
  ASSERT_OK_AND_ASSIGN(auto reader, CheckpointReader::Open(dir.Sub("ckpt")));
  ASSERT_OK_AND_ASSIGN(VerifyReport report, Verify(*reader));
  EXPECT_TRUE(report.ok()) << absl::StrJoin(report.errors, "\n");
  EXPECT_EQ(report.rows, 3u);

  // Export, with state, in key order: 5, 77, 0x0102030405060708.
  ExportOptions options;
  options.table = "emb";
  options.format = ExportFormat::kJsonl;
  options.with_state = true;
  std::ostringstream out;
  ASSERT_OK(Export(*reader, options, out));
  std::string expected;
  for (size_t i : {1, 2, 0}) {
    expected += absl::StrCat("{\"key\":", keys[i], ",\"values\":[");
    for (int j = 0; j < 4; ++j) {
      if (j > 0) expected += ",";
      tools::AppendFloat(rows.values[i * 4 + j], true, &expected);
    }
    expected += "],\"state\":[";
    for (int j = 0; j < 4; ++j) {
      if (j > 0) expected += ",";
      tools::AppendFloat(rows.state[i * 4 + j], true, &expected);
    }
    expected += absl::StrCat(
        "],\"last_update_step\":", rows.headers[i].last_update_step,
        ",\"update_count\":", rows.headers[i].update_count,
        ",\"frequency\":", rows.headers[i].frequency, "}\n");
  }
  EXPECT_EQ(out.str(), expected);

  const std::string ldb = "/usr/bin/ldb";
  if (testing::RunShell("test -x " + ldb, /*merge_stderr=*/false).exit_code !=
      0) {
    GTEST_SKIP() << ldb << " not installed (Debian package rocksdb-tools)";
  }
  const std::string shard = reader->shards()[0].path;
  auto [code, cfs] = testing::RunShell(
      ldb + " list_column_families --db=" + shard, /*merge_stderr=*/false);
  ASSERT_EQ(code, 0) << cfs;
  EXPECT_THAT(cfs, HasSubstr("emb"));
  auto [get_code, hex] = testing::RunShell(
      ldb + " get --db=" + shard +
          " --column_family=emb --key_hex --value_hex 0x0102030405060708",
      /*merge_stderr=*/false);
  ASSERT_EQ(get_code, 0) << hex;
  ASSERT_EQ(hex.substr(0, 2), "0x");
  std::string bytes;
  for (size_t i = 2; i + 1 < hex.size() && hex[i] != '\n'; i += 2) {
    bytes.push_back(
        static_cast<char>(std::stoi(hex.substr(i, 2), nullptr, 16)));
  }
  RowHeader header;
  std::vector<float> values(4), state(4);
  ASSERT_OK(DecodeRow(bytes, 4, 4, &header, absl::MakeSpan(values),
                      absl::MakeSpan(state)));
  EXPECT_EQ(header, rows.headers[0]);
  EXPECT_EQ(values,
            std::vector<float>(rows.values.begin(), rows.values.begin() + 4));
  EXPECT_EQ(state,
            std::vector<float>(rows.state.begin(), rows.state.begin() + 4));
}

}  // namespace
}  // namespace psdb::dump
