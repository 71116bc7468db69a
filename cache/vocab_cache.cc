#include "psdb/vocab_cache.h"

#include <algorithm>
#include <cmath>
#include <optional>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "cache/backend.h"
#include "cache/policy.h"
#include "cache/slot_map.h"
#include "optim/optimizer.h"
#include "util/hash.h"
#include "util/key_dedup.h"
#include "util/status_macros.h"

namespace psdb::cache {

struct VocabCache::Table {
  std::string name;
  TableSpec spec;
  uint32_t index = 0;
  int pool = 0;
  int dim = 0;
  int state_size = 0;  // optimizer state floats (write-back), else 0
  optim::KernelParams params{};
  int64_t step = 0;    // write-back: the table step the cache has reached
  int64_t pushes = 0;  // push-through: pushes this cache has made
  TableCacheStats stats;
};

struct VocabCache::Pool {
  int dim = 0;
  int state_stride = 0;
  std::unique_ptr<SlotMap> map;
  std::unique_ptr<CacheBackend> backend;
  std::vector<RowHeader> headers;   // per slot (write-back)
  std::vector<int64_t> fetched_at;  // per slot: table pushes at fetch time
};

// One table's part of a batch: unique ids, inverse index, and the positions
// of each unique id in ascending order (CSR) for the gradient sums.
struct TablePart {
  int table = 0;
  std::vector<uint64_t> ids;
  std::vector<uint64_t> unique;
  std::vector<int32_t> inverse;  // position -> unique index
  std::vector<int32_t> offsets;  // unique u's positions: [offsets[u], [u+1])
  std::vector<int32_t> positions;
  std::vector<int32_t> slots;  // unique index -> slot (after Assign)
};

struct VocabCache::PendingBatch {
  std::vector<TablePart> parts;
  std::vector<std::pair<int, int32_t>> pinned;  // (pool, slot), one pin each
  uint64_t fingerprint = 0;
};

// The I/O of one Lookup or Prefetch: rows to write back, rows to fetch.
struct VocabCache::Fetch {
  struct Part {
    int table = 0;
    std::vector<uint64_t> keys;  // to fetch
    std::vector<int32_t> slots;  // their slots
    std::vector<bool> fresh;     // new row (not a refresh of a cached one)
    int64_t fetched_at = 0;
    std::vector<uint64_t> victim_keys;  // to write back
    RowBatch victims;
  };
  std::vector<Part> parts;  // indexed by table
  bool prefetch = false;
  // The batch whose pins hold the fetched slots.
  PendingBatch* batch = nullptr;
};

namespace {

uint64_t RowBytes(const RowBatch& rows) {
  return 4 * (rows.values.size() + rows.state.size());
}

}  // namespace

VocabCache::VocabCache(ParameterClient* client,
                       const VocabCacheOptions& options)
    : client_(client),
      options_(options),
      dedup_(std::make_unique<KeyDedup>()) {}

VocabCache::~VocabCache() { WaitForPrefetch().IgnoreError(); }

absl::StatusOr<std::unique_ptr<VocabCache>> VocabCache::Create(
    ParameterClient* client, const std::vector<std::string>& tables,
    const VocabCacheOptions& options) {
  if (client == nullptr) return absl::InvalidArgumentError("client is null");
  if (options.capacity_rows < 1 || options.capacity_rows > (1 << 30)) {
    return absl::InvalidArgumentError(
        absl::StrCat("vocab cache capacity_rows must be in [1, 2^30], got ",
                     options.capacity_rows));
  }
  if (options.max_staleness < 0) {
    return absl::InvalidArgumentError("max_staleness must be >= 0");
  }
  if (tables.empty()) return absl::InvalidArgumentError("no tables to cache");
  std::unique_ptr<VocabCache> cache(new VocabCache(client, options));
  const bool write_back = options.mode == CacheMode::kWriteBack;
  PSDB_ASSIGN_OR_RETURN(StoreStats store_stats, client->Stats());
  absl::flat_hash_map<int, int> pool_of_dim;
  for (const std::string& name : tables) {
    if (cache->TableIndex(name).ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("table ", name, " listed twice"));
    }
    auto t = std::make_unique<Table>();
    t->name = name;
    PSDB_ASSIGN_OR_RETURN(t->spec, client->GetTable(name));
    if (write_back && t->spec.admission_threshold > 1) {
      return absl::FailedPreconditionError(absl::StrCat(
          "table ", name, " has admission threshold ",
          t->spec.admission_threshold,
          ": a write-back cache cannot be exact for it (the store drops the "
          "pushes of keys not yet admitted); use push-through mode"));
    }
    t->index = static_cast<uint32_t>(cache->tables_.size());
    t->dim = t->spec.dim;
    t->state_size =
        write_back ? optim::StateSize(t->spec.optimizer, t->dim) : 0;
    t->params = optim::KernelParamsOf(t->spec.optimizer);
    for (const TableStats& ts : store_stats.tables) {
      if (ts.name == name) t->step = ts.step;
    }
    t->stats.table = name;
    int pool = -1;
    if (options.shared_capacity) {
      auto it = pool_of_dim.find(t->dim);
      if (it != pool_of_dim.end()) pool = it->second;
    }
    if (pool < 0) {
      pool = static_cast<int>(cache->pools_.size());
      auto p = std::make_unique<Pool>();
      p->dim = t->dim;
      cache->pools_.push_back(std::move(p));
      pool_of_dim[t->dim] = pool;
    }
    t->pool = pool;
    Pool& p = *cache->pools_[pool];
    p.state_stride = std::max(p.state_stride, t->state_size);
    cache->tables_.push_back(std::move(t));
  }
  const int32_t capacity = static_cast<int32_t>(options.capacity_rows);
  for (auto& p : cache->pools_) {
    p->map = std::make_unique<SlotMap>(capacity, options.policy);
    PSDB_ASSIGN_OR_RETURN(p->backend, MakeBackend(options.backend));
    PSDB_RETURN_IF_ERROR(
        p->backend->Allocate(capacity, p->dim, p->state_stride));
    p->headers.assign(capacity, RowHeader{});
    p->fetched_at.assign(capacity, 0);
  }
  return cache;
}

