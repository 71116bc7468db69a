// consumer: a program built outside psdb's tree against an installed psdb
// (CMakeLists.txt beside it), using only the public headers, that checks
// what it gets against values computed by hand:
//
//   1. Opens a Store in DIR/store and creates table "emb": dim 4, zeros
//      initializer, SGD with learning rate 0.25.
//   2. Pulls keys {1, 2, 1}: new rows, all zeros.
//   3. Pushes one gradient per position: key 1 gets {1, 2, 3, 4} and
//      {1, 1, 1, 1}, summed to {2, 3, 4, 5} before SGD runs once; key 2
//      gets {0.5, 0.5, 0.5, 0.5}. SGD (row -= lr * g) gives key 1
//      {-0.5, -0.75, -1, -1.25} and key 2 {-0.125, ...}; a pull must
//      return exactly these (small multiples of powers of two: float holds
//      them and the update computes them without rounding).
//   4. Writes a checkpoint into DIR/checkpoints and closes the store.
//   5. Reads the checkpoint back with psdb::ckpt::CheckpointReader: step 1,
//      table "emb" with 2 rows, each the row of step 3, updated once (the
//      duplicates were one update) at step 1.
//   6. Reopens DIR/store through psdb::rpc::OpenParameterClient("local:..."),
//      the URL a trainer would use: the table's spec and rows are back; a
//      push of {4, 4, 4, 4} to key 2 moves it to -0.125 - 0.25 * 4 = -1.125.
//
//   consumer [DIR]     (default: a fresh directory in /tmp)
//
// Prints each step; exits 0 when every value is as expected, 1 otherwise.
#include <stdlib.h>

#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "psdb/checkpoint_reader.h"
#include "psdb/client_url.h"
#include "psdb/parameter_client.h"
#include "psdb/store.h"
#include "psdb/table_spec.h"
#include "psdb/version.h"

