// PsServer in-process, driven through the raw generated stub: hostile and
// malformed requests, routing checks, health service.
#include "rpc/server/server.h"

#include <cmath>
#include <cstring>
#include <limits>

#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "manifest/manifest.h"
#include "optim/optimizer.h"
#include "rpc/client/remote_client.h"
#include "rpc/wire/convert.h"
#include "rpc/wire/psdb.grpc.pb.h"
#include "tests/testing/health_check.h"
#include "tests/testing/test_util.h"
#include "util/status_macros.h"

namespace psdb::rpc {
namespace {

using ::psdb::testing::ScratchDir;
using ::testing::HasSubstr;

constexpr int kDim = 4;
constexpr size_t kMaxKeys = 100;

TableSpec AdagradTable(const std::string& name, int dim = kDim) {
  TableSpec spec;
  spec.name = name;
  spec.dim = dim;
  spec.optimizer.kind = optim::OptimizerKind::kAdagrad;
  spec.optimizer.learning_rate = 0.1f;
  spec.seed = 42;
  return spec;
}

std::string Floats(std::vector<float> values) {
  std::string out;
  FloatsToBytes(values, &out);
  return out;
}

class ServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    StoreOptions store_options;
    store_options.max_batch_keys = kMaxKeys;
    ASSERT_OK_AND_ASSIGN(store_, Store::Open(store_options, dir_.Sub("db")));
    ServerOptions options;
    options.max_batch_keys = kMaxKeys;
    options.max_dim = 16;
    options.num_threads = 2;
    ASSERT_OK_AND_ASSIGN(server_, PsServer::Start(options, store_.get()));
    channel_ = grpc::CreateChannel(server_->address(),
                                   grpc::InsecureChannelCredentials());
    stub_ = v1::ParameterService::NewStub(channel_);
    v1::CreateTableRequest req;
    *req.mutable_spec() = TableSpecToProto(AdagradTable("emb"));
    v1::CreateTableResponse resp;
    grpc::ClientContext ctx;
    ASSERT_TRUE(stub_->CreateTable(&ctx, req, &resp).ok());
  }

  void TearDown() override {
    if (server_ != nullptr) server_->Shutdown(absl::Seconds(5));
  }

  v1::PullRowsResponse Snapshot() {
    v1::PullRowsRequest req;
    req.set_table("emb");
    for (uint64_t k : {1, 2, 3}) req.add_keys(k);
    v1::PullRowsResponse resp;
    grpc::ClientContext ctx;
    EXPECT_TRUE(stub_->PullRows(&ctx, req, &resp).ok());
    // Sightings count reads too; values, state and updates must not move.
    resp.mutable_rows()->clear_frequency();
    return resp;
  }

  uint64_t RowsCreated() {
    for (const TableStats& t : store_->Stats().tables) {
      if (t.name == "emb") return t.created;
    }
    return 0;
  }

  ScratchDir dir_;
  std::unique_ptr<Store> store_;
  std::unique_ptr<PsServer> server_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<v1::ParameterService::Stub> stub_;
};

TEST_F(ServerTest, PullAndPushThroughTheStub) {
  v1::PullRequest pull;
  pull.set_table("emb");
  pull.add_keys(5);
  pull.add_keys(5);
  v1::PullResponse pulled;
  {
    grpc::ClientContext ctx;
    ASSERT_TRUE(stub_->Pull(&ctx, pull, &pulled).ok());
  }
  EXPECT_EQ(pulled.dim(), kDim);
  ASSERT_EQ(pulled.values().size(), 2u * kDim * sizeof(float));
  std::vector<float> expected(kDim);
  InitializeRow(AdagradTable("emb"), 5, absl::MakeSpan(expected));
  EXPECT_EQ(0, std::memcmp(pulled.values().data(), expected.data(),
                           kDim * sizeof(float)));
  EXPECT_EQ(0, std::memcmp(pulled.values().data() + kDim * sizeof(float),
                           expected.data(), kDim * sizeof(float)));

  v1::PushRequest push;
  push.set_table("emb");
  push.add_keys(5);
  push.set_grads(Floats({1, 1, 1, 1}));
  push.set_step(1);
  v1::PushResponse pushed;
  grpc::ClientContext ctx;
  ASSERT_TRUE(stub_->Push(&ctx, push, &pushed).ok());
  std::vector<float> local(kDim);
  ASSERT_OK(store_->Pull("emb", {5}, absl::MakeSpan(local), {}));
  EXPECT_NE(local, expected);
}