absl::StatusOr<int> VocabCache::TableIndex(absl::string_view name) const {
  for (size_t i = 0; i < tables_.size(); ++i) {
    if (tables_[i]->name == name) return static_cast<int>(i);
  }
  return absl::NotFoundError(
      absl::StrCat("table ", name, " is not cached by this vocab cache"));
}

absl::Status VocabCache::Prepare(absl::Span<const TableIds> batch,
                                 PendingBatch* out) {
  out->parts.clear();
  out->pinned.clear();
  std::vector<bool> seen(tables_.size(), false);
  uint64_t fp = Mix64(batch.size());
  for (const TableIds& in : batch) {
    PSDB_ASSIGN_OR_RETURN(int t, TableIndex(in.table));
    if (seen[t]) {
      return absl::InvalidArgumentError(
          absl::StrCat("table ", in.table, " appears twice in one batch"));
    }
    seen[t] = true;
    if (in.ids.size() > static_cast<size_t>(INT32_MAX)) {
      return absl::InvalidArgumentError("batch too large");
    }
    TablePart part;
    part.table = t;
    part.ids.assign(in.ids.begin(), in.ids.end());
    dedup_->Reset(in.ids.size());
    part.inverse.resize(in.ids.size());
    fp = Mix64(fp ^ static_cast<uint64_t>(t));
    for (size_t i = 0; i < in.ids.size(); ++i) {
      bool inserted;
      // < 2^31 distinct ids (checked above), so the index fits an int32_t.
      part.inverse[i] =
          static_cast<int32_t>(dedup_->Insert(in.ids[i], &inserted));
      fp = Mix64(fp ^ in.ids[i]);
    }
    part.unique.assign(dedup_->unique().begin(), dedup_->unique().end());
    GroupPositionsByRow(part.inverse, part.unique.size(), &part.offsets,
                        &part.positions);
    part.slots.assign(part.unique.size(), -1);
    out->parts.push_back(std::move(part));
  }
  out->fingerprint = fp;
  return absl::OkStatus();
}

