// psdb_fuzz_seeds OUT_DIR: writes the seed corpus of every fuzz target
// under OUT_DIR/<target>/, each seed made by psdb's real encoders: rows by
// EncodeRow, manifests by a real Store checkpoint and ManifestToJson,
// requests as the wire messages a client sends (framed as the service
// targets read them, tests/fuzz/fuzz_util.h). Run by make_corpus.sh.
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "manifest/manifest.h"
#include "rpc/wire/psdb.pb.h"
#include "store/row_codec.h"
#include "tests/fuzz/fuzz_util.h"
#include "tests/fuzz/small_checkpoint.h"

namespace {

namespace fs = std::filesystem;
namespace v1 = psdb::v1;
using psdb::fuzz::AppendRequest;

class SeedWriter {
 public:
  SeedWriter(const std::string& root, const std::string& target)
      : dir_(root + "/" + target) {
    fs::create_directories(dir_);
  }
  void Add(const std::string& bytes) {
    std::ofstream out(absl::StrCat(dir_, "/seed-", n_++), std::ios::binary);
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  }

 private:
  std::string dir_;
  int n_ = 0;
};

std::string Bytes(const google::protobuf::Message& m) {
  std::string s;
  m.SerializeToString(&s);
  return s;
}

std::string Floats(const std::vector<float>& v) {
  return std::string(reinterpret_cast<const char*>(v.data()),
                     v.size() * sizeof(float));
}

void RowCodecSeeds(const std::string& root) {
  SeedWriter w(root, "row_codec_fuzz");
  struct Shape {
    int dim;
    int state;
  };
  for (Shape s : {Shape{4, 4}, Shape{1, 2}, Shape{16, 33}, Shape{0, 0}}) {
    std::vector<float> values(s.dim), state(s.state);
    for (int i = 0; i < s.dim; ++i) values[i] = 0.25f * (i - 2);
    for (int i = 0; i < s.state; ++i) state[i] = 0.5f * i;
    psdb::RowHeader header{7, 3, 11};
    std::string row;
    psdb::EncodeRow(header, values, state, &row);
    w.Add(std::string(1, '\0') + row);
    w.Add(std::string(1, '\1') + row);
  }
}

void ManifestAndCheckpointSeeds(const std::string& root,
                                const std::string& work) {
  absl::StatusOr<std::string> ckpt = psdb::fuzz::WriteSmallCheckpoint(work);
  if (!ckpt.ok()) {
    std::fprintf(stderr, "%s\n", ckpt.status().ToString().c_str());
    std::exit(1);
  }
  absl::StatusOr<v1::Manifest> manifest = psdb::ReadManifest(*ckpt);
  if (!manifest.ok()) std::exit(1);
  SeedWriter m(root, "manifest_fuzz");
  m.Add(psdb::ManifestToJson(*manifest));
  // The same as a two-server cluster checkpoint with its ring.
  v1::Manifest cluster = *manifest;
  cluster.clear_shards();
  for (int i = 0; i < 2; ++i) {
    v1::ShardManifest* shard = cluster.add_shards();
    shard->set_shard_id(i);
    shard->set_dir(psdb::ShardDirName(i));
    shard->set_server(absl::StrCat("127.0.0.1:", 7000 + i));
    cluster.mutable_ring()->add_server_ids(i);
    cluster.mutable_ring()->add_weights(1.0f);
  }
  cluster.mutable_ring()->set_vnodes_per_server(256);
  cluster.mutable_ring()->set_hash_seed(17);
  cluster.set_cluster_epoch(3);
  for (auto& t : *cluster.mutable_tables()) {
    t.clear_shard_rows();
    t.add_shard_rows(t.rows() / 2);
    t.add_shard_rows(t.rows() - t.rows() / 2);
  }
  m.Add(psdb::ManifestToJson(cluster));

  // Checkpoint mutations (7-byte records: file, op, offset, value; see
  // checkpoint_reader_fuzz.cc): none, then per file a flipped byte in the
  // middle, a truncation to half, a deletion.
  auto files = psdb::fuzz::ReadTree(*ckpt);
  if (!files.ok()) std::exit(1);
  SeedWriter c(root, "checkpoint_reader_fuzz");
  c.Add("");
  for (size_t i = 0; i < files->size(); ++i) {
    const uint32_t mid = static_cast<uint32_t>((*files)[i].second.size() / 2);
    for (uint8_t op : {1, 2, 3}) {
      std::string rec(7, '\0');
      rec[0] = static_cast<char>(i);
      rec[1] = static_cast<char>(op);
      for (int b = 0; b < 4; ++b)
        rec[2 + b] = static_cast<char>(mid >> (8 * b));
      rec[6] = 0x10;
      c.Add(rec);
    }
  }
}

void CriteoSeeds(const std::string& root) {
  SeedWriter w(root, "criteo_line_fuzz");
  std::string full = "1";
  for (int i = 0; i < 13; ++i) absl::StrAppend(&full, "\t", i * 7 - 3);
  for (int i = 0; i < 26; ++i) absl::StrAppend(&full, "\t", "68fd1e64");
  w.Add(full);
  std::string sparse = "0";
  for (int i = 0; i < 13; ++i) absl::StrAppend(&sparse, "\t", i % 3 ? "" : "1");
  for (int i = 0; i < 26; ++i) {
    absl::StrAppend(&sparse, "\t", i % 4 ? "" : "FFFFFFFFFFFFFFFF");
  }
  w.Add(sparse + "\r");
  w.Add("1\tx");  // malformed
}

void ParameterServiceSeeds(const std::string& root) {
  SeedWriter w(root, "parameter_service_fuzz");
  const std::vector<uint64_t> keys = {1000003, 2000006, 5, 1000003};
  v1::PullRequest pull;
  pull.set_table("emb");
  for (uint64_t k : keys) pull.add_keys(k);
  v1::PushRequest push;
  push.set_table("emb");
  for (uint64_t k : keys) push.add_keys(k);
  push.set_grads(Floats(std::vector<float>(keys.size() * 4, 0.5f)));
  v1::PullRowsRequest pull_rows;
  pull_rows.set_table("wide");
  pull_rows.add_keys(1000003);
  v1::PutRowsRequest put_rows;
  put_rows.set_table("wide");
  put_rows.add_keys(9);
  v1::RowBlock* block = put_rows.mutable_rows();
  block->set_dim(1);
  block->set_state_size(2);
  block->set_values(Floats({0.5f}));
  block->set_state(Floats({0.25f, 1.0f}));
  block->add_last_update_step(1);
  block->add_update_count(1);
  block->add_frequency(1);
  v1::CreateTableRequest create;
  create.mutable_spec()->set_name("t");
  create.mutable_spec()->set_dim(2);
  create.mutable_spec()->mutable_optimizer()->set_kind("sgd");
  create.mutable_spec()->mutable_optimizer()->set_learning_rate(1.0f);
  v1::DropTableRequest drop;
  drop.set_name("wide");
  v1::CheckpointRequest checkpoint;
  checkpoint.set_root_dir("ckpt");
  checkpoint.set_keep_last(1);
  v1::ReshardRequest reshard;
  reshard.set_phase(v1::RESHARD_PHASE_PREPARE);
  reshard.set_migration_id(1);
  v1::MigrateRequest migrate;
  migrate.set_migration_id(1);
  *migrate.mutable_spec() = create.spec();
  migrate.add_keys(3);

  const std::vector<std::pair<int, std::string>> one = {
      {0, Bytes(pull)},
      {1, Bytes(push)},
      {2, Bytes(pull_rows)},
      {3, Bytes(put_rows)},
      {4, Bytes(create)},
      {5, Bytes(drop)},
      {6, Bytes(v1::ListTablesRequest())},
      {7, Bytes(checkpoint)},
      {8, Bytes(v1::StatsRequest())},
      {9, Bytes(reshard)},
      {10, Bytes(migrate)}};
  for (const auto& [handler, bytes] : one) {
    std::string seed;
    AppendRequest(static_cast<uint8_t>(handler), bytes, &seed);
    w.Add(seed);
  }
  // A table created, pushed to, pulled and checkpointed.
  v1::PushRequest push_t;
  push_t.set_table("t");
  push_t.add_keys(1);
  push_t.set_grads(Floats({-1.0f, 2.0f}));
  v1::PullRequest pull_t;
  pull_t.set_table("t");
  pull_t.add_keys(1);
  std::string seq;
  AppendRequest(4, Bytes(create), &seq);
  AppendRequest(1, Bytes(push_t), &seq);
  AppendRequest(0, Bytes(pull_t), &seq);
  AppendRequest(7, Bytes(checkpoint), &seq);
  w.Add(seq);
}

void SchedulerServiceSeeds(const std::string& root) {
  SeedWriter w(root, "scheduler_service_fuzz");
  v1::RegisterRequest server;
  server.set_node_id("s0");
  server.set_role(v1::NODE_ROLE_SERVER);
  server.set_address("127.0.0.1:1");
  v1::RegisterRequest worker;
  worker.set_node_id("w0");
  worker.set_role(v1::NODE_ROLE_WORKER);
  v1::RegisterRequest joiner;
  joiner.set_node_id("s1");
  joiner.set_role(v1::NODE_ROLE_SERVER);
  joiner.set_address("127.0.0.1:2");
  joiner.set_join(true);
  std::string ready;
  AppendRequest(0, Bytes(server), &ready);
  AppendRequest(0, Bytes(worker), &ready);

  auto with = [&](const std::vector<std::pair<int, std::string>>& more) {
    std::string seed = ready;
    for (const auto& [h, bytes] : more) {
      AppendRequest(static_cast<uint8_t>(h), bytes, &seed);
    }
    w.Add(seed);
  };
  v1::HeartbeatRequest beat;
  beat.set_node_id("s0");
  v1::GetClusterMapRequest get_map;
  get_map.set_wait_ready_ms(10);
  v1::BarrierRequest barrier;
  barrier.set_name("epoch-1");
  barrier.set_node_id("w0");
  barrier.set_timeout_ms(50);
  v1::StepClockRequest clock;
  clock.set_node_id("w0");
  clock.set_finished_step(3);
  clock.set_staleness(1);
  clock.set_timeout_ms(50);
  v1::WatchClusterMapRequest watch;
  watch.set_after_version(1);
  v1::AddServerRequest add;
  add.set_node_id("s1");
  v1::DrainServerRequest drain;
  drain.set_node_id("s0");
  v1::RendezvousSetRequest set;
  set.set_key("gloo/0");
  set.set_value("addr");
  v1::RendezvousGetRequest get;
  get.add_keys("gloo/0");
  get.set_timeout_ms(50);

  with({{1, Bytes(beat)}, {2, Bytes(get_map)}});
  with({{3, Bytes(barrier)}, {4, Bytes(clock)}});
  with({{5, Bytes(watch)}, {6, Bytes(v1::GetSchedulerStatusRequest())}});
  with({{0, Bytes(joiner)}, {7, Bytes(add)}});
  with({{0, Bytes(joiner)}, {7, Bytes(add)}, {8, Bytes(drain)}});
  with({{9, Bytes(set)}, {10, Bytes(get)}});
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s OUT_DIR\n", argv[0]);
    return 2;
  }
  const std::string root = argv[1];
  const std::string work = root + "/.work";
  RowCodecSeeds(root);
  ManifestAndCheckpointSeeds(root, work);
  CriteoSeeds(root);
  ParameterServiceSeeds(root);
  SchedulerServiceSeeds(root);
  std::error_code ec;
  fs::remove_all(work, ec);
  return 0;
}
