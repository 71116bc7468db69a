// quickstart: psdb's first page. Opens an embedded store, creates an
// embedding table, pulls rows, pushes gradients, pulls again, writes a
// checkpoint and reads it back.
//
//   build/examples/quickstart [DIR]     (default: a fresh directory in /tmp)
//
// Everything here is the public API (include/psdb/): the in-process Store;
// a cluster uses the same calls through a ParameterClient
// (psdb/parameter_client.h, psdb/client_url.h).
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
#include "psdb/checkpoint_reader.h"
#include "psdb/optimizer.h"
#include "psdb/store.h"
#include "psdb/table_spec.h"

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
  absl::StatusOr<std::unique_ptr<psdb::Store>> opened =
      psdb::Store::Open(options, dir);
  if (!opened.ok()) return opened.status();
  psdb::Store& store = **opened;

  // 2. A table of 8-float embeddings trained with Adagrad. Rows are created
  //    on first sight with a deterministic initial vector (a function of
  //    the table seed and the key), so any server computes the same one.
  psdb::TableSpec spec;
  spec.name = "user_emb";
  spec.dim = 8;
  spec.optimizer.kind = psdb::optim::OptimizerKind::kAdagrad;
  spec.optimizer.learning_rate = 0.1f;
  if (absl::Status s = store.CreateTable(spec); !s.ok()) return s;

  // 3. Pull: one row of `dim` floats per key, in the order asked.
  const std::vector<uint64_t> keys = {42, 7, 1000003};
  std::vector<float> rows(keys.size() * spec.dim);
  if (absl::Status s = store.Pull(spec.name, keys, absl::MakeSpan(rows));
      !s.ok()) {
    return s;
  }
  PrintRows("pulled (initial values):", keys, rows, spec.dim);

  // 4. Push gradients, one row per key; the table's optimizer (Adagrad)
  //    applies them. Duplicate keys in a push would be summed first.
  std::vector<float> grads(keys.size() * spec.dim, 0.5f);
  if (absl::Status s = store.Push(spec.name, keys, grads); !s.ok()) return s;

  // 5. Pull again. Adagrad: acc = 0.1 (initial) + g^2 = 0.35, so every value
  //    moved by -lr * g / sqrt(acc) = -0.1 * 0.5 / 0.5916 = -0.0845.
  if (absl::Status s = store.Pull(spec.name, keys, absl::MakeSpan(rows));
      !s.ok()) {
    return s;
  }
  PrintRows("pulled after one push:", keys, rows, spec.dim);

  // 6. Checkpoint: dirty rows reach RocksDB, the files are hard-linked into
  //    dir/checkpoint/ckpt-<step>-<seq>/, and MANIFEST.json is written last.
  absl::StatusOr<psdb::CheckpointInfo> ckpt =
      store.Checkpoint(dir + "/checkpoint");
  if (!ckpt.ok()) return ckpt.status();
  std::cout << "\ncheckpoint written to " << ckpt->path << "\n\n";

  // 7. Read it back (psdb/checkpoint_reader.h), as ps-dump and serving
  //    replicas do: the tables with their full specs and row counts.
  //    `ps-dump info DIR/checkpoint` prints more.
  absl::StatusOr<std::unique_ptr<psdb::ckpt::CheckpointReader>> reader =
      psdb::ckpt::CheckpointReader::Open(ckpt->path);
  if (!reader.ok()) return reader.status();
  const std::string& path = (*reader)->dir();
  std::cout << "checkpoint " << path.substr(path.rfind('/') + 1) << ": step "
            << (*reader)->step() << "\n";
  for (const psdb::ckpt::TableInfo& table : (*reader)->tables()) {
    std::cout << absl::StrFormat(
        "  table %s: dim %d, %s, %d rows\n", table.spec.name, table.spec.dim,
        psdb::optim::KindName(table.spec.optimizer.kind), table.rows);
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