absl::Status VocabCache::Assign(PendingBatch* batch, bool count_access,
                                bool partial, Fetch* fetch) {
  const bool write_back = options_.mode == CacheMode::kWriteBack;
  fetch->parts.assign(tables_.size(), Fetch::Part{});
  for (size_t t = 0; t < tables_.size(); ++t) fetch->parts[t].table = t;
  fetch->batch = batch;
  // Pass 1: pin resident rows, list the misses per pool.
  std::vector<std::vector<std::pair<size_t, size_t>>> misses(pools_.size());
  for (size_t k = 0; k < batch->parts.size(); ++k) {
    TablePart& part = batch->parts[k];
    Table& table = *tables_[part.table];
    Pool& pool = *pools_[table.pool];
    // Index probes first, then the slots' bookkeeping with its cache lines
    // requested ahead: the per-slot work is a chain of random accesses, and
    // this lets the memory system serve many ids at once.
    for (size_t u = 0; u < part.unique.size(); ++u) {
      part.slots[u] = pool.map->Find(SlotKey{table.index, part.unique[u]});
    }
    for (int32_t slot : part.slots) {
      if (slot >= 0) {
        pool.map->Prefetch(slot);
        __builtin_prefetch(&pool.headers[slot]);
      }
    }
    for (size_t u = 0; u < part.unique.size(); ++u) {
      const int32_t slot = part.slots[u];
      if (slot < 0) {
        misses[table.pool].emplace_back(k, u);
        continue;
      }
      // A stale row is fetched again: like a miss, its first position is
      // served by the store, not the cache.
      const bool stale = !write_back && table.pushes - pool.fetched_at[slot] >
                                            options_.max_staleness;
      if (count_access) {
        pool.map->PinAndAccess(slot);
        table.stats.hits += part.offsets[u + 1] - part.offsets[u] - stale;
        table.stats.refreshes += stale;
      } else {
        pool.map->Pin(slot);
      }
      batch->pinned.emplace_back(table.pool, slot);
      part.slots[u] = slot;
      if (stale) {
        Fetch::Part& fp = fetch->parts[part.table];
        fp.keys.push_back(part.unique[u]);
        fp.slots.push_back(slot);
        fp.fresh.push_back(false);
      }
    }
    if (count_access) {
      table.stats.lookups += part.ids.size();
      table.stats.unique_ids += part.unique.size();
    }
  }
  // Capacity: every miss needs a free or evictable slot.
  for (size_t p = 0; p < pools_.size(); ++p) {
    Pool& pool = *pools_[p];
    if (static_cast<int64_t>(misses[p].size()) <= pool.map->available()) {
      continue;
    }
    if (partial) {
      misses[p].resize(std::max<int32_t>(0, pool.map->available()));
      continue;
    }
    if (prefetch_ != nullptr) ReleasePrefetchPins();
    if (static_cast<int64_t>(misses[p].size()) > pool.map->available()) {
      int64_t unique = 0;
      std::string names;
      for (const TablePart& part : batch->parts) {
        if (tables_[part.table]->pool != static_cast<int>(p)) continue;
        unique += part.unique.size();
        absl::StrAppend(&names, names.empty() ? "" : ",",
                        tables_[part.table]->name);
      }
      UnpinBatch(*batch);
      batch->pinned.clear();
      return absl::ResourceExhaustedError(absl::StrCat(
          "vocab cache: the batch has ", unique, " unique ids in table(s) ",
          names, " but their pool holds ", pool.map->capacity(), " rows (",
          pool.map->capacity() - pool.map->available(),
          " pinned); raise capacity_rows or cut the batch"));
    }
  }
  // Pass 2: slots for the misses, evicting victims.
  for (size_t p = 0; p < pools_.size(); ++p) {
    Pool& pool = *pools_[p];
    for (auto [k, u] : misses[p]) {
      TablePart& part = batch->parts[k];
      Table& table = *tables_[part.table];
      std::optional<SlotKey> evicted;
      uint64_t evicted_frequency = 0;
      const int32_t slot =
          pool.map->Insert(SlotKey{table.index, part.unique[u]}, 0, &evicted,
                           &evicted_frequency);
      if (evicted) {
        Table& victim_table = *tables_[evicted->table];
        ++victim_table.stats.evictions;
        if (write_back) {
          Fetch::Part& vp = fetch->parts[evicted->table];
          RowBatch& rows = vp.victims;
          const size_t n = vp.victim_keys.size();
          if (n == 0) rows.Resize(victim_table.dim, victim_table.state_size, 0);
          vp.victim_keys.push_back(evicted->id);
          rows.values.resize((n + 1) * victim_table.dim);
          rows.state.resize((n + 1) * victim_table.state_size);
          const int32_t s[1] = {slot};
          PSDB_RETURN_IF_ERROR(pool.backend->Read(
              s, absl::MakeSpan(rows.values).subspan(n * victim_table.dim),
              absl::MakeSpan(rows.state).subspan(n * victim_table.state_size),
              victim_table.state_size));
          rows.headers.push_back(pool.headers[slot]);
        }
      }
      pool.headers[slot] = RowHeader{};
      batch->pinned.emplace_back(p, slot);
      part.slots[u] = slot;
      Fetch::Part& fp = fetch->parts[part.table];
      fp.keys.push_back(part.unique[u]);
      fp.slots.push_back(slot);
      fp.fresh.push_back(true);
      if (count_access) {
        ++table.stats.misses;
        table.stats.hits += part.offsets[u + 1] - part.offsets[u] - 1;
      } else {
        ++table.stats.prefetched;
      }
    }
  }
  for (Fetch::Part& fp : fetch->parts) {
    fp.fetched_at = tables_[fp.table]->pushes;
  }
  return absl::OkStatus();
}