// PullTables on a training server: each table's rows as its own Pull
// would give them (get-or-create), in request order, with no version; a
// version asked for, reads over the batch limit together, or one bad
// table fail the whole request and create nothing.
TEST_F(ServerTest, PullTablesReadsEachTableAsPullWould) {
  {
    v1::CreateTableRequest req;
    TableSpec dense = AdagradTable("dense");
    dense.dim = 2;
    *req.mutable_spec() = TableSpecToProto(dense);
    v1::CreateTableResponse resp;
    grpc::ClientContext ctx;
    ASSERT_TRUE(stub_->CreateTable(&ctx, req, &resp).ok());
  }
  v1::PullTablesRequest req;
  v1::TableRead* emb = req.add_reads();
  emb->set_table("emb");
  for (uint64_t k : {7, 3, 7}) emb->add_keys(k);
  v1::TableRead* dense = req.add_reads();
  dense->set_table("dense");
  for (uint64_t k : {0, 1}) dense->add_keys(k);
  v1::PullTablesResponse resp;
  {
    grpc::ClientContext ctx;
    ASSERT_TRUE(stub_->PullTables(&ctx, req, &resp).ok());
  }
  ASSERT_EQ(resp.tables_size(), 2);
  EXPECT_FALSE(resp.has_version());
  EXPECT_EQ(resp.held_versions_size(), 0);
  for (int t = 0; t < 2; ++t) {
    const v1::TableRead& read = req.reads(t);
    v1::PullRequest pull;
    pull.set_table(read.table());
    pull.mutable_keys()->CopyFrom(read.keys());
    v1::PullResponse pulled;
    grpc::ClientContext ctx;
    ASSERT_TRUE(stub_->Pull(&ctx, pull, &pulled).ok());
    EXPECT_EQ(resp.tables(t).dim(), t == 0 ? kDim : 2);
    EXPECT_EQ(resp.tables(t).values(), pulled.values()) << read.table();
    EXPECT_FALSE(pulled.has_version());
  }
  const uint64_t created = RowsCreated();
  EXPECT_EQ(created, 2u);

  const auto refused = [&](v1::PullTablesRequest bad) {
    v1::PullTablesResponse out;
    grpc::ClientContext ctx;
    return stub_->PullTables(&ctx, bad, &out);
  };
  v1::PullTablesRequest versioned = req;
  versioned.set_version("ckpt-000000000001-000001");
  grpc::Status status = refused(versioned);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_NE(status.error_message().find("training server"), std::string::npos)
      << status.error_message();
  v1::PullTablesRequest unknown = req;
  unknown.mutable_reads(0)->add_keys(99);
  unknown.mutable_reads(1)->set_table("nope");
  EXPECT_EQ(refused(unknown).error_code(), grpc::StatusCode::NOT_FOUND);
  v1::PullTablesRequest big;
  for (int t = 0; t < 2; ++t) {
    v1::TableRead* read = big.add_reads();
    read->set_table("emb");
    for (size_t k = 0; k < kMaxKeys / 2 + 1; ++k) read->add_keys(1000 + k);
  }
  status = refused(big);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_NE(status.error_message().find("more than the server's limit"),
            std::string::npos)
      << status.error_message();
  EXPECT_EQ(RowsCreated(), created);
}

