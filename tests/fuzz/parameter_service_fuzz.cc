// libFuzzer target: every ParameterService handler (rpc/server/server.h)
// fed arbitrary request bytes, in-process: a real Store on a scratch
// directory behind a real PsServer in this process, called through a gRPC
// channel over loopback TCP (the whole service path, validation and status
// mapping included; the server's handlers take no ServerContext-less call).
// Loopback measured faster here than PsServer::InProcessChannel, which
// PSDB_FUZZ_TRANSPORT=inprocess selects.
//
// Input: a sequence of up to 4 framed requests (tests/fuzz/fuzz_util.h):
// the first byte of each picks the handler (modulo 11: Pull, Push,
// PullRows, PutRows, CreateTable, DropTable, ListTables, Checkpoint, Stats,
// Reshard, Migrate), the bytes after its length are parsed as that
// handler's request message (unparsable: skipped). Checkpoint paths are
// kept inside the scratch directory (the working directory is moved there;
// absolute paths are re-rooted under it).
//
// Every input starts from the same store: tables "emb" and "wide"
// (tests/fuzz/small_checkpoint.h) holding 16 rows each. Invariants, after
// each request:
//  - the server answers (no crash, no hang past the deadline);
//  - a request that fails changed no table and no row (a fingerprint of
//    every table's spec and every row's values, state and header, read
//    with ScanKeys + ReadRows, is the same before and after);
//  - after one that succeeds the store is consistent: every row has its
//    table's dim and state size and only finite values and state (what a
//    checkpoint must hold to verify), a Pull answers keys * dim floats,
//    a created table exists with the spec asked for, a dropped one is gone.
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "google/protobuf/stubs/logging.h"
#include "grpcpp/grpcpp.h"
#include "manifest/manifest.h"
#include "psdb/store.h"
#include "rpc/server/server.h"
#include "rpc/wire/psdb.grpc.pb.h"
#include "tests/fuzz/fuzz_util.h"
#include "tests/fuzz/small_checkpoint.h"

