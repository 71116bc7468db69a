// ckpt::Reshard (checkpoint/reshard.h) on checkpoints written by real
// Stores after training steps: 3 -> 2, 3 -> 5 and 1 -> 4 shards. The output
// verifies, exports byte-identically (with optimizer state and headers),
// puts on each shard exactly the keys the M-server ring gives it, restores
// into Stores that hold the same rows, and does not depend on the batch
// size. Errors: bad M, existing output, a source that does not verify.
#include "checkpoint/reshard.h"

#include <filesystem>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "checkpoint/restore.h"
#include "checkpoint/verify.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "manifest/manifest.h"
#include "psdb/store.h"
#include "shard/ring.h"
#include "store/row_codec.h"
#include "store/shard_files.h"
#include "tests/checkpoint/checkpoint_fixture.h"
#include "tests/testing/test_util.h"
#include "tools/dump/dump.h"

namespace psdb::ckpt {
namespace {

using ::psdb::testing::ScratchDir;
using ::testing::HasSubstr;

constexpr int kKeys = 300;
constexpr int kSteps = 3;

std::vector<TableSpec> Specs() {
  TableSpec emb;
  emb.name = "emb";
  emb.dim = 4;
  emb.optimizer.kind = optim::OptimizerKind::kAdagrad;
  emb.seed = 7;
  TableSpec wide;
  wide.name = "wide";
  wide.dim = 1;
  wide.optimizer.kind = optim::OptimizerKind::kAdam;
  return {emb, wide};
}

uint64_t Key(int i) { return static_cast<uint64_t>(i) * 7919 + 3; }

// The ring of a cluster of `n` servers (ids 0..n-1, default options).
Ring ServerRing(int n) {
  std::vector<RingMember> members;
  for (int r = 0; r < n; ++r) members.push_back({r, 1.0f});
  absl::StatusOr<Ring> ring = Ring::Create(RingOptions(), members);
  EXPECT_TRUE(ring.ok());
  return *ring;
}

// Trains `n` Stores (shard r owns the keys the n-server ring gives it) for
// kSteps steps and writes their checkpoint: a Store's own checkpoint for
// n == 1, else one shard per Store under a cluster manifest with the ring.
// Returns the checkpoint directory.
std::string TrainAndCheckpoint(const ScratchDir& dir, const std::string& name,
                               int n) {
  const Ring ring = ServerRing(n);
  const std::string ckpt = dir.Sub(absl::StrCat(name, "-ckpt"));
  v1::Manifest manifest;
  manifest.set_checkpoint_id(CheckpointId(kSteps, 1));
  manifest.set_step(kSteps);
  manifest.set_cluster_epoch(1);
  manifest.mutable_ring()->set_vnodes_per_server(
      RingOptions().vnodes_per_server);
  manifest.mutable_ring()->set_hash_seed(RingOptions().hash_seed);
  for (const TableSpec& spec : Specs()) {
    *manifest.add_tables()->mutable_spec() = TableSpecToProto(spec);
  }
  for (int r = 0; r < n; ++r) {
    StoreOptions options;
    options.shard_id = r;
    // A small budget: part of the rows live only in RocksDB.
    options.memory_budget_bytes = 16 << 10;
    absl::StatusOr<std::unique_ptr<Store>> store =
        Store::Open(options, dir.Sub(absl::StrCat(name, "-live-", r)));
    EXPECT_TRUE(store.ok()) << store.status();
    for (const TableSpec& spec : Specs()) {
      EXPECT_TRUE((*store)->CreateTable(spec).ok());
    }
    for (int step = 1; step <= kSteps; ++step) {
      for (const TableSpec& spec : Specs()) {
        std::vector<uint64_t> keys;
        std::vector<float> grads;
        for (int i = 0; i < kKeys; i += step) {  // later steps touch fewer
          if (ring.Owner(Key(i)) != r) continue;
          keys.push_back(Key(i));
          for (int j = 0; j < spec.dim; ++j) {
            grads.push_back(0.01f * static_cast<float>((i + j * step) % 17) -
                            0.05f);
          }
        }
        PushOptions push;
        push.step = step;
        EXPECT_TRUE((*store)->Push(spec.name, keys, grads, push).ok());
      }
    }
    if (n == 1) {
      absl::StatusOr<CheckpointInfo> info = (*store)->Checkpoint(ckpt);
      EXPECT_TRUE(info.ok()) << info.status();
      return info->path;
    }
    absl::StatusOr<Store::ShardCheckpoint> shard =
        (*store)->CheckpointShard(absl::StrCat(ckpt, "/", ShardDirName(r)));
    EXPECT_TRUE(shard.ok()) << shard.status();
    manifest.mutable_ring()->add_server_ids(r);
    manifest.mutable_ring()->add_weights(1.0f);
    v1::ShardManifest* sm = manifest.add_shards();
    sm->set_shard_id(r);
    sm->set_dir(ShardDirName(r));
    sm->set_server(absl::StrCat("127.0.0.1:", 7000 + r));
    AppendShardFiles(shard->files, sm->mutable_files());
    for (size_t t = 0; t < shard->tables.size(); ++t) {
      v1::TableManifest* tm = manifest.mutable_tables(static_cast<int>(t));
      EXPECT_EQ(tm->spec().name(), shard->tables[t].first.name);
      tm->add_shard_rows(shard->tables[t].second);
      tm->set_rows(tm->rows() + shard->tables[t].second);
      tm->set_step(shard->step);
    }
  }
  EXPECT_TRUE(WriteManifestAtomic(ckpt, manifest).ok());
  return ckpt;
}

// `ps-dump export --with-state` of every table, concatenated.
std::string ExportAll(const CheckpointReader& reader) {
  std::ostringstream all;
  for (const TableInfo& t : reader.tables()) {
    dump::ExportOptions options;
    options.table = t.spec.name;
    options.with_state = true;
    std::ostringstream out;
    absl::StatusOr<dump::ExportResult> r = dump::Export(reader, options, out);
    EXPECT_TRUE(r.ok()) << r.status();
    all << "# " << t.spec.name << "\n" << out.str();
  }
  return all.str();
}

struct ReshardCase {
  int from;
  int to;
};

class ReshardTest : public ::testing::TestWithParam<ReshardCase> {};

TEST_P(ReshardTest, VerifiesExportsIdenticallyAndFollowsTheRing) {
  const auto [from, to] = GetParam();
  ScratchDir dir;
  const std::string src_dir = TrainAndCheckpoint(dir, "src", from);
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<CheckpointReader> src,
                       CheckpointReader::Open(src_dir));
  ASSERT_EQ(src->shards().size(), static_cast<size_t>(from));