// What a client generated from psdb.proto in another language sends first:
// a CreateTable with only a name and a dim. Every other field takes its
// documented default (the C++ one), and the table works.
TEST_F(ServerTest, MinimalCreateTableTakesTheDocumentedDefaults) {
  v1::CreateTableRequest req;
  req.mutable_spec()->set_name("minimal");
  req.mutable_spec()->set_dim(2);
  v1::CreateTableResponse resp;
  {
    grpc::ClientContext ctx;
    const grpc::Status status = stub_->CreateTable(&ctx, req, &resp);
    ASSERT_TRUE(status.ok()) << status.error_message();
  }
  TableSpec expected;
  expected.name = "minimal";
  expected.dim = 2;
  ASSERT_OK_AND_ASSIGN(TableSpec created, store_->GetTable("minimal"));
  EXPECT_TRUE(created == expected);

  v1::PullRequest pull;
  pull.set_table("minimal");
  pull.add_keys(9);
  v1::PullResponse pulled;
  {
    grpc::ClientContext ctx;
    ASSERT_TRUE(stub_->Pull(&ctx, pull, &pulled).ok());
  }
  std::vector<float> initial(2);
  InitializeRow(expected, 9, absl::MakeSpan(initial));
  ASSERT_EQ(pulled.values().size(), 2 * sizeof(float));
  EXPECT_EQ(0, std::memcmp(pulled.values().data(), initial.data(),
                           2 * sizeof(float)));
  // SGD with the default learning rate 0.01: v - 0.01 * g, exactly.
  v1::PushRequest push;
  push.set_table("minimal");
  push.add_keys(9);
  push.set_grads(Floats({1.0f, -2.0f}));
  push.set_step(1);
  v1::PushResponse pushed;
  {
    grpc::ClientContext ctx;
    ASSERT_TRUE(stub_->Push(&ctx, push, &pushed).ok());
  }
  std::vector<float> after(2);
  ASSERT_OK(store_->Pull("minimal", {9}, absl::MakeSpan(after), {}));
  EXPECT_EQ(after[0], initial[0] - 0.01f * 1.0f);
  EXPECT_EQ(after[1], initial[1] - 0.01f * -2.0f);
}

