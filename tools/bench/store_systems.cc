#include "tools/bench/store_systems.h"

#include <chrono>
#include <cstring>
#include <functional>
#include <thread>
#include <utility>

#include "absl/strings/str_cat.h"
#include "optim/optimizer.h"
#include "rocksdb/cache.h"
#include "rocksdb/filter_policy.h"
#include "rocksdb/table.h"
#include "rocksdb/write_buffer_manager.h"
#include "store/row_codec.h"
#include "util/status_macros.h"

namespace psdb::bench {
namespace {

absl::Status FromRocks(const rocksdb::Status& st, absl::string_view what) {
  if (st.ok()) return absl::OkStatus();
  return absl::InternalError(absl::StrCat(what, ": ", st.ToString()));
}

// Polls `busy` every 100 ms until it returns false or `timeout_s` passes:
// RocksDB 7.8 has no completion event for background compactions
// (WaitForCompact arrived in 8.x).
void WaitWhileBusy(double timeout_s, const std::function<bool()>& busy) {
  const auto deadline = std::chrono::steady_clock::now() +
                        std::chrono::duration<double>(timeout_s);
  while (std::chrono::steady_clock::now() < deadline && busy()) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
}

}  // namespace

void Deduper::Build(absl::Span<const uint64_t> keys) {
  index_.clear();
  unique_.clear();
  inverse_.resize(keys.size());
  for (size_t i = 0; i < keys.size(); ++i) {
    auto [it, inserted] =
        index_.try_emplace(keys[i], static_cast<uint32_t>(unique_.size()));
    if (inserted) unique_.push_back(keys[i]);
    inverse_[i] = it->second;
  }
}

void Deduper::SumGrads(absl::Span<const float> grads, int dim) {
  summed_.assign(unique_.size() * dim, 0.0f);
  for (size_t i = 0; i < inverse_.size(); ++i) {
    float* dst = summed_.data() + static_cast<size_t>(inverse_[i]) * dim;
    const float* src = grads.data() + i * dim;
    for (int j = 0; j < dim; ++j) dst[j] += src[j];
  }
}

// ---- psdb ------------------------------------------------------------------

absl::StatusOr<std::unique_ptr<PsdbSystem>> PsdbSystem::Open(
    const std::string& dir, const TableSpec& spec,
    const StoreOptions& options) {
  auto sys = std::unique_ptr<PsdbSystem>(new PsdbSystem());
  PSDB_ASSIGN_OR_RETURN(sys->store_, Store::Open(options, dir));
  PSDB_RETURN_IF_ERROR(sys->store_->CreateTable(spec));
  sys->table_ = spec.name;
  return sys;
}

absl::Status PsdbSystem::Pull(absl::Span<const uint64_t> keys,
                              absl::Span<float> out) {
  return store_->Pull(table_, keys, out);
}

absl::Status PsdbSystem::Push(absl::Span<const uint64_t> keys,
                              absl::Span<const float> grads) {
  return store_->Push(table_, keys, grads);
}

absl::Status PsdbSystem::Settle(double timeout_s) {
  WaitWhileBusy(timeout_s, [&] {
    const StoreStats stats = store_->Stats();
    bool busy = stats.disk_running_compactions > 0;
    for (const TableStats& t : stats.tables) busy |= t.disk_compaction_pending;
    return busy;
  });
  return absl::OkStatus();
}

// ---- RocksDB used directly -------------------------------------------------

RocksDbSystem::RocksDbSystem(const TableSpec& spec)
    : spec_(spec), state_size_(optim::StateSize(spec.optimizer, spec.dim)) {}

RocksDbSystem::~RocksDbSystem() {
  pinned_.clear();  // release every block before the DB goes away
  if (db_ != nullptr) db_->Close().PermitUncheckedError();
}

absl::StatusOr<std::unique_ptr<RocksDbSystem>> RocksDbSystem::Open(
    const std::string& dir, const TableSpec& spec,
    const RocksDbMemory& memory) {
  auto sys = std::unique_ptr<RocksDbSystem>(new RocksDbSystem(spec));
  rocksdb::Options options;
  options.create_if_missing = true;
  options.IncreaseParallelism(2);
  // Float rows do not compress; skipping compression is what a tuned
  // deployment of float embeddings does.
  options.compression = rocksdb::kNoCompression;
  rocksdb::BlockBasedTableOptions table_options;
  table_options.block_cache = rocksdb::NewLRUCache(memory.cache_bytes);
  table_options.filter_policy.reset(rocksdb::NewBloomFilterPolicy(10));
  if (memory.charge_all) {
    // RocksDB's documented way to cap its memory with one number (wiki
    // "Write Buffer Manager", "Memory usage in RocksDB").
    options.write_buffer_size = memory.memtable_bytes;
    options.write_buffer_manager =
        std::make_shared<rocksdb::WriteBufferManager>(
            memory.memtable_bytes, table_options.block_cache);
    for (rocksdb::CacheEntryRole role :
         {rocksdb::CacheEntryRole::kBlockBasedTableReader,
          rocksdb::CacheEntryRole::kFilterConstruction}) {
      table_options.cache_usage_options.options_overrides.insert(
          {role,
           {.charged = rocksdb::CacheEntryRoleOptions::Decision::kEnabled}});
    }
  }
  options.table_factory.reset(
      rocksdb::NewBlockBasedTableFactory(table_options));
  rocksdb::DB* db = nullptr;
  PSDB_RETURN_IF_ERROR(
      FromRocks(rocksdb::DB::Open(options, dir, &db), "open " + dir));
  sys->db_.reset(db);
  return sys;
}

absl::Status RocksDbSystem::ReadUnique(bool write_new) {
  const std::vector<uint64_t>& unique = dedup_.unique();
  const size_t n = unique.size();
  const int dim = spec_.dim;
  key_bytes_.resize(n * 8);
  key_slices_.resize(n);
  pinned_.resize(n);
  statuses_.resize(n);
  for (size_t i = 0; i < n; ++i) {
    EncodeKey(unique[i], &key_bytes_[i * 8]);
    key_slices_[i] = rocksdb::Slice(&key_bytes_[i * 8], 8);
    pinned_[i].Reset();
  }
  db_->MultiGet(rocksdb::ReadOptions(), db_->DefaultColumnFamily(), n,
                key_slices_.data(), pinned_.data(), statuses_.data());
  values_.resize(n * dim);
  state_.resize(n * state_size_);
  headers_.resize(n);
  for (size_t i = 0; i < n; ++i) {
    absl::Span<float> v(values_.data() + i * dim, dim);
    absl::Span<float> s(state_.data() + i * state_size_, state_size_);
    if (statuses_[i].ok()) {
      PSDB_RETURN_IF_ERROR(
          DecodeRow(absl::string_view(pinned_[i].data(), pinned_[i].size()),
                    dim, state_size_, &headers_[i], v, s));
    } else if (statuses_[i].IsNotFound()) {
      headers_[i] = RowHeader{};
      InitializeRow(spec_, unique[i], v);
      optim::InitState(spec_.optimizer, dim, s);
      if (write_new) {
        EncodeRow(headers_[i], v, s, &encoded_);
        batch_.Put(key_slices_[i], encoded_);
      }
    } else {
      return FromRocks(statuses_[i], "MultiGet");
    }
    // Unpin the block now: pins held across calls would both outlive the
    // DB at close and hold cache memory beyond the budget.
    pinned_[i].Reset();
  }
  return absl::OkStatus();
}

absl::Status RocksDbSystem::Pull(absl::Span<const uint64_t> keys,
                                 absl::Span<float> out) {
  const int dim = spec_.dim;
  dedup_.Build(keys);
  batch_.Clear();
  PSDB_RETURN_IF_ERROR(ReadUnique(/*write_new=*/true));
  const std::vector<uint32_t>& inverse = dedup_.inverse();
  for (size_t p = 0; p < keys.size(); ++p) {
    std::memcpy(out.data() + p * dim,
                values_.data() + static_cast<size_t>(inverse[p]) * dim,
                sizeof(float) * dim);
  }
  if (batch_.Count() == 0) return absl::OkStatus();
  rocksdb::WriteOptions wo;
  wo.disableWAL = true;
  return FromRocks(db_->Write(wo, &batch_), "Write");
}

absl::Status RocksDbSystem::Push(absl::Span<const uint64_t> keys,
                                 absl::Span<const float> grads) {
  const int dim = spec_.dim;
  ++step_;
  dedup_.Build(keys);
  dedup_.SumGrads(grads, dim);
  batch_.Clear();
  PSDB_RETURN_IF_ERROR(ReadUnique(/*write_new=*/false));
  const std::vector<float>& summed = dedup_.summed();
  for (size_t i = 0; i < dedup_.unique().size(); ++i) {
    absl::Span<float> v(values_.data() + i * dim, dim);
    absl::Span<float> s(state_.data() + i * state_size_, state_size_);
    optim::Apply(spec_.optimizer, v, s,
                 absl::MakeConstSpan(summed.data() + i * dim, dim), step_);
    headers_[i].last_update_step = step_;
    ++headers_[i].update_count;
    EncodeRow(headers_[i], v, s, &encoded_);
    batch_.Put(key_slices_[i], encoded_);
  }
  rocksdb::WriteOptions wo;
  wo.disableWAL = true;
  return FromRocks(db_->Write(wo, &batch_), "Write");
}

absl::Status RocksDbSystem::Settle(double timeout_s) {
  PSDB_RETURN_IF_ERROR(FromRocks(db_->Flush(rocksdb::FlushOptions()), "Flush"));
  WaitWhileBusy(timeout_s, [&] {
    uint64_t pending = 0, running = 0;
    db_->GetIntProperty("rocksdb.compaction-pending", &pending);
    db_->GetIntProperty("rocksdb.num-running-compactions", &running);
    return pending != 0 || running != 0;
  });
  return absl::OkStatus();
}

// ---- the limit: a flat hash map over one row array --------------------------

HashMapSystem::HashMapSystem(const TableSpec& spec, uint64_t expected_rows)
    : spec_(spec),
      state_size_(optim::StateSize(spec.optimizer, spec.dim)),
      stride_(static_cast<size_t>(spec.dim + state_size_)) {
  index_.reserve(expected_rows);
  rows_.reserve(expected_rows * stride_);
}

uint32_t HashMapSystem::RowOf(uint64_t key) {
  auto [it, inserted] =
      index_.try_emplace(key, static_cast<uint32_t>(rows_.size() / stride_));
  if (inserted) {
    const size_t at = rows_.size();
    rows_.resize(at + stride_);
    InitializeRow(spec_, key, absl::MakeSpan(rows_.data() + at, spec_.dim));
    optim::InitState(
        spec_.optimizer, spec_.dim,
        absl::MakeSpan(rows_.data() + at + spec_.dim, state_size_));
  }
  return it->second;
}

absl::Status HashMapSystem::Pull(absl::Span<const uint64_t> keys,
                                 absl::Span<float> out) {
  const int dim = spec_.dim;
  for (size_t p = 0; p < keys.size(); ++p) {
    const uint32_t r = RowOf(keys[p]);
    std::memcpy(out.data() + p * dim, rows_.data() + r * stride_,
                sizeof(float) * dim);
  }
  return absl::OkStatus();
}

absl::Status HashMapSystem::Push(absl::Span<const uint64_t> keys,
                                 absl::Span<const float> grads) {
  const int dim = spec_.dim;
  ++step_;
  dedup_.Build(keys);
  dedup_.SumGrads(grads, dim);
  const std::vector<float>& summed = dedup_.summed();
  for (size_t i = 0; i < dedup_.unique().size(); ++i) {
    float* row = rows_.data() + RowOf(dedup_.unique()[i]) * stride_;
    optim::Apply(spec_.optimizer, absl::MakeSpan(row, dim),
                 absl::MakeSpan(row + dim, state_size_),
                 absl::MakeConstSpan(summed.data() + i * dim, dim), step_);
  }
  return absl::OkStatus();
}

}  // namespace psdb::bench