  ReshardOptions options;
  options.servers = to;
  options.out = dir.Sub("out");
  ASSERT_OK_AND_ASSIGN(ReshardResult result, Reshard(*src, options));
  EXPECT_EQ(result.path, options.out);
  EXPECT_FALSE(std::filesystem::exists(options.out + ".reshard-tmp"));

  ASSERT_OK_AND_ASSIGN(std::unique_ptr<CheckpointReader> out,
                       CheckpointReader::Open(options.out));
  ASSERT_OK_AND_ASSIGN(VerifyReport report, Verify(*out));
  EXPECT_TRUE(report.ok()) << report.errors.front();
  EXPECT_EQ(report.rows, src->tables()[0].rows + src->tables()[1].rows);

  // Byte-identical exports, with optimizer state and row headers.
  const std::string exported = ExportAll(*src);
  EXPECT_EQ(ExportAll(*out), exported);
  EXPECT_GT(exported.size(), 1000u);

  // The manifest: M servers 0..M-1 of weight 1, default ring options,
  // source's id, step and specs.
  const v1::Manifest& m = out->manifest();
  EXPECT_EQ(m.checkpoint_id(), src->manifest().checkpoint_id());
  EXPECT_EQ(m.step(), kSteps);
  ASSERT_EQ(m.ring().server_ids_size(), to);
  EXPECT_EQ(m.ring().vnodes_per_server(), 256);
  EXPECT_EQ(m.ring().hash_seed(), kDefaultRingSeed);
  ASSERT_EQ(m.shards_size(), to);
  for (int r = 0; r < to; ++r) {
    EXPECT_EQ(m.ring().server_ids(r), r);
    EXPECT_EQ(m.ring().weights(r), 1.0f);
    EXPECT_EQ(m.shards(r).shard_id(), r);
    EXPECT_EQ(m.shards(r).dir(), ShardDirName(r));
  }