absl::Status VocabCache::RunFetch(Fetch* fetch) {
  const bool write_back = options_.mode == CacheMode::kWriteBack;
  absl::Status status;
  std::vector<RowBatch> fetched(fetch->parts.size());
  for (Fetch::Part& fp : fetch->parts) {
    if (fp.victim_keys.empty()) continue;
    const Table& table = *tables_[fp.table];
    absl::Status s = client_->PutRows(table.name, fp.victim_keys, fp.victims);
    absl::MutexLock l(&mu_);
    if (!s.ok()) {
      // The rows have left the cache; the store keeps its older copy.
      status.Update(absl::Status(
          s.code(),
          absl::StrCat("vocab cache: writing back ", fp.victim_keys.size(),
                       " evicted rows of table ", table.name,
                       " failed: ", s.message())));
      continue;
    }
    tables_[fp.table]->stats.write_backs += fp.victim_keys.size();
    tables_[fp.table]->stats.bytes_moved += RowBytes(fp.victims);
  }
  for (Fetch::Part& fp : fetch->parts) {
    if (fp.keys.empty()) continue;
    const Table& table = *tables_[fp.table];
    absl::Status s = client_->PullRows(table.name, fp.keys, &fetched[fp.table]);
    if (!s.ok()) {
      status.Update(absl::Status(
          s.code(), absl::StrCat("vocab cache: fetching ", fp.keys.size(),
                                 " rows of table ", table.name,
                                 " failed: ", s.message())));
    }
  }
  absl::MutexLock l(&mu_);
  if (!status.ok()) {
    // Nothing fetched is installed: unpin the batch, forget the new rows.
    UnpinBatch(*fetch->batch);
    fetch->batch->pinned.clear();
    for (Fetch::Part& fp : fetch->parts) {
      Pool& pool = *pools_[tables_[fp.table]->pool];
      for (size_t i = 0; i < fp.slots.size(); ++i) {
        if (fp.fresh[i]) pool.map->Erase(fp.slots[i]);
      }
    }
    return status;
  }
  for (Fetch::Part& fp : fetch->parts) {
    if (fp.keys.empty()) continue;
    Table& table = *tables_[fp.table];
    Pool& pool = *pools_[table.pool];
    const RowBatch& rows = fetched[fp.table];
    if (rows.size() != fp.keys.size() || rows.dim != table.dim) {
      return absl::InternalError(
          absl::StrCat("vocab cache: PullRows of table ", table.name,
                       " returned ", rows.size(), " rows of dim ", rows.dim));
    }
    const int state_size = write_back ? table.state_size : 0;
    if (write_back && rows.state_size != state_size) {
      return absl::InternalError(absl::StrCat(
          "vocab cache: PullRows of table ", table.name,
          " returned state size ", rows.state_size, ", expected ", state_size));
    }
    PSDB_RETURN_IF_ERROR(
        pool.backend->Write(fp.slots, rows.values, rows.state, state_size));
    table.stats.bytes_moved += RowBytes(rows);
    for (size_t i = 0; i < fp.slots.size(); ++i) {
      const int32_t slot = fp.slots[i];
      pool.fetched_at[slot] = fp.fetched_at;
      if (!fp.fresh[i]) continue;
      RowHeader h = rows.headers[i];
      // PullRows counted the cache's own fetch as a sighting; the trainer's
      // sightings are counted by Lookup and Update, as Pull and Push would.
      if (h.frequency > 0) --h.frequency;
      pool.headers[slot] = h;
      pool.map->AddFrequency(slot, h.frequency);
    }
  }
  return absl::OkStatus();
}

