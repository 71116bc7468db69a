#include "tests/fuzz/small_checkpoint.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "psdb/store.h"
#include "util/status_macros.h"

namespace psdb::fuzz {

std::vector<TableSpec> SmallTables() {
  TableSpec emb;
  emb.name = "emb";
  emb.dim = 4;
  emb.optimizer.kind = optim::OptimizerKind::kAdagrad;
  emb.optimizer.learning_rate = 0.5f;
  TableSpec wide;
  wide.name = "wide";
  wide.dim = 1;
  wide.optimizer.kind = optim::OptimizerKind::kFtrl;
  wide.optimizer.learning_rate = 0.25f;
  return {emb, wide};
}

absl::StatusOr<std::string> WriteSmallCheckpoint(absl::string_view work_dir) {
  StoreOptions options;
  options.memory_budget_bytes = 2 << 20;  // rows + RocksDB's 1 MiB
  options.background_eviction = false;
  options.rocksdb_block_cache_bytes = 1 << 20;
  PSDB_ASSIGN_OR_RETURN(std::unique_ptr<Store> store,
                        Store::Open(options, absl::StrCat(work_dir, "/store")));
  for (const TableSpec& spec : SmallTables()) {
    PSDB_RETURN_IF_ERROR(store->CreateTable(spec));
    std::vector<uint64_t> keys;
    for (uint64_t k = 1; k <= 24; ++k) keys.push_back(k * 1000003);
    std::vector<float> out(keys.size() * spec.dim);
    PSDB_RETURN_IF_ERROR(store->Pull(spec.name, keys, absl::MakeSpan(out)));
    keys.resize(12);
    std::vector<float> grads(keys.size() * spec.dim);
    for (size_t i = 0; i < grads.size(); ++i) {
      grads[i] = static_cast<float>(static_cast<int>(i % 5) - 2) * 0.5f;
    }
    PSDB_RETURN_IF_ERROR(store->Push(spec.name, keys, grads));
  }
  PSDB_ASSIGN_OR_RETURN(CheckpointInfo info,
                        store->Checkpoint(absl::StrCat(work_dir, "/ckpt")));
  return info.path;
}

absl::StatusOr<std::vector<std::pair<std::string, std::string>>> ReadTree(
    absl::string_view dir) {
  namespace fs = std::filesystem;
  std::vector<std::pair<std::string, std::string>> files;
  std::error_code ec;
  for (fs::recursive_directory_iterator it(std::string(dir), ec), end;
       !ec && it != end; it.increment(ec)) {
    if (!it->is_regular_file()) continue;
    std::ifstream in(it->path(), std::ios::binary);
    std::stringstream buf;
    buf << in.rdbuf();
    if (!in) {
      return absl::DataLossError(
          absl::StrCat("cannot read ", it->path().string()));
    }
    files.emplace_back(fs::relative(it->path(), std::string(dir)).string(),
                       buf.str());
  }
  if (ec) {
    return absl::DataLossError(
        absl::StrCat("cannot list ", dir, ": ", ec.message()));
  }
  std::sort(files.begin(), files.end());
  return files;
}

}  // namespace psdb::fuzz