  // Rows per shard, counted independently through the M-server ring.
  const Ring ring = ServerRing(to);
  std::vector<uint64_t> expected_total(to, 0);
  for (size_t t = 0; t < src->tables().size(); ++t) {
    const TableInfo& table = src->tables()[t];
    EXPECT_EQ(out->tables()[t].spec, table.spec);
    EXPECT_EQ(out->tables()[t].step, table.step);
    std::vector<uint64_t> expected(to, 0);
    ASSERT_OK_AND_ASSIGN(std::unique_ptr<TableCursor> c,
                         TableCursor::Open(*src, table));
    for (; c->Valid(); c->Next()) {
      uint64_t key = 0;
      ASSERT_OK(DecodeKey(c->key(), &key));
      ++expected[ring.Owner(key)];
    }
    EXPECT_EQ(out->tables()[t].shard_rows, expected) << table.spec.name;
    for (int r = 0; r < to; ++r) expected_total[r] += expected[r];
  }
  EXPECT_EQ(result.shard_rows, expected_total);

  // Batches of 7 rows: the same checkpoint.
  options.out = dir.Sub("out7");
  options.batch_rows = 7;
  ASSERT_OK_AND_ASSIGN(ReshardResult result7, Reshard(*src, options));
  EXPECT_EQ(result7.shard_rows, result.shard_rows);
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<CheckpointReader> out7,
                       CheckpointReader::Open(options.out));
  EXPECT_EQ(ExportAll(*out7), exported);
  for (size_t t = 0; t < out7->tables().size(); ++t) {
    EXPECT_EQ(out7->tables()[t].shard_rows, out->tables()[t].shard_rows);
  }

  // A Store of rank r restored from the new checkpoint holds exactly the
  // rows of its shard, state and header included.
  for (int r = 0; r < to; ++r) {
    StoreOptions so;
    so.restore_from = dir.Sub("out");
    so.shard_id = r;
    // The checkpoint's own ring: nothing to prepare, Store::Open links.
    ASSERT_OK_AND_ASSIGN(
        std::optional<RingRestoreResult> prepared,
        PrepareRestoreForRing(so.restore_from, ring, r,
                              dir.Sub(absl::StrCat("restored-", r))));
    EXPECT_FALSE(prepared.has_value());
    ASSERT_OK_AND_ASSIGN(
        std::unique_ptr<Store> store,
        Store::Open(so, dir.Sub(absl::StrCat("restored-", r))));
    int linked = 0;
    for (const auto& f : std::filesystem::directory_iterator(
             dir.Sub(absl::StrCat("restored-", r, "/db")))) {
      if (f.path().extension() == ".sst" &&
          std::filesystem::hard_link_count(f.path()) >= 2) {
        ++linked;
      }
    }
    EXPECT_GT(linked, 0);
    for (size_t t = 0; t < src->tables().size(); ++t) {
      const TableInfo& table = src->tables()[t];
      ASSERT_OK_AND_ASSIGN(std::unique_ptr<TableCursor> c,
                           TableCursor::Open(*src, table));
      std::vector<uint64_t> keys;
      std::vector<DecodedRow> rows;
      for (; c->Valid(); c->Next()) {
        DecodedRow row;
        ASSERT_OK(src->Decode(c->shard(), table, c->key(), c->value(), &row));
        if (ring.Owner(row.key) != r) continue;
        keys.push_back(row.key);
        rows.push_back(std::move(row));
      }
      RowBatch got;
      ASSERT_OK(store->PullRows(table.spec.name, keys, &got));
      ASSERT_EQ(got.headers.size(), keys.size());
      for (size_t i = 0; i < keys.size(); ++i) {
        const size_t d = table.spec.dim, s = table.state_size;
        EXPECT_EQ(std::vector<float>(got.values.begin() + i * d,
                                     got.values.begin() + (i + 1) * d),
                  rows[i].values);
        EXPECT_EQ(std::vector<float>(got.state.begin() + i * s,
                                     got.state.begin() + (i + 1) * s),
                  rows[i].state);
        EXPECT_EQ(got.headers[i].update_count, rows[i].header.update_count);
        EXPECT_EQ(got.headers[i].last_update_step,
                  rows[i].header.last_update_step);
      }
      EXPECT_EQ(store->Stats().tables.size(), 2u);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Shards, ReshardTest,
                         ::testing::Values(ReshardCase{3, 2}, ReshardCase{3, 5},
                                           ReshardCase{1, 4}),
                         [](const auto& info) {
                           return absl::StrCat(info.param.from, "to",
                                               info.param.to);
                         });

TEST(ReshardErrorsTest, BadServersExistingOutAndCorruptSource) {
  ScratchDir dir;
  const std::string src_dir = TrainAndCheckpoint(dir, "src", 1);
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<CheckpointReader> src,
                       CheckpointReader::Open(src_dir));
  ReshardOptions options;
  options.out = dir.Sub("out");
  options.servers = 0;
  EXPECT_EQ(Reshard(*src, options).status().code(),
            absl::StatusCode::kInvalidArgument);
  options.servers = 2;
  options.batch_rows = 0;
  EXPECT_EQ(Reshard(*src, options).status().code(),
            absl::StatusCode::kInvalidArgument);
  options.batch_rows = 65536;
  EXPECT_FALSE(std::filesystem::exists(options.out));

  // A non-empty output directory is refused and left alone; an empty one
  // is used.
  std::filesystem::create_directories(options.out + "/x");
  absl::Status st = Reshard(*src, options).status();
  EXPECT_EQ(st.code(), absl::StatusCode::kAlreadyExists) << st;
  EXPECT_THAT(st.message(), HasSubstr(options.out));
  EXPECT_TRUE(std::filesystem::exists(options.out + "/x"));
  std::filesystem::remove(options.out + "/x");
  ASSERT_OK(Reshard(*src, options).status());
  EXPECT_TRUE(std::filesystem::exists(options.out + "/MANIFEST.json"));

  // A source with a corrupt row: refused, saying why; nothing written.
  TableSpec spec;
  spec.name = "emb";
  spec.dim = 2;
  testing::FixtureTable table;
  table.spec = spec;
  for (uint64_t k = 1; k <= 5; ++k) table.rows[k] = testing::MakeRow(k, 2, 0);
  const std::string bad = dir.Sub("bad");
  ASSERT_OK(testing::WriteCheckpoint(bad, {table}, 2, 1,
                                     {{{"emb", 3}, std::string("garbage")}}));
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<CheckpointReader> bad_reader,
                       CheckpointReader::Open(bad));
  options.out = dir.Sub("out-bad");
  st = Reshard(*bad_reader, options).status();
  EXPECT_EQ(st.code(), absl::StatusCode::kFailedPrecondition) << st;
  EXPECT_THAT(st.message(), HasSubstr("does not verify"));
  EXPECT_THAT(st.message(), HasSubstr("key 3"));
  EXPECT_FALSE(std::filesystem::exists(options.out));
  EXPECT_FALSE(std::filesystem::exists(options.out + ".reshard-tmp"));
}