TEST_F(ServerTest, HostileRequestsFailAndChangeNothing) {
  const v1::PullRowsResponse before = Snapshot();
  const uint64_t created = RowsCreated();
  const auto expect_code = [](grpc::StatusCode code, const grpc::Status& s,
                              const char* what) {
    EXPECT_EQ(s.error_code(), code) << what << ": " << s.error_message();
    EXPECT_FALSE(s.error_message().empty()) << what;
  };
  // Gradients one byte short.
  {
    v1::PushRequest req;
    req.set_table("emb");
    for (uint64_t k : {1, 2, 50}) req.add_keys(k);
    req.set_grads(std::string(3 * kDim * sizeof(float) - 1, '\0'));
    v1::PushResponse resp;
    grpc::ClientContext ctx;
    expect_code(grpc::StatusCode::INVALID_ARGUMENT,
                stub_->Push(&ctx, req, &resp), "short grads");
  }
  // Non-finite gradient in the last row (the table rejects).
  {
    v1::PushRequest req;
    req.set_table("emb");
    for (uint64_t k : {1, 2, 51}) req.add_keys(k);
    std::vector<float> grads(3 * kDim, 0.5f);
    grads.back() = std::numeric_limits<float>::quiet_NaN();
    req.set_grads(Floats(grads));
    v1::PushResponse resp;
    grpc::ClientContext ctx;
    expect_code(grpc::StatusCode::INVALID_ARGUMENT,
                stub_->Push(&ctx, req, &resp), "NaN grads");
    grads.back() = std::numeric_limits<float>::infinity();
    req.set_grads(Floats(grads));
    grpc::ClientContext ctx2;
    expect_code(grpc::StatusCode::INVALID_ARGUMENT,
                stub_->Push(&ctx2, req, &resp), "Inf grads");
  }
  // PutRows with the wrong dim, and with values of the wrong length.
  {
    v1::PutRowsRequest req;
    req.set_table("emb");
    req.add_keys(1);
    RowBatch rows;
    rows.Resize(kDim + 1, kDim + 1, 1);
    ToProto(rows, req.mutable_rows());
    v1::PutRowsResponse resp;
    grpc::ClientContext ctx;
    expect_code(grpc::StatusCode::INVALID_ARGUMENT,
                stub_->PutRows(&ctx, req, &resp), "dim mismatch");
    rows.Resize(kDim, kDim, 1);
    ToProto(rows, req.mutable_rows());
    req.mutable_rows()->mutable_values()->resize(kDim * sizeof(float) - 2);
    grpc::ClientContext ctx2;
    expect_code(grpc::StatusCode::INVALID_ARGUMENT,
                stub_->PutRows(&ctx2, req, &resp), "short values");
    rows.values[0] = std::numeric_limits<float>::infinity();
    ToProto(rows, req.mutable_rows());
    grpc::ClientContext ctx3;
    expect_code(grpc::StatusCode::INVALID_ARGUMENT,
                stub_->PutRows(&ctx3, req, &resp), "non-finite row");
  }
  // Unknown table: NOT_FOUND (the canonical code for it).
  {
    v1::PullRequest req;
    req.set_table("nope");
    req.add_keys(1);
    v1::PullResponse resp;
    grpc::ClientContext ctx;
    expect_code(grpc::StatusCode::NOT_FOUND, stub_->Pull(&ctx, req, &resp),
                "unknown table");
  }
  // More keys than the limit.
  {
    v1::PullRequest req;
    req.set_table("emb");
    for (uint64_t k = 0; k <= kMaxKeys; ++k) req.add_keys(1000 + k);
    v1::PullResponse resp;
    grpc::ClientContext ctx;
    expect_code(grpc::StatusCode::RESOURCE_EXHAUSTED,
                stub_->Pull(&ctx, req, &resp), "too many keys");
  }
  // A message over the size limit (derived from the batch limit).
  {
    v1::PushRequest req;
    req.set_table("emb");
    const size_t n = MaxMessageBytes(kMaxKeys, 16) / 8 + 1;
    for (uint64_t k = 0; k < n; ++k) req.add_keys(2000 + k);
    req.set_grads(std::string(n * kDim * sizeof(float), '\0'));
    v1::PushResponse resp;
    grpc::ClientContext ctx;
    expect_code(grpc::StatusCode::RESOURCE_EXHAUSTED,
                stub_->Push(&ctx, req, &resp), "oversized message");
  }
  // Bad table names, in data calls and in CreateTable.
  for (const char* name : {"a/b", "..", "../etc", ""}) {
    v1::PullRequest req;
    req.set_table(name);
    req.add_keys(1);
    v1::PullResponse resp;
    grpc::ClientContext ctx;
    expect_code(grpc::StatusCode::INVALID_ARGUMENT,
                stub_->Pull(&ctx, req, &resp), name);
    v1::CreateTableRequest create;
    *create.mutable_spec() = TableSpecToProto(AdagradTable(name));
    v1::CreateTableResponse created_resp;
    grpc::ClientContext ctx2;
    expect_code(grpc::StatusCode::INVALID_ARGUMENT,
                stub_->CreateTable(&ctx2, create, &created_resp), name);
  }
  // A dim over --max_dim, an unknown optimizer name.
  {
    v1::CreateTableRequest req;
    *req.mutable_spec() = TableSpecToProto(AdagradTable("wide", 17));
    v1::CreateTableResponse resp;
    grpc::ClientContext ctx;
    expect_code(grpc::StatusCode::INVALID_ARGUMENT,
                stub_->CreateTable(&ctx, req, &resp), "dim > max_dim");
    *req.mutable_spec() = TableSpecToProto(AdagradTable("odd"));
    req.mutable_spec()->mutable_optimizer()->set_kind("sparkle");
    grpc::ClientContext ctx2;
    expect_code(grpc::StatusCode::INVALID_ARGUMENT,
                stub_->CreateTable(&ctx2, req, &resp), "unknown optimizer");
  }
  // A checkpoint root escaping with "..".
  {
    v1::CheckpointRequest req;
    req.set_root_dir(dir_.Sub("ckpt/../../x"));
    v1::CheckpointResponse resp;
    grpc::ClientContext ctx;
    expect_code(grpc::StatusCode::INVALID_ARGUMENT,
                stub_->Checkpoint(&ctx, req, &resp), "root with ..");
  }

  // Nothing changed, and the server still serves.
  const v1::PullRowsResponse after = Snapshot();
  EXPECT_EQ(after.SerializeAsString(), before.SerializeAsString());
  EXPECT_EQ(RowsCreated(), created);
  std::vector<TableSpec> tables = store_->ListTables();
  ASSERT_EQ(tables.size(), 1u);
  EXPECT_EQ(tables[0].name, "emb");
}

