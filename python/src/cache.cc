#include "python/src/cache.h"

#include <pybind11/numpy.h>
#include <pybind11/stl.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "psdb/vocab_cache.h"
#include "python/src/arrays.h"
#include "python/src/client.h"
#include "python/src/errors.h"

namespace psdb::python {
namespace {

namespace py = pybind11;
using cache::BackendKind;
using cache::CacheMode;
using cache::PolicyKind;
using cache::VocabCache;

constexpr const char* ModeName(CacheMode mode) {
  return mode == CacheMode::kPushThrough ? "push_through" : "write_back";
}
constexpr const char* BackendName(BackendKind kind) {
  return kind == BackendKind::kCuda ? "cuda" : "cpu";
}

template <typename Kind>
Kind ParseName(const char* what, const std::string& name,
               std::initializer_list<Kind> kinds,
               std::string (*name_of)(Kind)) {
  std::string known;
  for (Kind k : kinds) {
    if (name == name_of(k)) return k;
    absl::StrAppend(&known, known.empty() ? "" : " | ", name_of(k));
  }
  ThrowValueError(
      absl::StrCat("unknown ", what, " \"", name, "\" (", known, ")"));
}

// One batch converted for a call: the key views must outlive the call.
struct Batch {
  std::vector<std::string> tables;
  std::vector<KeyArray> keys;
  std::vector<cache::TableIds> ids;
};

Batch ParseBatch(const py::handle& batch) {
  std::vector<std::pair<py::handle, py::handle>> items;
  py::list pairs = py::isinstance<py::dict>(batch)
                       ? py::list(batch.attr("items")())
                       : py::list(py::reinterpret_borrow<py::object>(batch));
  Batch out;
  out.tables.reserve(pairs.size());
  out.keys.reserve(pairs.size());
  for (const py::handle pair : pairs) {
    py::tuple t;
    try {
      t = pair.cast<py::tuple>();
    } catch (const py::cast_error&) {
      ThrowValueError("a batch is a dict {table: ids} or (table, ids) pairs");
    }
    if (t.size() != 2 || !py::isinstance<py::str>(t[0])) {
      ThrowValueError("a batch is a dict {table: ids} or (table, ids) pairs");
    }
    out.tables.push_back(t[0].cast<std::string>());
    out.keys.emplace_back(t[1], "ids");
  }
  for (size_t i = 0; i < out.tables.size(); ++i) {
    out.ids.push_back({out.tables[i], out.keys[i].span()});
  }
  return out;
}

class CacheHandle : public ClientDependent {
 public:
  CacheHandle(std::shared_ptr<ClientHandle> client,
              std::unique_ptr<VocabCache> cache,
              absl::flat_hash_map<std::string, int> dims)
      : client_(std::move(client)),
        cache_(std::move(cache)),
        dims_(std::move(dims)) {}

  ~CacheHandle() override {
    // Waits for a running prefetch: let other Python threads run. The last
    // reference may also drop in ClientHandle::Close, without the GIL.
    if (PyGILState_Check()) {
      py::gil_scoped_release nogil;
      Detach();
    } else {
      Detach();
    }
  }

  void Detach() override {
    absl::MutexLock lock(&mu_);
    cache_.reset();
  }

  // f(VocabCache&) with the GIL released, the client open and the cache
  // not closed; ValueError otherwise.
  template <typename F>
  auto Run(F&& f) {
    using Result = std::invoke_result_t<F, VocabCache&>;
    bool closed = false;
    std::optional<Result> result = client_->Call([&](ParameterClient&) {
      absl::MutexLock lock(&mu_);
      std::optional<Result> r;
      if (cache_ == nullptr) {
        closed = true;
      } else {
        r.emplace(f(*cache_));
      }
      return r;
    });
    if (closed) throw py::value_error("cache is closed");
    return *std::move(result);
  }

  void Close() {
    py::gil_scoped_release nogil;
    Detach();
  }