// Store::Open with restore_from onto a ring of another size
// (checkpoint/restore.h): each rank gets exactly the rows
// `ps-dump reshard` puts in its shard, byte for byte, reading only the
// source shards that can hold them.
class RestoreOntoRingTest : public ::testing::TestWithParam<ReshardCase> {};

TEST_P(RestoreOntoRingTest, EachRankLoadsExactlyItsRows) {
  const auto [from, to] = GetParam();
  ScratchDir dir;
  const std::string src_dir = TrainAndCheckpoint(dir, "src", from);
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<CheckpointReader> src,
                       CheckpointReader::Open(src_dir));
  ReshardOptions reshard;
  reshard.servers = to;
  reshard.out = dir.Sub("reshard");
  ASSERT_OK_AND_ASSIGN(ReshardResult expected, Reshard(*src, reshard));

  const Ring ring = ServerRing(to);
  const Ring source_ring = ServerRing(from);
  uint64_t total = 0;
  for (int r = 0; r < to; ++r) {
    // Which source shards are read: a surviving server reads its own shard
    // and those of removed servers; a new one reads every shard.
    std::vector<ServerId> want;
    if (r < from) {
      want.push_back(r);
      for (int s = to; s < from; ++s) want.push_back(s);
    } else {
      for (int s = 0; s < from; ++s) want.push_back(s);
    }
    EXPECT_EQ(SourceShardsFor(source_ring, ring, r), want) << r;
    RingRestoreOptions direct;
    direct.checkpoint_dir = src->dir();
    direct.ring = ring;
    direct.server = r;
    direct.db_path = dir.Sub(absl::StrCat("direct-", r, "/db"));
    direct.batch_rows = 7;  // many batches
    std::filesystem::create_directories(dir.Sub(absl::StrCat("direct-", r)));
    ASSERT_OK_AND_ASSIGN(RingRestoreResult rr, RestoreForRing(direct));
    EXPECT_EQ(rr.source_shards, std::vector<int>(want.begin(), want.end()));
    EXPECT_EQ(rr.rows, expected.shard_rows[r]);
    EXPECT_FALSE(std::filesystem::exists(direct.db_path + ".restore-tmp"));

    // A Store of rank r restored from the source: its own checkpoint
    // exports exactly what the reshard's shard r exports.
    StoreOptions so;
    so.restore_from = src_dir;
    so.shard_id = r;
    const std::string path = dir.Sub(absl::StrCat("rank-", r));
    ASSERT_OK_AND_ASSIGN(std::optional<RingRestoreResult> prepared,
                         PrepareRestoreForRing(src_dir, ring, r, path));
    ASSERT_TRUE(prepared.has_value());
    EXPECT_EQ(prepared->source_shards, rr.source_shards);
    ASSERT_OK_AND_ASSIGN(std::unique_ptr<Store> store, Store::Open(so, path));
    ASSERT_OK_AND_ASSIGN(CheckpointInfo info,
                         store->Checkpoint(dir.Sub(absl::StrCat("re-", r))));
    ASSERT_OK_AND_ASSIGN(std::unique_ptr<CheckpointReader> mine,
                         CheckpointReader::Open(info.path));
    ASSERT_OK_AND_ASSIGN(std::unique_ptr<CheckpointReader> theirs,
                         CheckpointReader::OpenShards(reshard.out, {r}));
    const std::string exported = ExportAll(*theirs);
    EXPECT_EQ(ExportAll(*mine), exported) << "rank " << r;
    uint64_t rows = 0;
    for (size_t t = 0; t < mine->tables().size(); ++t) {
      EXPECT_EQ(mine->tables()[t].rows, theirs->tables()[t].shard_rows[0]);
      rows += mine->tables()[t].rows;
    }
    EXPECT_EQ(rows, expected.shard_rows[r]);
    total += rows;
    // Every row it holds is its own on the new ring.
    for (const TableInfo& t : mine->tables()) {
      ASSERT_OK_AND_ASSIGN(std::unique_ptr<TableCursor> c,
                           TableCursor::Open(*mine, t));
      for (; c->Valid(); c->Next()) {
        uint64_t key = 0;
        ASSERT_OK(DecodeKey(c->key(), &key));
        EXPECT_EQ(ring.Owner(key), r) << key;
      }
    }
  }
  EXPECT_EQ(total, src->tables()[0].rows + src->tables()[1].rows);
  EXPECT_EQ(total, expected.rows);
}