void VocabCache::UnpinBatch(const PendingBatch& batch) {
  for (auto [p, slot] : batch.pinned) pools_[p]->map->Unpin(slot);
}

void VocabCache::ReleasePrefetchPins() {
  if (prefetch_ == nullptr) return;
  UnpinBatch(*prefetch_);
  prefetch_.reset();
}

absl::Status VocabCache::WaitForPrefetch() {
  if (prefetch_thread_.joinable()) prefetch_thread_.join();
  absl::MutexLock l(&mu_);
  absl::Status s = prefetch_status_;
  prefetch_status_ = absl::OkStatus();
  return s;
}

void VocabCache::Announce(absl::Span<const TableIds> batch) {
  if (options_.policy != PolicyKind::kLookahead) return;
  std::vector<std::vector<SlotKey>> keys(pools_.size());
  for (const TableIds& in : batch) {
    absl::StatusOr<int> t = TableIndex(in.table);
    if (!t.ok()) continue;
    const Table& table = *tables_[*t];
    for (uint64_t id : in.ids)
      keys[table.pool].push_back(SlotKey{table.index, id});
  }
  absl::MutexLock l(&mu_);
  for (size_t p = 0; p < pools_.size(); ++p) {
    pools_[p]->map->AddFuture(announced_, keys[p]);
  }
  ++announced_;
}

absl::Status VocabCache::Lookup(absl::Span<const TableIds> batch,
                                std::vector<std::vector<float>>* rows) {
  PSDB_RETURN_IF_ERROR(WaitForPrefetch());
  if (current_ != nullptr) Release();
  auto pending = std::make_unique<PendingBatch>();
  PSDB_RETURN_IF_ERROR(Prepare(batch, pending.get()));
  Fetch fetch;
  {
    absl::MutexLock l(&mu_);
    const int64_t seq = next_seq_++;
    for (auto& pool : pools_) pool->map->BeginBatch(seq);
    PSDB_RETURN_IF_ERROR(Assign(pending.get(), /*count_access=*/true,
                                /*partial=*/false, &fetch));
    if (prefetch_ != nullptr &&
        prefetch_->fingerprint == pending->fingerprint) {
      ReleasePrefetchPins();
    }
  }
  PSDB_RETURN_IF_ERROR(RunFetch(&fetch));
  absl::MutexLock l(&mu_);
  rows->resize(pending->parts.size());
  std::vector<int32_t> position_slots;
  for (size_t k = 0; k < pending->parts.size(); ++k) {
    const TablePart& part = pending->parts[k];
    Table& table = *tables_[part.table];
    Pool& pool = *pools_[table.pool];
    position_slots.resize(part.ids.size());
    for (size_t i = 0; i < part.ids.size(); ++i) {
      position_slots[i] = part.slots[part.inverse[i]];
    }
    (*rows)[k].resize(part.ids.size() * table.dim);
    PSDB_RETURN_IF_ERROR(
        pool.backend->Gather(position_slots, absl::MakeSpan((*rows)[k])));
    if (options_.mode == CacheMode::kWriteBack) {
      // The sightings a Pull of these ids would have counted.
      for (size_t u = 0; u < part.unique.size(); ++u) {
        pool.headers[part.slots[u]].frequency +=
            part.offsets[u + 1] - part.offsets[u];
      }
    }
  }
  current_ = std::move(pending);
  return absl::OkStatus();
}