namespace {

using psdb::Store;
using psdb::TableSpec;
namespace v1 = psdb::v1;

constexpr int kHandlers = 11;
constexpr size_t kMaxRequests = 4;
constexpr size_t kBaselineRows = 16;

uint64_t BaselineKey(size_t i) { return 1000003 * (i + 1); }

// Every table's spec and rows, in a canonical byte string.
std::string Fingerprint(Store& store) {
  std::string out;
  std::vector<TableSpec> tables = store.ListTables();
  std::sort(
      tables.begin(), tables.end(),
      [](const TableSpec& a, const TableSpec& b) { return a.name < b.name; });
  for (const TableSpec& spec : tables) {
    absl::StrAppend(&out, psdb::TableSpecToJson(spec), "\n");
    std::vector<uint64_t> keys;
    const absl::Status scan =
        store.ScanKeys(spec.name, 4096, [&](absl::Span<const uint64_t> batch) {
          keys.insert(keys.end(), batch.begin(), batch.end());
          return absl::OkStatus();
        });
    PSDB_FUZZ_CHECK(scan.ok(), scan.ToString());
    std::sort(keys.begin(), keys.end());
    PSDB_FUZZ_CHECK(std::adjacent_find(keys.begin(), keys.end()) == keys.end(),
                    "ScanKeys gave a key twice in table " + spec.name);
    if (keys.empty()) continue;
    psdb::RowBatch rows;
    std::vector<uint8_t> present;
    const absl::Status read = store.ReadRows(spec.name, keys, &rows, &present);
    PSDB_FUZZ_CHECK(read.ok(), read.ToString());
    for (size_t i = 0; i < keys.size(); ++i) {
      PSDB_FUZZ_CHECK(present[i] == 1, "a scanned key has no row");
      absl::StrAppend(&out, keys[i], ":", rows.headers[i].last_update_step, ",",
                      rows.headers[i].update_count, ",",
                      rows.headers[i].frequency, ":");
      out.append(
          reinterpret_cast<const char*>(rows.values.data() + i * rows.dim),
          sizeof(float) * rows.dim);
      out.append(reinterpret_cast<const char*>(rows.state.data() +
                                               i * rows.state_size),
                 sizeof(float) * rows.state_size);
    }
  }
  return out;
}

// After a successful request: every row of every table has its table's
// shape and finite numbers.
void CheckConsistent(Store& store) {
  for (const TableSpec& spec : store.ListTables()) {
    std::vector<uint64_t> keys;
    PSDB_FUZZ_CHECK(store
                        .ScanKeys(spec.name, 4096,
                                  [&](absl::Span<const uint64_t> batch) {
                                    keys.insert(keys.end(), batch.begin(),
                                                batch.end());
                                    return absl::OkStatus();
                                  })
                        .ok(),
                    "scan");
    if (keys.empty()) continue;
    psdb::RowBatch rows;
    std::vector<uint8_t> present;
    PSDB_FUZZ_CHECK(store.ReadRows(spec.name, keys, &rows, &present).ok(),
                    "read rows");
    PSDB_FUZZ_CHECK(rows.dim == spec.dim && rows.size() == keys.size(),
                    "row shape of table " + spec.name);
    for (float v : rows.values) {
      PSDB_FUZZ_CHECK(std::isfinite(v),
                      "a non-finite value stored in table " + spec.name);
    }
    for (float v : rows.state) {
      PSDB_FUZZ_CHECK(
          std::isfinite(v),
          "a non-finite optimizer state stored in table " + spec.name);
    }
  }
}

class Fixture {
 public:
  Fixture() {
    const std::string& scratch = psdb::fuzz::FuzzScratchDir();
    // Relative checkpoint paths land here.
    cwd_ = absl::StrCat(scratch, "/cwd");
    std::filesystem::create_directories(cwd_);
    if (chdir(cwd_.c_str()) != 0) std::abort();
    psdb::StoreOptions options;
    options.memory_budget_bytes = 4 << 20;
    options.rocksdb_block_cache_bytes = 1 << 20;
    options.max_batch_keys = 256;
    auto store = Store::Open(options, absl::StrCat(scratch, "/store"));
    Check(store.status());
    store_ = *std::move(store);
    for (const TableSpec& spec : psdb::fuzz::SmallTables()) {
      Check(store_->CreateTable(spec));
      std::vector<uint64_t> keys;
      for (size_t i = 0; i < kBaselineRows; ++i) keys.push_back(BaselineKey(i));
      std::vector<float> out(keys.size() * spec.dim);
      Check(store_->Pull(spec.name, keys, absl::MakeSpan(out)));
      psdb::RowBatch rows;
      std::vector<uint8_t> present;
      Check(store_->ReadRows(spec.name, keys, &rows, &present));
      baseline_.push_back({spec, keys, rows});
    }
    baseline_fingerprint_ = Fingerprint(*store_);
    StartServer();
  }

  Store& store() { return *store_; }
  v1::ParameterService::Stub& stub() { return *stub_; }
  const std::string& scratch() const { return psdb::fuzz::FuzzScratchDir(); }

  // Back to the baseline: extra tables dropped, the baseline tables' extra
  // rows deleted and their rows put back (a baseline table dropped or
  // replaced is created again: RocksDB column families are slow to make),
  // checkpoints written under the scratch directory removed, and (after
  // Reshard or Migrate) a fresh server, so no input depends on another
  // (the tables' steps aside, which only the rows' headers record).
  void Reset(bool wrote, bool restart_server) {
    if (restart_server) StartServer();
    if (wrote) {
      for (const TableSpec& spec : store_->ListTables()) {
        const bool base =
            std::any_of(baseline_.begin(), baseline_.end(),
                        [&](const Baseline& b) { return b.spec == spec; });
        if (!base) Check(store_->DropTable(spec.name));
      }
      for (const Baseline& b : baseline_) {
        if (!store_->GetTable(b.spec.name).ok()) {
          Check(store_->CreateTable(b.spec));
        }
        std::vector<uint64_t> extra;
        Check(store_->ScanKeys(
            b.spec.name, 4096, [&](absl::Span<const uint64_t> keys) {
              for (uint64_t k : keys) {
                if (!std::binary_search(b.keys.begin(), b.keys.end(), k)) {
                  extra.push_back(k);
                }
              }
              return absl::OkStatus();
            }));
        if (!extra.empty()) {
          Check(store_->DeleteRows(b.spec.name, extra).status());
        }
        Check(store_->PutRows(b.spec.name, b.keys, b.rows));
      }
      std::error_code ec;
      for (const auto& entry : std::filesystem::directory_iterator(cwd_, ec)) {
        std::filesystem::remove_all(entry.path(), ec);
      }
      std::filesystem::remove_all(absl::StrCat(scratch(), "/abs"), ec);
    }
    PSDB_FUZZ_CHECK(Fingerprint(*store_) == baseline_fingerprint_,
                    "reset did not restore the baseline");
  }