INSTANTIATE_TEST_SUITE_P(Shards, RestoreOntoRingTest,
                         ::testing::Values(ReshardCase{3, 2}, ReshardCase{3, 5},
                                           ReshardCase{3, 4}),
                         [](const auto& info) {
                           return absl::StrCat(info.param.from, "to",
                                               info.param.to);
                         });

TEST(RestoreOntoRingErrorsTest, CorruptSourceLeavesNoDb) {
  ScratchDir dir;
  TableSpec spec;
  spec.name = "emb";
  spec.dim = 2;
  testing::FixtureTable table;
  table.spec = spec;
  for (uint64_t k = 1; k <= 5; ++k) table.rows[k] = testing::MakeRow(k, 2, 0);
  const std::string bad = dir.Sub("bad");
  ASSERT_OK(testing::WriteCheckpoint(bad, {table}, 2, 1,
                                     {{{"emb", 3}, std::string("garbage")}}));
  for (int r = 0; r < 2; ++r) {
    StoreOptions so;
    so.restore_from = bad;
    so.shard_id = r;
    const std::string path = dir.Sub(absl::StrCat("rank-", r));
    absl::Status st =
        PrepareRestoreForRing(bad, ServerRing(2), r, path).status();
    EXPECT_EQ(st.code(), absl::StatusCode::kDataLoss) << st;
    EXPECT_THAT(st.message(), HasSubstr("key 3"));
    EXPECT_FALSE(std::filesystem::exists(path + "/db"));
    EXPECT_FALSE(std::filesystem::exists(path + "/db.restore-tmp"));
  }
}

}  // namespace
}  // namespace psdb::ckpt