// What a sync worker (ps-train --mode sync) hears from an async server,
// and an async worker from a sync one: PushRequest.mode against
// ServerOptions::sync, checked before anything is applied or recorded.
constexpr char kSyncPushToAsyncServer[] =
    "ps-server runs --sync_mode=async but this worker pushes synchronously "
    "(ps-train --mode sync, or push_to_every_server): start every ps-server "
    "with --sync_mode=sync, or run ps-train with --mode async; table 'emb': "
    "push refused, nothing applied";
constexpr char kAsyncPushToSyncServer[] =
    "ps-server runs --sync_mode=sync but this worker pushes "
    "asynchronously (ps-train --mode async, or no push_to_every_server): "
    "start every ps-server with --sync_mode=async, or run ps-train with "
    "--mode sync and --store scheduler:HOST:PORT; table 'emb': push "
    "refused, nothing applied";

absl::StatusOr<std::unique_ptr<RemoteClient>> Worker(const PsServer& server,
                                                     bool sync, int rank) {
  RemoteClientOptions options;
  PSDB_ASSIGN_OR_RETURN(options.cluster,
                        ClusterMap::FromAddresses({server.address()}));
  options.push_to_every_server = sync;
  options.worker_id = rank;
  return RemoteClient::Open(options);
}

// A sync worker against an async server (the servers were started without
// --sync_mode=sync): refused at its first push, whether the push has keys
// for the server or is the empty one a sync worker sends a server that
// owns none of its keys (which failed with "empty batch" before).
TEST_F(ServerTest, SyncPushToAnAsyncServerIsRefusedAndChangesNothing) {
  const v1::PullRowsResponse before = Snapshot();
  ASSERT_OK_AND_ASSIGN(auto worker, Worker(*server_, /*sync=*/true, 0));
  PushOptions push;
  push.step = 1;
  const absl::Status refused =
      worker->Push("emb", {1, 2, 3}, std::vector<float>(3 * kDim, 0.5f), push);
  EXPECT_THAT(refused, StatusIs(absl::StatusCode::kFailedPrecondition));
  EXPECT_EQ(refused.message(), absl::StrCat("server ", server_->address(), ": ",
                                            kSyncPushToAsyncServer));
  v1::PushRequest empty;
  empty.set_table("emb");
  empty.set_step(1);
  empty.set_mode(v1::PUSH_MODE_SYNC);
  v1::PushResponse resp;
  grpc::ClientContext ctx;
  const grpc::Status s = stub_->Push(&ctx, empty, &resp);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_EQ(s.error_message(), kSyncPushToAsyncServer);

  EXPECT_EQ(Snapshot().SerializeAsString(), before.SerializeAsString());
  EXPECT_EQ(store_->Stats().tables.at(0).step, 0);
  // The modes agreeing, the same push is applied: async, or old-style (a
  // client from before PushRequest.mode).
  ASSERT_OK_AND_ASSIGN(auto async_worker, Worker(*server_, false, 0));
  ASSERT_OK(
      async_worker->Push("emb", {1}, std::vector<float>(kDim, 0.5f), push));
  EXPECT_EQ(store_->Stats().tables.at(0).step, 1);
}

