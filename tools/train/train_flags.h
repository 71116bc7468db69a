// ps-train's training flags checked and turned into TrainerOptions (and
// the worker cache's flags, decided once the world size is known). The
// usage is tools/train/train_cli.h's; the run (train_cli.cc) checks the
// flags that depend on the store URL. Internal to psdb_train_cli.
//
// Thread-safety: stateless functions (ParseTrainOptions reads PSDB_URL).
#ifndef PSDB_TOOLS_TRAIN_TRAIN_FLAGS_H_
#define PSDB_TOOLS_TRAIN_TRAIN_FLAGS_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "tools/common/args.h"
#include "train/trainer.h"
#include "train/wide_deep.h"

namespace psdb::train::cli {

// The worker cache's flags as given; RunTrainCommand checks the names.
struct CacheFlags {
  int64_t rows = 0;         // 0: no worker cache
  bool rows_given = false;  // --cache_rows given
  std::string policy;
  std::string mode;  // "" until CacheModeFor decides it
  std::string backend;
  int64_t staleness = 0;  // --cache_staleness: push_through only
};

// A batch and its prefetched successor must fit the cache.
absl::Status CacheFitsTwoBatches(int64_t rows, int batch_size);

// The cache for `world` workers. One worker: --cache_rows (default 2^18),
// --cache_mode (default write_back). 2+ workers: no cache unless
// --cache_rows is given, and then push_through. A write-back cache is
// exact only as its rows' one writer: with several workers each would
// train its own copy of a row and write the whole row back over the
// others' updates, so an explicit write_back with 2+ workers is refused.
// And a push-through cache serves nothing across workers' steps (any row
// may have been pushed by another worker since its fetch, so with
// max_staleness 0 it re-reads every row): it only costs (0.77x the
// samples/s of no cache in a sync cluster, docs/benchmarks/train.md), unless
// --cache_staleness lets it serve rows a few steps old. A cache kept must
// fit two batches of `batch_size`.
absl::Status CacheModeFor(int world, int batch_size, CacheFlags* flags);

// The wide part's FTRL: DefaultWideFtrl(model->kind) at the per-example
// scale of updates averaging `examples` examples (SetWideFtrlProximal,
// train/wide_deep.h), then whichever --wide_* FTRL flags are given.
absl::Status SetWideFtrlFromFlags(const tools::Args& args, int64_t examples,
                                  WideDeepConfig* model);

// Checks every training flag name and turns the flags into *o (the model,
// the optimizers, sharding, the run's cadence), *cache_flags, *store (the
// URL: --store, else $PSDB_URL, else local:CDIR/store) and
// *memory_budget_mb. An error names the first bad flag (a usage error).
absl::Status ParseTrainOptions(const tools::Args& args, TrainerOptions* o,
                               CacheFlags* cache_flags, std::string* store,
                               int64_t* memory_budget_mb);

}  // namespace psdb::train::cli

#endif  // PSDB_TOOLS_TRAIN_TRAIN_FLAGS_H_