void VocabCache::Release() {
  if (current_ == nullptr) return;
  absl::MutexLock l(&mu_);
  UnpinBatch(*current_);
  current_.reset();
}

absl::Status VocabCache::Update(absl::Span<const absl::Span<const float>> grads,
                                int64_t step) {
  if (current_ == nullptr) {
    return absl::FailedPreconditionError(
        "vocab cache: Update without a looked-up batch");
  }
  PendingBatch& batch = *current_;
  if (grads.size() != batch.parts.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("vocab cache: Update got gradients for ", grads.size(),
                     " tables, the batch has ", batch.parts.size()));
  }
  for (size_t k = 0; k < batch.parts.size(); ++k) {
    const Table& table = *tables_[batch.parts[k].table];
    if (grads[k].size() != batch.parts[k].ids.size() * table.dim) {
      return absl::InvalidArgumentError(
          absl::StrCat("vocab cache: table ", table.name, ": ",
                       batch.parts[k].ids.size(), " ids of dim ", table.dim,
                       " need ", batch.parts[k].ids.size() * table.dim,
                       " gradient floats, got ", grads[k].size()));
    }
  }
  if (options_.mode == CacheMode::kPushThrough) {
    absl::Status status;
    PushOptions options;
    options.step = step;
    for (size_t k = 0; k < batch.parts.size(); ++k) {
      Table& table = *tables_[batch.parts[k].table];
      absl::Status s =
          client_->Push(table.name, batch.parts[k].ids, grads[k], options);
      absl::MutexLock l(&mu_);
      if (s.ok()) {
        ++table.pushes;
        table.stats.bytes_moved += 4 * grads[k].size();
      }
      status.Update(s);
    }
    Release();
    return status;
  }
  // Write-back. Non-finite gradients are handled as the store's Push would:
  // reject the whole update, or skip the rows they belong to.
  struct Work {
    std::vector<int32_t> slots, offsets, positions;
    std::vector<size_t> unique;
  };
  std::vector<Work> work(batch.parts.size());
  for (size_t k = 0; k < batch.parts.size(); ++k) {
    const TablePart& part = batch.parts[k];
    const Table& table = *tables_[part.table];
    Work& w = work[k];
    w.offsets.push_back(0);
    for (size_t u = 0; u < part.unique.size(); ++u) {
      bool finite = true;
      for (int32_t q = part.offsets[u]; q < part.offsets[u + 1]; ++q) {
        const float* g = grads[k].data() +
                         static_cast<size_t>(part.positions[q]) * table.dim;
        for (int j = 0; j < table.dim; ++j) finite &= std::isfinite(g[j]);
      }
      if (!finite) {
        if (table.spec.non_finite == NonFinitePolicy::kReject) {
          return absl::InvalidArgumentError(absl::StrCat(
              "table ", table.name, ": non-finite gradient for key ",
              part.unique[u], " (nothing applied)"));
        }
        continue;
      }
      w.unique.push_back(u);
      w.slots.push_back(part.slots[u]);
      for (int32_t q = part.offsets[u]; q < part.offsets[u + 1]; ++q) {
        w.positions.push_back(part.positions[q]);
      }
      w.offsets.push_back(static_cast<int32_t>(w.positions.size()));
    }
  }
  {
    absl::MutexLock l(&mu_);
    for (size_t k = 0; k < batch.parts.size(); ++k) {
      const TablePart& part = batch.parts[k];
      Table& table = *tables_[part.table];
      Pool& pool = *pools_[table.pool];
      const int64_t table_step = ++table.step;
      const Work& w = work[k];
      if (w.slots.empty()) continue;
      PSDB_RETURN_IF_ERROR(pool.backend->ApplyGradients(
          table.params, w.slots, w.offsets, w.positions, grads[k], table_step));
      for (size_t i = 0; i < w.slots.size(); ++i) {
        RowHeader& h = pool.headers[w.slots[i]];
        h.last_update_step = std::max(h.last_update_step, table_step);
        ++h.update_count;
        h.frequency += w.offsets[i + 1] - w.offsets[i];
      }
    }
  }
  Release();
  return absl::OkStatus();
}