// An async worker against a sync server: refused, and nothing recorded
// either: the step the refused push named then completes with a push of
// each worker (one old-style, one from a sync client), applied once as the
// mean of the two.
TEST(SyncServerTest, AsyncPushIsRefusedAndRecordsNothing) {
  ScratchDir dir;
  ASSERT_OK_AND_ASSIGN(auto store, Store::Open({}, dir.Sub("db")));
  const TableSpec spec = AdagradTable("emb");
  ASSERT_OK(store->CreateTable(spec));
  ServerOptions options;
  options.num_threads = 2;
  options.sync.num_workers = 2;
  ASSERT_OK_AND_ASSIGN(auto server, PsServer::Start(options, store.get()));
  RowBatch before;
  ASSERT_OK(store->PullRows("emb", {1, 2}, &before));

  ASSERT_OK_AND_ASSIGN(auto async_worker, Worker(*server, /*sync=*/false, 0));
  PushOptions push;
  push.step = 1;
  const absl::Status refused = async_worker->Push(
      "emb", {1, 2}, std::vector<float>(2 * kDim, 0.5f), push);
  EXPECT_THAT(refused, StatusIs(absl::StatusCode::kFailedPrecondition));
  EXPECT_EQ(refused.message(), absl::StrCat("server ", server->address(), ": ",
                                            kAsyncPushToSyncServer));
  RowBatch after;
  ASSERT_OK(store->PullRows("emb", {1, 2}, &after));
  EXPECT_EQ(after.values, before.values);
  EXPECT_EQ(after.state, before.state);
  EXPECT_EQ(store->Stats().tables.at(0).step, 0);

  // Step 1, the modes agreeing: worker 0 old-style (no mode) on key 1,
  // worker 1 from a sync client on key 2. Had the refused push been
  // recorded as worker 0's, its push would be "already pushed".
  auto stub = v1::ParameterService::NewStub(grpc::CreateChannel(
      server->address(), grpc::InsecureChannelCredentials()));
  v1::PushRequest old_style;
  old_style.set_cluster_epoch(1);  // a round is (step, epoch): the client's
  old_style.set_table("emb");
  old_style.add_keys(1);
  old_style.set_grads(Floats({1, 2, 3, 4}));
  old_style.set_step(1);
  old_style.set_worker_id(0);
  v1::PushResponse resp;
  grpc::ClientContext ctx;
  const grpc::Status s = stub->Push(&ctx, old_style, &resp);
  ASSERT_TRUE(s.ok()) << s.error_message();
  ASSERT_OK_AND_ASSIGN(auto sync_worker, Worker(*server, /*sync=*/true, 1));
  ASSERT_OK(sync_worker->Push("emb", {2}, {-4, 2, 0, 6}, push));
  // Each key: its one worker's gradient over 2 workers, applied once.
  RowBatch expected = before;
  const std::vector<std::vector<float>> grads = {{0.5f, 1, 1.5f, 2},
                                                 {-2, 1, 0, 3}};
  for (int i = 0; i < 2; ++i) {
    optim::Apply(spec.optimizer,
                 absl::MakeSpan(expected.values).subspan(i * kDim, kDim),
                 absl::MakeSpan(expected.state)
                     .subspan(i * expected.state_size, expected.state_size),
                 grads[i], /*step=*/1);
  }
  ASSERT_OK(store->PullRows("emb", {1, 2}, &after));
  EXPECT_EQ(after.values, expected.values);
  EXPECT_EQ(after.state, expected.state);
  EXPECT_EQ(store->Stats().tables.at(0).step, 1);
  server->Shutdown(absl::Seconds(5));
}

TEST_F(ServerTest, ExpiredDeadlineIsDeadlineExceeded) {
  v1::PullRequest req;
  req.set_table("emb");
  req.add_keys(1);
  v1::PullResponse resp;
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() -
                   std::chrono::milliseconds(1));
  EXPECT_EQ(stub_->Pull(&ctx, req, &resp).error_code(),
            grpc::StatusCode::DEADLINE_EXCEEDED);
}