 private:
  struct Baseline {
    TableSpec spec;
    std::vector<uint64_t> keys;
    psdb::RowBatch rows;
  };

  static void Check(const absl::Status& s) {
    if (!s.ok()) {
      std::fprintf(stderr, "fixture: %s\n", s.ToString().c_str());
      std::abort();
    }
  }

  void StartServer() {
    stub_.reset();
    if (server_ != nullptr) server_->Shutdown(absl::Seconds(5));
    server_.reset();
    psdb::rpc::ServerOptions options;
    options.num_threads = 2;
    options.max_batch_keys = 256;
    options.max_dim = 64;
    auto server = psdb::rpc::PsServer::Start(options, store_.get());
    Check(server.status());
    server_ = *std::move(server);
    // Loopback TCP by default: measured at about 1.5x the executions per
    // second of gRPC's in-process transport with this callback server
    // (docs/benchmarks/fuzzing.md); PSDB_FUZZ_TRANSPORT=inprocess for the
    // other.
    const char* transport = std::getenv("PSDB_FUZZ_TRANSPORT");
    stub_ = v1::ParameterService::NewStub(
        transport != nullptr && std::string(transport) == "inprocess"
            ? server_->InProcessChannel()
            : grpc::CreateChannel(server_->address(),
                                  grpc::InsecureChannelCredentials()));
  }