namespace {

constexpr int kDim = 4;
constexpr char kTable[] = "emb";

psdb::TableSpec EmbSpec() {
  psdb::TableSpec spec;
  spec.name = kTable;
  spec.dim = kDim;
  spec.initializer.kind = psdb::InitKind::kZeros;
  spec.optimizer.kind = psdb::optim::OptimizerKind::kSgd;
  spec.optimizer.learning_rate = 0.25f;
  return spec;
}

// After step 3: the rows of keys 1 and 2.
const std::vector<float> kKey1 = {-0.5f, -0.75f, -1.0f, -1.25f};
const std::vector<float> kKey2 = {-0.125f, -0.125f, -0.125f, -0.125f};

std::string RowText(absl::Span<const float> row) {
  std::string text = "[";
  for (size_t j = 0; j < row.size(); ++j) {
    absl::StrAppend(&text, j == 0 ? "" : " ", row[j]);
  }
  return text + "]";
}

// Prints each key's row of `got` and compares it with the same row of
// `want` (rows of kDim floats), exactly.
absl::Status ExpectRows(absl::string_view what, absl::Span<const uint64_t> keys,
                        absl::Span<const float> got,
                        absl::Span<const float> want) {
  std::printf("%s\n", std::string(what).c_str());
  absl::Status status;
  for (size_t i = 0; i < keys.size(); ++i) {
    const auto row = got.subspan(i * kDim, kDim);
    const auto expected = want.subspan(i * kDim, kDim);
    std::printf("  key %llu %s\n", static_cast<unsigned long long>(keys[i]),
                RowText(row).c_str());
    if (status.ok() && row != expected) {
      status = absl::InternalError(absl::StrCat(what, ": key ", keys[i], " is ",
                                                RowText(row), ", expected ",
                                                RowText(expected)));
    }
  }
  return status;
}

std::vector<float> Concat(const std::vector<std::vector<float>>& rows) {
  std::vector<float> all;
  for (const auto& row : rows) all.insert(all.end(), row.begin(), row.end());
  return all;
}

// Steps 1 to 4.
absl::StatusOr<std::string> TrainAndCheckpoint(const std::string& dir) {
  absl::StatusOr<std::unique_ptr<psdb::Store>> store =
      psdb::Store::Open(psdb::StoreOptions{}, dir + "/store");
  if (!store.ok()) return store.status();
  if (absl::Status s = (*store)->CreateTable(EmbSpec()); !s.ok()) return s;

  const std::vector<uint64_t> keys = {1, 2, 1};
  std::vector<float> rows(keys.size() * kDim);
  if (absl::Status s = (*store)->Pull(kTable, keys, absl::MakeSpan(rows));
      !s.ok()) {
    return s;
  }
  if (absl::Status s = ExpectRows("pulled (new rows, zeros):", keys, rows,
                                  std::vector<float>(rows.size(), 0.0f));
      !s.ok()) {
    return s;
  }

  const std::vector<float> grads =
      Concat({{1, 2, 3, 4}, {0.5f, 0.5f, 0.5f, 0.5f}, {1, 1, 1, 1}});
  if (absl::Status s = (*store)->Push(kTable, keys, grads); !s.ok()) return s;
  if (absl::Status s = (*store)->Pull(kTable, keys, absl::MakeSpan(rows));
      !s.ok()) {
    return s;
  }
  if (absl::Status s = ExpectRows("pulled after one SGD push:", keys, rows,
                                  Concat({kKey1, kKey2, kKey1}));
      !s.ok()) {
    return s;
  }

  absl::StatusOr<psdb::CheckpointInfo> ckpt =
      (*store)->Checkpoint(dir + "/checkpoints");
  if (!ckpt.ok()) return ckpt.status();
  std::printf("checkpoint written: step %lld\n",
              static_cast<long long>(ckpt->step));
  if (absl::Status s = (*store)->Close(); !s.ok()) return s;
  return ckpt->path;
}

// Step 5.
absl::Status ReadCheckpoint(const std::string& path) {
  absl::StatusOr<std::unique_ptr<psdb::ckpt::CheckpointReader>> reader =
      psdb::ckpt::CheckpointReader::Open(path);
  if (!reader.ok()) return reader.status();
  absl::StatusOr<const psdb::ckpt::TableInfo*> table =
      (*reader)->FindTable(kTable);
  if (!table.ok()) return table.status();
  std::printf("checkpoint read back: step %lld, table %s: %llu rows\n",
              static_cast<long long>((*reader)->step()),
              (*table)->spec.name.c_str(),
              static_cast<unsigned long long>((*table)->rows));
  if ((*reader)->step() != 1 || (*table)->rows != 2 ||
      !((*table)->spec == EmbSpec())) {
    return absl::InternalError(
        "checkpoint: expected step 1 and table emb as created, with 2 rows");
  }

  absl::StatusOr<std::unique_ptr<psdb::ckpt::TableCursor>> cursor =
      psdb::ckpt::TableCursor::Open(**reader, **table);
  if (!cursor.ok()) return cursor.status();
  std::vector<uint64_t> keys;
  std::vector<float> values;
  for (; (*cursor)->Valid(); (*cursor)->Next()) {
    psdb::ckpt::DecodedRow row;
    if (absl::Status s =
            (*reader)->Decode((*cursor)->shard(), **table, (*cursor)->key(),
                              (*cursor)->value(), &row);
        !s.ok()) {
      return s;
    }
    if (row.header.update_count != 1 || row.header.last_update_step != 1) {
      return absl::InternalError(
          absl::StrCat("checkpoint: key ", row.key, " has update_count ",
                       row.header.update_count, " and last_update_step ",
                       row.header.last_update_step, ", expected 1 and 1"));
    }
    keys.push_back(row.key);
    values.insert(values.end(), row.values.begin(), row.values.end());
  }
  if (absl::Status s = (*cursor)->status(); !s.ok()) return s;
  if (keys != std::vector<uint64_t>{1, 2}) {
    return absl::InternalError("checkpoint: expected the rows of keys 1, 2");
  }
  return ExpectRows("  its rows, in key order:", keys, values,
                    Concat({kKey1, kKey2}));
}

// Step 6.
absl::Status ReopenThroughUrl(const std::string& dir) {
  const std::string url = "local:" + dir + "/store";
  absl::StatusOr<std::unique_ptr<psdb::ParameterClient>> client =
      psdb::rpc::OpenParameterClient(url);
  if (!client.ok()) return client.status();
  absl::StatusOr<psdb::TableSpec> spec = (*client)->GetTable(kTable);
  if (!spec.ok()) return spec.status();
  if (!(*spec == EmbSpec())) {
    return absl::InternalError(url + ": table emb's spec changed");
  }

  const std::vector<uint64_t> keys = {2, 1};
  std::vector<float> rows(keys.size() * kDim);
  if (absl::Status s = (*client)->Pull(kTable, keys, absl::MakeSpan(rows), {});
      !s.ok()) {
    return s;
  }
  if (absl::Status s = ExpectRows("reopened as " + url + ":", keys, rows,
                                  Concat({kKey2, kKey1}));
      !s.ok()) {
    return s;
  }
  const std::vector<uint64_t> key2 = {2};
  const std::vector<float> grad(kDim, 4.0f);
  if (absl::Status s = (*client)->Push(kTable, key2, grad, {}); !s.ok()) {
    return s;
  }
  std::vector<float> row(kDim);
  if (absl::Status s = (*client)->Pull(kTable, key2, absl::MakeSpan(row), {});
      !s.ok()) {
    return s;
  }
  return ExpectRows("after a push of 4s to key 2:", key2, row,
                    std::vector<float>(kDim, -1.125f));
}

absl::Status Run(const std::string& dir) {
  absl::StatusOr<std::string> checkpoint = TrainAndCheckpoint(dir);
  if (!checkpoint.ok()) return checkpoint.status();
  if (absl::Status s = ReadCheckpoint(*checkpoint); !s.ok()) return s;
  return ReopenThroughUrl(dir);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc > 2) {
    std::fprintf(stderr, "usage: consumer [DIR]\n");
    return 2;
  }
  std::string dir;
  if (argc == 2) {
    dir = argv[1];
  } else {
    std::string tmpl = "/tmp/psdb-consumer-XXXXXX";
    if (mkdtemp(tmpl.data()) == nullptr) {
      std::fprintf(stderr, "consumer: cannot create a directory in /tmp\n");
      return 1;
    }
    dir = tmpl;
  }
  std::printf("psdb %s: consumer in %s\n", psdb::kVersion, dir.c_str());
  if (absl::Status status = Run(dir); !status.ok()) {
    std::fprintf(stderr, "consumer: FAILED: %s\n", status.ToString().c_str());
    return 1;
  }
  std::printf("consumer: every value as expected\n");
  return 0;
}
