// MemoryClient: a ParameterClient over hash maps, for train/ tests while the
// embedded Store is not available on this branch. Same semantics as the
// contract in store/parameter_client.h for what the trainer uses
// (get-or-create pulls with deterministic init, summed duplicate pushes, one
// optimizer application per unique key); Checkpoint only records the step.
//
// Thread-safety: thread-safe (one mutex).
#ifndef PSDB_TESTS_TRAIN_MEMORY_CLIENT_H_
#define PSDB_TESTS_TRAIN_MEMORY_CLIENT_H_

#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "optim/optimizer.h"
#include "store/parameter_client.h"
#include "store/table_spec.h"

namespace psdb::train {

class MemoryClient final : public ParameterClient {
 public:
  struct Row {
    std::vector<float> values, state;
  };
  struct Table {
    TableSpec spec;
    int state_size = 0;
    int64_t step = 0;
    std::map<uint64_t, Row> rows;  // ordered, for comparisons in tests
  };

  absl::Status CreateTable(const TableSpec& spec) override {
    absl::MutexLock lock(&mu_);
    auto it = tables_.find(spec.name);
    if (it != tables_.end()) {
      return it->second.spec == spec ? absl::OkStatus()
                                     : absl::AlreadyExistsError(spec.name);
    }
    Table& t = tables_[spec.name];
    t.spec = spec;
    t.state_size = optim::StateSize(spec.optimizer, spec.dim);
    return absl::OkStatus();
  }
  absl::Status DropTable(absl::string_view name) override {
    absl::MutexLock lock(&mu_);
    tables_.erase(std::string(name));
    return absl::OkStatus();
  }
  absl::StatusOr<std::vector<TableSpec>> ListTables() override {
    absl::MutexLock lock(&mu_);
    std::vector<TableSpec> out;
    for (const auto& [name, t] : tables_) out.push_back(t.spec);
    return out;
  }
  absl::StatusOr<TableSpec> GetTable(absl::string_view name) override {
    absl::MutexLock lock(&mu_);
    auto it = tables_.find(std::string(name));
    if (it == tables_.end()) return absl::NotFoundError(std::string(name));
    return it->second.spec;
  }
  absl::Status Pull(absl::string_view table, absl::Span<const uint64_t> keys,
                    absl::Span<float> out,
                    const PullOptions& options) override {
    absl::MutexLock lock(&mu_);
    auto it = tables_.find(std::string(table));
    if (it == tables_.end()) return absl::NotFoundError(std::string(table));
    Table& t = it->second;
    const int dim = t.spec.dim;
    if (out.size() != keys.size() * dim) {
      return absl::InvalidArgumentError("pull: out size");
    }
    for (size_t i = 0; i < keys.size(); ++i) {
      auto r = t.rows.find(keys[i]);
      if (r == t.rows.end()) {
        if (options.serving) {
          DefaultRow(t.spec, keys[i], out.subspan(i * dim, dim));
          continue;
        }
        r = t.rows.emplace(keys[i], NewRow(t, keys[i])).first;
      }
      std::copy(r->second.values.begin(), r->second.values.end(),
                out.begin() + i * dim);
    }
    return absl::OkStatus();
  }
  absl::Status Push(absl::string_view table, absl::Span<const uint64_t> keys,
                    absl::Span<const float> grads,
                    const PushOptions& options) override {
    absl::MutexLock lock(&mu_);
    auto it = tables_.find(std::string(table));
    if (it == tables_.end()) return absl::NotFoundError(std::string(table));
    Table& t = it->second;
    const int dim = t.spec.dim;
    if (grads.size() != keys.size() * dim) {
      return absl::InvalidArgumentError("push: grads size");
    }
    std::map<uint64_t, std::vector<float>> summed;
    for (size_t i = 0; i < keys.size(); ++i) {
      auto& g = summed[keys[i]];
      g.resize(dim, 0.0f);
      for (int k = 0; k < dim; ++k) g[k] += grads[i * dim + k];
    }
    const int64_t step = options.step > 0 ? options.step : t.step + 1;
    t.step = std::max(t.step, step);
    for (auto& [key, g] : summed) {
      auto r = t.rows.find(key);
      if (r == t.rows.end()) r = t.rows.emplace(key, NewRow(t, key)).first;
      optim::Apply(t.spec.optimizer, absl::MakeSpan(r->second.values),
                   absl::MakeSpan(r->second.state), g, step);
    }
    return absl::OkStatus();
  }
  absl::Status PullRows(absl::string_view, absl::Span<const uint64_t>,
                        RowBatch*) override {
    return absl::UnimplementedError("MemoryClient::PullRows");
  }
  absl::Status PutRows(absl::string_view, absl::Span<const uint64_t>,
                       const RowBatch&) override {
    return absl::UnimplementedError("MemoryClient::PutRows");
  }
  absl::StatusOr<CheckpointInfo> Checkpoint(absl::string_view root_dir,
                                            const CheckpointOptions&) override {
    absl::MutexLock lock(&mu_);
    CheckpointInfo info;
    info.path = absl::StrCat(root_dir, "/ckpt-memory-", ++checkpoints_);
    std::filesystem::create_directories(info.path);
    return info;
  }
  absl::StatusOr<StoreStats> Stats() override {
    absl::MutexLock lock(&mu_);
    StoreStats s;
    for (const auto& [name, t] : tables_) {
      TableStats ts;
      ts.name = name;
      ts.memory_rows = t.rows.size();
      ts.created = t.rows.size();
      ts.step = t.step;
      s.tables.push_back(ts);
    }
    return s;
  }

  // A copy of a table's rows (for determinism checks).
  std::map<uint64_t, Row> Rows(const std::string& table) {
    absl::MutexLock lock(&mu_);
    return tables_[table].rows;
  }

 private:
  static Row NewRow(const Table& t, uint64_t key) {
    Row row;
    row.values.resize(t.spec.dim);
    row.state.resize(t.state_size);
    InitializeRow(t.spec, key, absl::MakeSpan(row.values));
    optim::InitState(t.spec.optimizer, t.spec.dim, absl::MakeSpan(row.state));
    return row;
  }

  absl::Mutex mu_;
  std::map<std::string, Table> tables_ ABSL_GUARDED_BY(mu_);
  int checkpoints_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace psdb::train

#endif  // PSDB_TESTS_TRAIN_MEMORY_CLIENT_H_
