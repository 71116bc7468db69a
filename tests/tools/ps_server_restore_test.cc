// ps-server --restore_from on a bad checkpoint, as a real process (issue
// 16's scenario): a checkpoint whose SST file is truncated, zeroed or
// deleted, or whose manifest miscounts a table, makes ps-server exit 1
// with "restore refused: checkpoint ... shard 0 ..." and leaves the data
// directory exactly as before the attempt; the next start with
// --restore_from a good checkpoint then restores it (before, the failed
// attempt left DATA_DIR/db behind and the next start skipped the restore).
//
// The table counts: SGD with learning rate 1 and a zero initializer, so a
// push of gradient -g adds exactly g.
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "manifest/manifest.h"
#include "psdb/client_url.h"
#include "psdb/store.h"
#include "tests/testing/child_process.h"
#include "tests/testing/test_util.h"

namespace psdb {
namespace {

namespace fs = std::filesystem;
using ::psdb::testing::ScratchDir;
using ::testing::HasSubstr;

constexpr uint64_t kRows = 64;  // keys 1..64, dim 2, row k = {k, 2k}

std::vector<std::string> Listing(const std::string& root) {
  std::error_code ec;
  if (!fs::exists(root, ec)) return {"<absent>"};
  std::vector<std::string> out;
  for (const auto& e : fs::recursive_directory_iterator(root)) {
    const std::string rel = fs::relative(e.path(), root).string();
    out.push_back(e.is_directory() ? rel + "/"
                                   : absl::StrCat(rel, " ", e.file_size()));
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::string LargestSst(const std::string& checkpoint_dir) {
  std::string best;
  uintmax_t best_size = 0;
  for (const auto& e : fs::directory_iterator(checkpoint_dir + "/shard-0")) {
    if (e.path().extension() != ".sst") continue;
    if (best.empty() || e.file_size() > best_size) {
      best = e.path().string();
      best_size = e.file_size();
    }
  }
  return best;
}

std::vector<uint64_t> Keys() {
  std::vector<uint64_t> keys;
  for (uint64_t k = 1; k <= kRows; ++k) keys.push_back(k);
  return keys;
}

TEST(PsServerRestoreTest, RefusedRestoreLeavesTheDataDirForTheNextStart) {
  ScratchDir dir;
  std::string good;
  {
    ASSERT_OK_AND_ASSIGN(auto store, Store::Open({}, dir.Sub("src")));
    TableSpec spec;
    spec.name = "emb";
    spec.dim = 2;
    spec.initializer = {InitKind::kZeros, 0.0f, 0.0f};
    spec.optimizer.kind = optim::OptimizerKind::kSgd;
    spec.optimizer.learning_rate = 1.0f;
    ASSERT_OK(store->CreateTable(spec));
    std::vector<float> grads;
    for (uint64_t k : Keys()) {
      grads.push_back(-static_cast<float>(k));
      grads.push_back(-static_cast<float>(2 * k));
    }
    ASSERT_OK(store->Push("emb", Keys(), grads));
    ASSERT_OK_AND_ASSIGN(CheckpointInfo info,
                         store->Checkpoint(dir.Sub("ckpt")));
    good = info.path;
  }

  struct Damage {
    std::string name;
    std::function<void(const std::string&)> apply;  // to a copy
    std::string message;  // after "restore refused: checkpoint <copy> "
  };
  const std::vector<Damage> damages = {
      {"truncated",
       [](const std::string& c) {
         const std::string sst = LargestSst(c);
         fs::resize_file(sst, fs::file_size(sst) / 2);
       },
       "shard 0: file '"},
      {"zeroed",
       [](const std::string& c) {
         const std::string sst = LargestSst(c);
         const uintmax_t size = fs::file_size(sst);
         std::ofstream(sst, std::ios::binary | std::ios::trunc)
             << std::string(size, '\0');
       },
       "shard 0"},
      {"deleted", [](const std::string& c) { fs::remove(LargestSst(c)); },
       "shard 0: file '"},
      {"miscounted",
       [](const std::string& c) {
         absl::StatusOr<v1::Manifest> m = ReadManifest(c);
         ASSERT_TRUE(m.ok());
         m->mutable_tables(0)->set_rows(kRows - 1);
         m->mutable_tables(0)->set_shard_rows(0, kRows - 1);
         ASSERT_TRUE(WriteManifestAtomic(c, *m).ok());
       },
       "shard 0 table 'emb': the manifest says 63 rows, the files hold 64"},
  };
  const std::string bin = testing::BuiltBinary("tools/ps-server");
  const std::string data = dir.Sub("data");
  fs::create_directories(data);
  for (const Damage& d : damages) {
    SCOPED_TRACE(d.name);
    const std::string bad = dir.Sub(d.name);
    fs::copy(good, bad, fs::copy_options::recursive);  // copies, not links
    d.apply(bad);
    const std::vector<std::string> before = Listing(data);
    const testing::ShellResult r = testing::RunShell(
        absl::StrCat("timeout 120 ", bin, " --data_dir=", data,
                     " --restore_from=", bad, " --port=0 --threads=2"));
    EXPECT_EQ(r.exit_code, 1) << r.output;
    EXPECT_THAT(r.output,
                HasSubstr(absl::StrCat("ps-server: DATA_LOSS: restore refused: "
                                       "checkpoint ",
                                       bad, " ", d.message)));
    EXPECT_EQ(Listing(data), before);
  }

  // The next start with the good checkpoint restores it: exactly its rows.
  ASSERT_OK_AND_ASSIGN(
      auto server,
      testing::StartPsServer({"--data_dir=" + data, "--restore_from=" + good,
                              "--port=0", "--threads=2"}));
  ASSERT_OK_AND_ASSIGN(auto client, rpc::OpenParameterClient(
                                        "servers:" + server->ready_value()));
  std::vector<float> got(kRows * 2);
  PullOptions serving;
  serving.serving = true;
  ASSERT_OK(client->Pull("emb", Keys(), absl::MakeSpan(got), serving));
  for (uint64_t k = 1; k <= kRows; ++k) {
    EXPECT_EQ(got[(k - 1) * 2], static_cast<float>(k)) << k;
    EXPECT_EQ(got[(k - 1) * 2 + 1], static_cast<float>(2 * k)) << k;
  }
  EXPECT_OK(server->Stop());
}

}  // namespace
}  // namespace psdb
