// quickstart: psdb's first page. Opens an embedded store, creates an
// embedding table, pulls rows, pushes gradients, pulls again, writes a
// checkpoint and reads its manifest back.
//
//   build/examples/quickstart [DIR]     (default: a fresh directory in /tmp)
//
// Everything here is the in-process API (store/store.h); a cluster uses the
// same calls through a ParameterClient (store/parameter_client.h).
#include <stdlib.h>

#include <cstdint>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/types/span.h"
#include "store/manifest.h"
#include "store/store.h"
#include "store/table_spec.h"
#include "util/status_macros.h"

namespace {

// Prints each key's row, e.g. "  key 42: [ 0.0123 -0.0411 ...]".
void PrintRows(absl::string_view title, const std::vector<uint64_t>& keys,
               const std::vector<float>& rows, int dim) {
  std::cout << title << "\n";
  for (size_t i = 0; i < keys.size(); ++i) {
    std::string line = absl::StrFormat("  key %-8d [", keys[i]);
    for (int j = 0; j < dim; ++j) {
      absl::StrAppendFormat(&line, "%8.4f", rows[i * dim + j]);
    }
    std::cout << line << " ]\n";
  }
}

absl::Status Run(const std::string& dir) {
  // 1. Open a store under `dir`. Hot rows live in memory up to the budget;
  //    the rest live in RocksDB under dir/db. Open returns a status, never
  //    a half-built store.
  psdb::StoreOptions options;
  options.memory_budget_bytes = 64ull << 20;  // 64 MiB
  PSDB_ASSIGN_OR_RETURN(std::unique_ptr<psdb::Store> store,
                        psdb::Store::Open(options, dir));

  // 2. A table of 8-float embeddings trained with Adagrad. Rows are created
  //    on first sight with a deterministic initial vector (a function of
  //    the table seed and the key), so any server computes the same one.
  psdb::TableSpec spec;
  spec.name = "user_emb";
  spec.dim = 8;
  spec.optimizer.kind = psdb::optim::OptimizerKind::kAdagrad;
  spec.optimizer.learning_rate = 0.1f;
  PSDB_RETURN_IF_ERROR(store->CreateTable(spec));

  // 3. Pull: one row of `dim` floats per key, in the order asked.
  const std::vector<uint64_t> keys = {42, 7, 1000003};
  std::vector<float> rows(keys.size() * spec.dim);
  PSDB_RETURN_IF_ERROR(store->Pull(spec.name, keys, absl::MakeSpan(rows)));
  PrintRows("pulled (initial values):", keys, rows, spec.dim);

  // 4. Push gradients, one row per key; the table's optimizer (Adagrad)
  //    applies them. Duplicate keys in a push would be summed first.
  std::vector<float> grads(keys.size() * spec.dim, 0.5f);
  PSDB_RETURN_IF_ERROR(store->Push(spec.name, keys, grads));

  // 5. Pull again. Adagrad: acc = 0.1 (initial) + g^2 = 0.35, so every value
  //    moved by -lr * g / sqrt(acc) = -0.1 * 0.5 / 0.5916 = -0.0845.
  PSDB_RETURN_IF_ERROR(store->Pull(spec.name, keys, absl::MakeSpan(rows)));
  PrintRows("pulled after one push:", keys, rows, spec.dim);

  // 6. Checkpoint: dirty rows reach RocksDB, the files are hard-linked into
  //    dir/checkpoint/ckpt-<step>-<seq>/, and MANIFEST.json is written last.
  PSDB_ASSIGN_OR_RETURN(psdb::CheckpointInfo ckpt,
                        store->Checkpoint(dir + "/checkpoint"));
  std::cout << "\ncheckpoint written to " << ckpt.path << "\n\n";

  // 7. Read its manifest back (store/manifest.h): the tables with their
  //    full specs and row counts. `ps-dump info DIR/checkpoint` prints more.
  PSDB_ASSIGN_OR_RETURN(psdb::v1::Manifest manifest,
                        psdb::ReadManifest(ckpt.path));
  std::cout << "manifest of " << manifest.checkpoint_id() << ": step "
            << manifest.step() << "\n";
  for (const psdb::v1::TableManifest& table : manifest.tables()) {
    std::cout << absl::StrFormat("  table %s: dim %d, %s, %d rows\n",
                                 table.spec().name(), table.spec().dim(),
                                 table.spec().optimizer().kind(), table.rows());
  }
  return absl::OkStatus();
}

}  // namespace

int main(int argc, char** argv) {
  if (argc > 2) {
    std::cerr << "usage: quickstart [DIR]\n";
    return 2;
  }
  std::string dir;
  if (argc == 2) {
    dir = argv[1];
  } else {
    std::string tmpl = "/tmp/psdb-quickstart-XXXXXX";
    if (mkdtemp(tmpl.data()) == nullptr) {
      std::cerr << "quickstart: cannot create a directory in /tmp\n";
      return 1;
    }
    dir = tmpl;
  }
  std::cout << "psdb quickstart in " << dir << "\n\n";
  const absl::Status status = Run(dir);
  if (!status.ok()) {
    std::cerr << "quickstart: " << status << "\n";
    return 1;
  }
  std::cout << "\nnext: build/tools/ps-dump info " << dir
            << "/checkpoint\n      build/tools/ps-dump export --table=user_emb "
            << dir << "/checkpoint\n";
  return 0;
}