  std::string cwd_;
  std::unique_ptr<Store> store_;
  std::vector<Baseline> baseline_;
  std::string baseline_fingerprint_;
  std::unique_ptr<psdb::rpc::PsServer> server_;
  std::unique_ptr<v1::ParameterService::Stub> stub_;
};

Fixture& TheFixture() {
  static Fixture* fixture = new Fixture;
  return *fixture;
}

// Keeps a checkpoint path from the network inside the scratch directory.
std::string Confine(const std::string& path, const std::string& scratch) {
  if (path.empty() || path[0] != '/') return path;
  return absl::StrCat(scratch, "/abs", path);
}

struct Outcome {
  bool parsed = false;
  grpc::Status status;
  bool writes = true;  // may change the store when it succeeds
};

template <typename Req, typename Resp, typename Call>
Outcome Invoke(
    absl::string_view bytes, Call call,
    const std::function<void(Req&)>& adjust = nullptr,
    const std::function<void(const Req&, const Resp&)>& after = nullptr) {
  Outcome o;
  Req req;
  if (!req.ParseFromArray(bytes.data(), static_cast<int>(bytes.size()))) {
    return o;
  }
  if (adjust) adjust(req);
  o.parsed = true;
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(20));
  Resp resp;
  o.status = call(&ctx, req, &resp);
  if (o.status.ok() && after) after(req, resp);
  return o;
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  // Requests with invalid UTF-8 in string fields are refused by the parser,
  // which logs each: silence it, the fuzzer sends thousands.
  google::protobuf::SetLogHandler(nullptr);
  TheFixture();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  Fixture& f = TheFixture();
  auto& stub = f.stub();
  const std::string scratch = f.scratch();
  bool wrote = false;
  bool restart = false;
  for (const psdb::fuzz::FramedRequest& r :
       psdb::fuzz::SplitRequests(data, size, kMaxRequests)) {
    const std::string before = Fingerprint(f.store());
    Outcome o;
    switch (r.handler % kHandlers) {
      case 0:
        o = Invoke<v1::PullRequest, v1::PullResponse>(
            r.bytes,
            [&](auto* c, auto& q, auto* p) { return stub.Pull(c, q, p); },
            nullptr,
            [&](const v1::PullRequest& q, const v1::PullResponse& p) {
              PSDB_FUZZ_CHECK(
                  p.values().size() ==
                      static_cast<size_t>(q.keys_size()) * p.dim() * 4,
                  "pull answered the wrong number of bytes");
            });
        break;
      case 1:
        o = Invoke<v1::PushRequest, v1::PushResponse>(
            r.bytes,
            [&](auto* c, auto& q, auto* p) { return stub.Push(c, q, p); });
        break;
      case 2:
        o = Invoke<v1::PullRowsRequest, v1::PullRowsResponse>(
            r.bytes,
            [&](auto* c, auto& q, auto* p) { return stub.PullRows(c, q, p); });
        break;
      case 3:
        o = Invoke<v1::PutRowsRequest, v1::PutRowsResponse>(
            r.bytes,
            [&](auto* c, auto& q, auto* p) { return stub.PutRows(c, q, p); });
        break;
      case 4:
        o = Invoke<v1::CreateTableRequest, v1::CreateTableResponse>(
            r.bytes,
            [&](auto* c, auto& q, auto* p) {
              return stub.CreateTable(c, q, p);
            },
            nullptr,
            [&](const v1::CreateTableRequest& q,
                const v1::CreateTableResponse&) {
              auto spec = psdb::TableSpecFromProto(q.spec());
              auto got = f.store().GetTable(q.spec().name());
              PSDB_FUZZ_CHECK(spec.ok() && got.ok() && *got == *spec,
                              "created table differs from its request");
            });
        break;
      case 5:
        o = Invoke<v1::DropTableRequest, v1::DropTableResponse>(
            r.bytes,
            [&](auto* c, auto& q, auto* p) { return stub.DropTable(c, q, p); },
            nullptr,
            [&](const v1::DropTableRequest& q, const v1::DropTableResponse&) {
              PSDB_FUZZ_CHECK(!f.store().GetTable(q.name()).ok(),
                              "a dropped table is still there");
            });
        break;
      case 6:
        o = Invoke<v1::ListTablesRequest, v1::ListTablesResponse>(
            r.bytes,
            [&](auto* c, auto& q, auto* p) { return stub.ListTables(c, q, p); },
            nullptr,
            [&](const v1::ListTablesRequest&, const v1::ListTablesResponse& p) {
              PSDB_FUZZ_CHECK(static_cast<size_t>(p.tables_size()) ==
                                  f.store().ListTables().size(),
                              "ListTables count");
            });
        o.writes = false;
        break;
      case 7:
        o = Invoke<v1::CheckpointRequest, v1::CheckpointResponse>(
            r.bytes,
            [&](auto* c, auto& q, auto* p) { return stub.Checkpoint(c, q, p); },
            [&](v1::CheckpointRequest& q) {
              q.set_root_dir(Confine(q.root_dir(), scratch));
              q.set_shard_dir(Confine(q.shard_dir(), scratch));
            });
        break;
      case 8:
        o = Invoke<v1::StatsRequest, v1::StatsResponse>(
            r.bytes,
            [&](auto* c, auto& q, auto* p) { return stub.Stats(c, q, p); });
        o.writes = false;
        break;
      case 9:
        o = Invoke<v1::ReshardRequest, v1::ReshardResponse>(
            r.bytes,
            [&](auto* c, auto& q, auto* p) { return stub.Reshard(c, q, p); });
        if (o.parsed) restart = true;
        break;
      case 10:
        o = Invoke<v1::MigrateRequest, v1::MigrateResponse>(
            r.bytes,
            [&](auto* c, auto& q, auto* p) { return stub.Migrate(c, q, p); });
        if (o.parsed) restart = true;
        break;
    }
    if (!o.parsed) continue;
    PSDB_FUZZ_CHECK(
        o.status.error_code() != grpc::StatusCode::DEADLINE_EXCEEDED,
        "the server did not answer within 20 s");
    if (!o.status.ok()) {
      PSDB_FUZZ_CHECK(
          Fingerprint(f.store()) == before,
          absl::StrCat("a failed request (handler ", r.handler % kHandlers,
                       ": ", o.status.error_message(), ") changed the store"));
      continue;
    }
    wrote = wrote || o.writes;
    CheckConsistent(f.store());
  }
  f.Reset(wrote, restart);
  return 0;
}