  py::list Lookup(const py::handle& batch) {
    Batch b = ParseBatch(batch);
    std::vector<std::vector<float>> rows;
    ThrowIfError(Run([&](VocabCache& c) { return c.Lookup(b.ids, &rows); }));
    py::list out;
    for (size_t i = 0; i < rows.size(); ++i) {
      out.append(ArrayFromVector(std::move(rows[i]), b.keys[i].size(),
                                 DimOf(b.tables[i])));
    }
    looked_up_ = std::move(b.tables);
    return out;
  }

  void Update(const py::handle& grads, int64_t step) {
    std::vector<FloatArray> arrays;
    if (py::isinstance<py::dict>(grads)) {
      const py::dict d = py::reinterpret_borrow<py::dict>(grads);
      if (d.size() != looked_up_.size()) {
        ThrowValueError(absl::StrCat("update got gradients for ", d.size(),
                                     " tables, the batch has ",
                                     looked_up_.size()));
      }
      arrays.reserve(looked_up_.size());
      for (const std::string& table : looked_up_) {
        if (!d.contains(table)) {
          ThrowValueError(
              absl::StrCat("update has no gradient for table ", table));
        }
        arrays.emplace_back(d[py::str(table)], "grads");
      }
    } else {
      const py::list list(py::reinterpret_borrow<py::object>(grads));
      arrays.reserve(list.size());
      for (const py::handle g : list) arrays.emplace_back(g, "grads");
    }
    std::vector<absl::Span<const float>> spans;
    for (const FloatArray& a : arrays) spans.push_back(a.span());
    ThrowIfError(Run([&](VocabCache& c) { return c.Update(spans, step); }));
  }

  void Announce(const py::handle& batch) {
    const Batch b = ParseBatch(batch);
    Run([&](VocabCache& c) {
      c.Announce(b.ids);
      return true;
    });
  }

  void Prefetch(const py::handle& batch) {
    const Batch b = ParseBatch(batch);
    ThrowIfError(Run([&](VocabCache& c) { return c.Prefetch(b.ids); }));
  }

  void Release() {
    Run([](VocabCache& c) {
      c.Release();
      return true;
    });
  }

  void Flush() {
    ThrowIfError(Run([](VocabCache& c) { return c.Flush(); }));
  }

  py::dict Stats() {
    const std::vector<cache::TableCacheStats> stats =
        Run([](VocabCache& c) { return c.Stats(); });
    py::dict out;
    for (const cache::TableCacheStats& s : stats) {
      py::dict d;
      d["table"] = s.table;
      d["lookups"] = s.lookups;
      d["unique_ids"] = s.unique_ids;
      d["hits"] = s.hits;
      d["misses"] = s.misses;
      d["refreshes"] = s.refreshes;
      d["prefetched"] = s.prefetched;
      d["evictions"] = s.evictions;
      d["write_backs"] = s.write_backs;
      d["bytes_moved"] = s.bytes_moved;
      d["hit_rate"] = s.hit_rate();
      out[py::str(s.table)] = d;
    }
    return out;
  }

  int64_t CachedRows(const std::string& table) {
    const int64_t n = Run([&](VocabCache& c) { return c.CachedRows(table); });
    if (n < 0) throw py::key_error(absl::StrCat("unknown table ", table));
    return n;
  }

 private:
  int DimOf(const std::string& table) const {
    const auto it = dims_.find(table);
    return it == dims_.end() ? 0 : it->second;
  }