TEST_F(ServerTest, HealthServiceReportsServing) {
  ASSERT_OK_AND_ASSIGN(const int health, testing::HealthCheck(channel_));
  EXPECT_EQ(health, 1);  // SERVING
}

TEST(ServerRoutingTest, ForeignKeysAndStaleEpochsAreFailedPrecondition) {
  ScratchDir dir;
  ASSERT_OK_AND_ASSIGN(auto store, Store::Open({}, dir.Sub("db")));
  ASSERT_OK(store->CreateTable(AdagradTable("emb")));
  ServerOptions options;
  ASSERT_OK_AND_ASSIGN(
      options.cluster,
      ClusterMap::FromAddresses({"127.0.0.1:1", "127.0.0.1:2"}, /*epoch=*/3));
  options.shard_id = 0;
  options.num_threads = 1;
  ASSERT_OK_AND_ASSIGN(auto server, PsServer::Start(options, store.get()));
  auto stub = v1::ParameterService::NewStub(grpc::CreateChannel(
      server->address(), grpc::InsecureChannelCredentials()));
  uint64_t mine = 0, theirs = 0;
  while (options.cluster.Owner(mine) != 0) ++mine;
  while (options.cluster.Owner(theirs) != 1) ++theirs;

  v1::PullRequest req;
  req.set_cluster_epoch(3);
  req.set_table("emb");
  req.add_keys(mine);
  v1::PullResponse resp;
  {
    grpc::ClientContext ctx;
    EXPECT_TRUE(stub->Pull(&ctx, req, &resp).ok());
  }
  req.add_keys(theirs);
  {
    grpc::ClientContext ctx;
    const grpc::Status s = stub->Pull(&ctx, req, &resp);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
    EXPECT_NE(s.error_message().find("server epoch 3"), std::string::npos)
        << s.error_message();
    const auto& trailers = ctx.GetServerTrailingMetadata();
    auto it = trailers.find(kServerEpochMetadataKey);
    ASSERT_NE(it, trailers.end());
    EXPECT_EQ(std::string(it->second.data(), it->second.size()), "3");
  }
  req.clear_keys();
  req.add_keys(mine);
  req.set_cluster_epoch(2);
  {
    grpc::ClientContext ctx;
    EXPECT_EQ(stub->Pull(&ctx, req, &resp).error_code(),
              grpc::StatusCode::FAILED_PRECONDITION);
  }
  server->Shutdown(absl::Seconds(5));
}

TEST(ServerStartTest, RefusesPlaintextOffLoopbackAndBadOptions) {
  ScratchDir dir;
  ASSERT_OK_AND_ASSIGN(auto store, Store::Open({}, dir.Sub("db")));
  ServerOptions options;
  options.host = "0.0.0.0";
  EXPECT_THAT(PsServer::Start(options, store.get()),
              StatusIs(absl::StatusCode::kFailedPrecondition));
  options.host = "127.0.0.1";
  ASSERT_OK_AND_ASSIGN(options.cluster,
                       ClusterMap::FromAddresses({"127.0.0.1:1"}));
  options.shard_id = 1;
  EXPECT_THAT(PsServer::Start(options, store.get()),
              StatusIs(absl::StatusCode::kInvalidArgument));
}