absl::Status VocabCache::Prefetch(absl::Span<const TableIds> next) {
  absl::Status previous = WaitForPrefetch();
  auto pending = std::make_unique<PendingBatch>();
  PSDB_RETURN_IF_ERROR(Prepare(next, pending.get()));
  auto fetch = std::make_shared<Fetch>();
  fetch->prefetch = true;
  {
    absl::MutexLock l(&mu_);
    ReleasePrefetchPins();
    PSDB_RETURN_IF_ERROR(Assign(pending.get(), /*count_access=*/false,
                                /*partial=*/true, fetch.get()));
    prefetch_ = std::move(pending);
  }
  prefetch_thread_ = std::thread([this, fetch] {
    absl::Status s = RunFetch(fetch.get());
    absl::MutexLock l(&mu_);
    if (!s.ok()) {
      prefetch_.reset();  // RunFetch released its pins
      prefetch_status_.Update(s);
    }
  });
  return previous;
}

absl::Status VocabCache::Flush() {
  PSDB_RETURN_IF_ERROR(WaitForPrefetch());
  if (options_.mode != CacheMode::kWriteBack) return absl::OkStatus();
  std::vector<std::vector<uint64_t>> keys(tables_.size());
  std::vector<RowBatch> rows(tables_.size());
  {
    absl::MutexLock l(&mu_);
    std::vector<std::vector<int32_t>> slots(tables_.size());
    for (size_t p = 0; p < pools_.size(); ++p) {
      const SlotMap& map = *pools_[p]->map;
      for (int32_t s = 0; s < map.capacity(); ++s) {
        if (!map.occupied(s)) continue;
        keys[map.key(s).table].push_back(map.key(s).id);
        slots[map.key(s).table].push_back(s);
      }
    }
    for (size_t t = 0; t < tables_.size(); ++t) {
      const Table& table = *tables_[t];
      Pool& pool = *pools_[table.pool];
      rows[t].Resize(table.dim, table.state_size, slots[t].size());
      PSDB_RETURN_IF_ERROR(
          pool.backend->Read(slots[t], absl::MakeSpan(rows[t].values),
                             absl::MakeSpan(rows[t].state), table.state_size));
      for (size_t i = 0; i < slots[t].size(); ++i) {
        rows[t].headers[i] = pool.headers[slots[t][i]];
      }
    }
  }
  for (size_t t = 0; t < tables_.size(); ++t) {
    Table& table = *tables_[t];
    if (!keys[t].empty()) {
      PSDB_RETURN_IF_ERROR(client_->PutRows(table.name, keys[t], rows[t]));
    }
    absl::MutexLock l(&mu_);
    table.stats.write_backs += keys[t].size();
    table.stats.bytes_moved += RowBytes(rows[t]);
  }
  return absl::OkStatus();
}

std::vector<TableCacheStats> VocabCache::Stats() const {
  absl::MutexLock l(&mu_);
  std::vector<TableCacheStats> out;
  for (const auto& t : tables_) out.push_back(t->stats);
  return out;
}

int64_t VocabCache::CachedRows(absl::string_view table) const {
  absl::StatusOr<int> t = TableIndex(table);
  if (!t.ok()) return -1;
  absl::MutexLock l(&mu_);
  return pools_[tables_[*t]->pool]->map->size();
}

}  // namespace psdb::cache