  const std::shared_ptr<ClientHandle> client_;
  absl::Mutex mu_;
  std::unique_ptr<VocabCache> cache_ ABSL_GUARDED_BY(mu_);
  const absl::flat_hash_map<std::string, int> dims_;
  // Tables of the last Lookup, in order (for update's dict form). Touched
  // with the GIL held only.
  std::vector<std::string> looked_up_;
};

std::shared_ptr<CacheHandle> CreateCache(
    std::shared_ptr<ClientHandle> client, std::vector<std::string> tables,
    int64_t capacity_rows, const std::string& policy, const std::string& mode,
    bool shared_capacity, int64_t max_staleness, const std::string& backend) {
  cache::VocabCacheOptions options;
  options.capacity_rows = capacity_rows;
  options.policy = ParseName<PolicyKind>(
      "policy", policy,
      {PolicyKind::kLru, PolicyKind::kLfu, PolicyKind::kLookahead},
      [](PolicyKind k) { return std::string(cache::PolicyName(k)); });
  options.mode = ParseName<CacheMode>(
      "mode", mode, {CacheMode::kWriteBack, CacheMode::kPushThrough},
      [](CacheMode k) { return std::string(ModeName(k)); });
  options.backend = ParseName<BackendKind>(
      "backend", backend, {BackendKind::kCpu, BackendKind::kCuda},
      [](BackendKind k) { return std::string(BackendName(k)); });
  options.shared_capacity = shared_capacity;
  options.max_staleness = max_staleness;
  absl::flat_hash_map<std::string, int> dims;
  for (const std::string& table : tables) dims[table] = client->Dim(table);
  std::unique_ptr<VocabCache> cache =
      ValueOrThrow(client->Call([&](ParameterClient& p) {
        return VocabCache::Create(&p, tables, options);
      }));
  auto handle =
      std::make_shared<CacheHandle>(client, std::move(cache), std::move(dims));
  client->AddDependent(handle);
  return handle;
}

}  // namespace

void RegisterCache(py::module_& m) {
  const cache::VocabCacheOptions defaults;
  py::class_<CacheHandle, std::shared_ptr<CacheHandle>>(m, "VocabCache",
                                                        R"doc(
The worker-side vocab cache (psdb/vocab_cache.h) in front of a Client.

VocabCache(client, tables, *, capacity_rows, policy="lru", mode="write_back",
           shared_capacity=False, max_staleness=0, backend="cpu")
policy: lru | lfu | lookahead; mode: write_back | push_through;
backend: cpu | cuda. A batch is a dict {table: ids} (1-D integer arrays) or a
list of (table, ids) pairs; each table at most once.
)doc")
      .def(py::init(&CreateCache), py::arg("client"), py::arg("tables"),
           py::kw_only(), py::arg("capacity_rows"),
           py::arg("policy") = std::string(cache::PolicyName(defaults.policy)),
           py::arg("mode") = std::string(ModeName(defaults.mode)),
           py::arg("shared_capacity") = defaults.shared_capacity,
           py::arg("max_staleness") = defaults.max_staleness,
           py::arg("backend") = std::string(BackendName(defaults.backend)))
      .def("lookup", &CacheHandle::Lookup, py::arg("batch"),
           "Looks up a batch; returns [rows (n_i, dim_i) float32] in batch "
           "order. The rows stay pinned until update() or release().")
      .def("update", &CacheHandle::Update, py::arg("grads"),
           py::arg("step") = 0,
           "Applies the looked-up batch's gradients: a list of float32 "
           "arrays (n_i, dim_i) in lookup order, or a dict {table: grads}. "
           "push_through pushes them at `step` (0: the table's step + 1); "
           "write_back counts steps itself.")
      .def("release", &CacheHandle::Release,
           "Releases the looked-up batch without an update (evaluation).")
      .def("announce", &CacheHandle::Announce, py::arg("batch"),
           "Tells the lookahead policy about a future batch, in lookup "
           "order. No-op for lru and lfu.")
      .def("prefetch", &CacheHandle::Prefetch, py::arg("batch"),
           "Starts fetching the next batch's misses in the background.")
      .def("flush", &CacheHandle::Flush,
           "write_back: writes every cached row back to the store (rows stay "
           "cached). push_through: waits for a prefetch.")
      .def("stats", &CacheHandle::Stats,
           "{table: {lookups, unique_ids, hits, misses, refreshes, "
           "prefetched, evictions, write_backs, bytes_moved, hit_rate}}")
      .def("cached_rows", &CacheHandle::CachedRows, py::arg("table"),
           "Rows cached in the pool of `table`.")
      .def("close", &CacheHandle::Close,
           "Destroys the cache without flushing (call flush() first).")
      .def("__enter__", [](py::object self) { return self; })
      .def(
          "__exit__",
          [](CacheHandle& c, py::handle type, py::handle, py::handle) {
            // A clean exit flushes (write-back rows reach the store); an
            // exception only closes, so the original error propagates.
            if (type.is_none()) c.Flush();
            c.Close();
          },
          "Flushes on a clean exit, then closes.");
}

}  // namespace psdb::python