// A second server on a port one already serves does not start (gRPC would
// otherwise share the port, and the kernel split the connections between
// the two); the first goes on serving.
TEST(ServerStartTest, APortAnotherServerListensOnIsRefusedNotShared) {
  ScratchDir dir;
  ASSERT_OK_AND_ASSIGN(auto first_store, Store::Open({}, dir.Sub("a")));
  ASSERT_OK_AND_ASSIGN(auto second_store, Store::Open({}, dir.Sub("b")));
  ASSERT_OK_AND_ASSIGN(auto first, PsServer::Start({}, first_store.get()));
  ServerOptions options;
  options.port = first->port();
  auto second = PsServer::Start(options, second_store.get());
  EXPECT_THAT(second, StatusIs(absl::StatusCode::kUnavailable));
  EXPECT_THAT(second.status().message(),
              HasSubstr(absl::StrCat("cannot listen on 127.0.0.1:",
                                     first->port(), " (address in use")));
  RemoteClientOptions client_options;
  ASSERT_OK_AND_ASSIGN(client_options.cluster,
                       ClusterMap::FromAddresses({first->address()}));
  ASSERT_OK_AND_ASSIGN(auto client, RemoteClient::Open(client_options));
  EXPECT_OK(client->CreateTable(AdagradTable("emb")));
  first->Shutdown(absl::Seconds(5));
}

}  // namespace
}  // namespace psdb::rpc

namespace psdb::rpc {
namespace {

// A client routing with a stale map (one server, epoch 1) is told
// FAILED_PRECONDITION, fetches the current map (two servers, epoch 2) from
// its map_source and re-routes the pull.
TEST(MapRefreshTest, StaleClientRefreshesItsMapAndRetries) {
  ScratchDir dir;
  std::vector<std::unique_ptr<Store>> stores;
  std::vector<std::unique_ptr<PsServer>> servers;
  for (int i = 0; i < 2; ++i) {
    ASSERT_OK_AND_ASSIGN(auto store,
                         Store::Open({}, dir.Sub(absl::StrCat("db", i))));
    ServerOptions options;
    // Servers use the map for ownership and their rank only.
    ASSERT_OK_AND_ASSIGN(
        options.cluster,
        ClusterMap::FromAddresses({"unused:1", "unused:2"}, /*epoch=*/2));
    options.shard_id = i;
    options.num_threads = 1;
    ASSERT_OK_AND_ASSIGN(auto server, PsServer::Start(options, store.get()));
    stores.push_back(std::move(store));
    servers.push_back(std::move(server));
  }
  ASSERT_OK_AND_ASSIGN(
      const ClusterMap current,
      ClusterMap::FromAddresses({servers[0]->address(), servers[1]->address()},
                                /*epoch=*/2));
  int refreshes = 0;
  RemoteClientOptions options;
  ASSERT_OK_AND_ASSIGN(options.cluster,
                       ClusterMap::FromAddresses({servers[0]->address()}));
  options.map_source = [&]() -> absl::StatusOr<ClusterMap> {
    ++refreshes;
    return current;
  };
  ASSERT_OK_AND_ASSIGN(auto client, RemoteClient::Open(options));
  const TableSpec spec = AdagradTable("emb");
  ASSERT_OK(client->CreateTable(spec));  // stale epoch: refresh, then all
  EXPECT_EQ(refreshes, 1);
  EXPECT_EQ(client->epoch(), 2u);
  std::vector<uint64_t> keys(64);
  for (uint64_t k = 0; k < keys.size(); ++k) keys[k] = k;
  std::vector<float> out(keys.size() * kDim);
  ASSERT_OK(client->Pull("emb", keys, absl::MakeSpan(out), {}));
  for (size_t i = 0; i < keys.size(); ++i) {
    std::vector<float> expected(kDim);
    InitializeRow(spec, keys[i], absl::MakeSpan(expected));
    EXPECT_EQ(0, std::memcmp(out.data() + i * kDim, expected.data(),
                             kDim * sizeof(float)));
  }
  // Both servers got their keys (and only theirs: the servers check).
  uint64_t on_second = 0;
  for (uint64_t k : keys) on_second += current.Owner(k) == 1;
  ASSERT_GT(on_second, 0u);
  EXPECT_EQ(stores[1]->Stats().tables.at(0).created, on_second);
  EXPECT_EQ(stores[0]->Stats().tables.at(0).created, keys.size() - on_second);
  for (auto& server : servers) server->Shutdown(absl::Seconds(5));
}

}  // namespace
}  // namespace psdb::rpc
