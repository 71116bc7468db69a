// Issue 16's and issue 34's disk-full reports, scaled to test time, against a
// real ps-server process on a real small tmpfs: a server with a 2 MiB memory
// budget is sent pushes of new dim-256 rows until the disk is full. Pushes
// that need eviction then fail with RESOURCE_EXHAUSTED naming the table,
// the memory tier stays within its bound, pushes resume without a restart
// once space returns, SIGTERM exits 0 with everything flushed, and a
// restarted server has every acknowledged push exactly once (SGD, learning
// rate 1, zero init: each push of gradient -1 adds exactly 1).
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "psdb/client_url.h"
#include "tests/store/store_test_util.h"
#include "tests/testing/child_process.h"
#include "tests/testing/small_tmpfs.h"
#include "tests/testing/test_util.h"

namespace psdb {
namespace {

using ::psdb::testing::MakeSpec;
using ::psdb::testing::SmallTmpfs;
using ::psdb::testing::StartPsServer;
using ::testing::HasSubstr;

constexpr int kDim = 256;
constexpr size_t kBatch = 256;
constexpr uint64_t kBudget = 2 << 20;
// dim 256, SGD: 1 KiB values + 24 B header + 24 B slot metadata.
constexpr uint64_t kSlotBytes = 1072;

std::vector<uint64_t> BatchKeys(uint64_t first) {
  std::vector<uint64_t> keys(kBatch);
  for (size_t i = 0; i < kBatch; ++i) keys[i] = first + i * 104729;
  return keys;
}

std::vector<std::string> ServerArgs(const std::string& data_dir) {
  return {absl::StrCat("--data_dir=", data_dir), "--threads=2",
          absl::StrCat("--memory_budget_mb=", kBudget >> 20)};
}

absl::StatusOr<std::unique_ptr<ParameterClient>> Connect(
    const std::string& address) {
  rpc::RemoteOptions ro;
  ro.call_timeout = absl::Seconds(30);
  return rpc::OpenParameterClient(absl::StrCat("servers:", address), ro);
}

TEST(PsServerDiskFullTest, AcknowledgedPushesSurviveAFullDiskAndRestart) {
  auto mounted = SmallTmpfs::Mount(40 << 20);
  if (absl::IsPermissionDenied(mounted.status())) {
    GTEST_SKIP() << mounted.status().message();
  }
  ASSERT_OK(mounted);
  std::unique_ptr<SmallTmpfs> fs = *std::move(mounted);
  ASSERT_OK(fs->Fill("filler", 8 << 20).status());
  const std::string data_dir = fs->Sub("data");
  std::map<uint64_t, int> counts;
  const std::vector<float> ones(kBatch * kDim, -1.0f);
  {
    ASSERT_OK_AND_ASSIGN(auto server, StartPsServer(ServerArgs(data_dir)));
    ASSERT_OK_AND_ASSIGN(auto client, Connect(server->ready_value()));
    ASSERT_OK(client->CreateTable(MakeSpec("emb", kDim)));
    uint64_t next = 1;
    // Pushes until one is refused; returns it (empty: never refused).
    auto push_until_refused = [&]() -> std::vector<uint64_t> {
      for (int b = 0; b < 400; ++b) {
        std::vector<uint64_t> keys = BatchKeys(next++);
        const absl::Status s = client->Push("emb", keys, ones, PushOptions{});
        if (!s.ok()) {
          EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted) << s;
          EXPECT_THAT(s.message(),
                      HasSubstr("table emb: memory tier full and the disk "
                                "refuses writes"));
          return keys;
        }
        for (uint64_t k : keys) ++counts[k];
      }
      return {};
    };
    std::vector<uint64_t> refused = push_until_refused();
    ASSERT_FALSE(refused.empty()) << "the disk never filled";
    ASSERT_OK_AND_ASSIGN(StoreStats stats, client->Stats());
    // The memory tier's rows stay within the budget plus the batch in
    // flight (memory_used_bytes also counts RocksDB's cache, whose memtable
    // charge may pass its share while flushes are refused).
    EXPECT_LE(stats.tables.at(0).memory_bytes, kBudget + kBatch * kSlotBytes);
    EXPECT_GT(stats.tables.at(0).disk_write_errors, 0u);
    // Space comes back: the refused push goes through, no restart (once
    // the store's rate-limited resume of RocksDB ran, if RocksDB itself
    // hit the full disk).
    ASSERT_OK(fs->Remove("filler"));
    absl::Status retried;
    ASSERT_TRUE(::psdb::testing::WaitFor(
        [&] {
          retried = client->Push("emb", refused, ones, PushOptions{});
          return retried.ok();
        },
        absl::Seconds(10)))
        << retried;
    for (uint64_t k : refused) ++counts[k];
    refused = push_until_refused();
    ASSERT_FALSE(refused.empty()) << "the disk never filled again";
    // SIGTERM on the full disk: a clean shutdown, exit 0.
    ASSERT_OK(server->Stop());
    EXPECT_THAT(server->Stderr(), HasSubstr("stopped cleanly"));
  }
  ASSERT_OK_AND_ASSIGN(auto server, StartPsServer(ServerArgs(data_dir)));
  ASSERT_OK_AND_ASSIGN(auto client, Connect(server->ready_value()));
  std::vector<uint64_t> keys;
  for (const auto& [k, n] : counts) keys.push_back(k);
  ASSERT_GT(keys.size(), 8000u);
  for (size_t b = 0; b < keys.size(); b += kBatch) {
    const std::vector<uint64_t> chunk(
        keys.begin() + b, keys.begin() + std::min(keys.size(), b + kBatch));
    std::vector<float> out(chunk.size() * kDim);
    ASSERT_OK(client->Pull("emb", chunk, absl::MakeSpan(out), PullOptions{}));
    for (size_t i = 0; i < chunk.size(); ++i) {
      ASSERT_EQ(out[i * kDim], static_cast<float>(counts[chunk[i]]))
          << "key " << chunk[i];
      ASSERT_EQ(out[i * kDim + kDim - 1], static_cast<float>(counts[chunk[i]]))
          << "key " << chunk[i];
    }
  }
  ASSERT_OK(server->Stop());
}

// Issue 34's report as a new user met it: default options, an 8 MiB budget
// on a 30 MiB disk, pushes of 2,000 new dim-256 rows until they are
// refused; then SIGTERM, space freed, a restart. The memory tier regrows
// after a refusal (its budget returns once RocksDB unpins what it yielded),
// so the room a shutdown needs is what the tier may hold, not what it held
// when the disk last had room: every acknowledged row must read back.
TEST(PsServerDiskFullTest, AShutdownOnAFullDiskWritesEveryAcknowledgedRow) {
  constexpr size_t kRows = 2000;
  auto mounted = SmallTmpfs::Mount(30 << 20);
  if (absl::IsPermissionDenied(mounted.status())) {
    GTEST_SKIP() << mounted.status().message();
  }
  ASSERT_OK(mounted);
  std::unique_ptr<SmallTmpfs> fs = *std::move(mounted);
  const std::vector<std::string> args = {
      absl::StrCat("--data_dir=", fs->Sub("data")), "--memory_budget_mb=8"};
  const std::vector<float> ones(kRows * kDim, -1.0f);
  uint64_t acked = 0;
  {
    ASSERT_OK_AND_ASSIGN(auto server, StartPsServer(args));
    ASSERT_OK_AND_ASSIGN(auto client, Connect(server->ready_value()));
    ASSERT_OK(client->CreateTable(MakeSpec("emb", kDim)));
    // Until three pushes in a row are refused (each retrying the last).
    int refusals = 0;
    while (refusals < 3) {
      ASSERT_LT(acked, 200 * kRows) << "the disk never filled";
      std::vector<uint64_t> keys(kRows);
      for (size_t i = 0; i < kRows; ++i) keys[i] = acked + i + 1;
      const absl::Status s = client->Push("emb", keys, ones, PushOptions{});
      if (s.ok()) {
        acked += kRows;
        refusals = 0;
        continue;
      }
      ASSERT_EQ(s.code(), absl::StatusCode::kResourceExhausted) << s;
      ++refusals;
    }
    // A clean exit; a failed one still goes on to count what it lost.
    EXPECT_OK(server->Stop());
    EXPECT_THAT(server->Stderr(), HasSubstr("stopped cleanly"));
  }
  ASSERT_OK(fs->Resize(200 << 20));
  ASSERT_OK_AND_ASSIGN(auto server, StartPsServer(args));
  ASSERT_OK_AND_ASSIGN(auto client, Connect(server->ready_value()));
  uint64_t lost = 0;
  for (uint64_t first = 1; first <= acked; first += kRows) {
    std::vector<uint64_t> keys(kRows);
    for (size_t i = 0; i < kRows; ++i) keys[i] = first + i;
    std::vector<float> out(kRows * kDim);
    ASSERT_OK(client->Pull("emb", keys, absl::MakeSpan(out), PullOptions{}));
    for (size_t i = 0; i < kRows; ++i) {
      lost += out[i * kDim] != 1.0f || out[i * kDim + kDim - 1] != 1.0f;
    }
  }
  EXPECT_EQ(lost, 0u) << "of " << acked << " acknowledged rows";
  ASSERT_OK(server->Stop());
}

}  // namespace
}  // namespace psdb
