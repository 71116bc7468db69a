// Helper process for store_crash_test: drives a Store through checkpoints
// and reports progress on stdout so the test can SIGKILL it at known points.
//
//   store_crash_helper <store_dir> <ckpt_root> prepare
//       table "t" (dim 4, SGD lr 1, zeros); keys 0..99 pushed with gradient 1
//       (values -1); one checkpoint; prints "OK".
//   store_crash_helper <store_dir> <ckpt_root> stop-at <stage>
//       pushes gradient 1 again (values -2) and checkpoints with keep_last 1;
//       at checkpoint stage <stage> prints "AT <stage>" and blocks forever.
//   store_crash_helper <store_dir> <ckpt_root> loop
//       creates "t", then forever: push gradient 1 to keys 0..99 and
//       checkpoint (keep_last 2), printing "CKPT <n>" after the n-th.
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "psdb/store.h"
#include "store/store_testing.h"

namespace {

std::string g_stage;

void Say(const std::string& line) {
  const std::string s = line + "\n";
  (void)!write(STDOUT_FILENO, s.data(), s.size());
}

void Hook(const char* stage) {
  if (g_stage == stage) {
    Say(std::string("AT ") + stage);
    while (true) pause();  // the test kills us here
  }
}

int Fail(const absl::Status& s) {
  std::fprintf(stderr, "helper: %s\n", s.ToString().c_str());
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 4) {
    std::fprintf(stderr, "usage: %s store_dir ckpt_root mode [stage]\n",
                 argv[0]);
    return 2;
  }
  const std::string mode = argv[3];
  psdb::StoreOptions options;
  // 1 MiB of rows + RocksDB's 1 MiB.
  options.memory_budget_bytes = 2 << 20;
  options.index_stripes = 4;
  options.rocksdb_block_cache_bytes = 1 << 20;
  auto store = psdb::Store::Open(options, argv[1]);
  if (!store.ok()) return Fail(store.status());
  psdb::TableSpec spec;
  spec.name = "t";
  spec.dim = 4;
  spec.initializer.kind = psdb::InitKind::kZeros;
  spec.optimizer.kind = psdb::optim::OptimizerKind::kSgd;
  spec.optimizer.learning_rate = 1.0f;
  if (absl::Status s = (*store)->CreateTable(spec); !s.ok()) return Fail(s);
  std::vector<uint64_t> keys(100);
  for (uint64_t k = 0; k < 100; ++k) keys[k] = k;
  const std::vector<float> ones(100 * 4, 1.0f);
  auto push = [&]() { return (*store)->Push("t", keys, ones); };

  if (mode == "prepare") {
    if (absl::Status s = push(); !s.ok()) return Fail(s);
    auto c = (*store)->Checkpoint(argv[2]);
    if (!c.ok()) return Fail(c.status());
    Say("OK");
    return 0;
  }
  if (mode == "stop-at" && argc >= 5) {
    g_stage = argv[4];
    psdb::internal::SetCheckpointHookForTesting(&Hook);
    if (absl::Status s = push(); !s.ok()) return Fail(s);
    auto c = (*store)->Checkpoint(argv[2], {.keep_last = 1});
    if (!c.ok()) return Fail(c.status());
    Say("DONE");
    return 0;
  }
  if (mode == "loop") {
    for (int n = 1;; ++n) {
      if (absl::Status s = push(); !s.ok()) return Fail(s);
      auto c = (*store)->Checkpoint(argv[2], {.keep_last = 2});
      if (!c.ok()) return Fail(c.status());
      Say("CKPT " + std::to_string(n));
    }
  }
  std::fprintf(stderr, "unknown mode %s\n", mode.c_str());
  return 2;
}
