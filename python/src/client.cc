#include "python/src/client.h"

#include <pybind11/numpy.h>
#include <pybind11/stl.h>

#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "optim/optimizer.h"
#include "psdb/client_url.h"
#include "python/src/arrays.h"
#include "python/src/errors.h"
#include "python/src/open_options.h"
#include "python/src/table_spec.h"

namespace psdb::python {

namespace py = pybind11;

ClientHandle::ClientHandle(std::string url,
                           std::unique_ptr<ParameterClient> client)
    : url_(std::move(url)), client_(std::move(client)) {}

ClientHandle::~ClientHandle() {
  // Closing a local store flushes it to RocksDB: let other threads run.
  if (PyGILState_Check()) {
    py::gil_scoped_release nogil;
    absl::MutexLock lock(&mu_);
    client_.reset();
  } else {
    absl::MutexLock lock(&mu_);
    client_.reset();
  }
}

void ClientHandle::Close() {
  py::gil_scoped_release nogil;
  absl::MutexLock lock(&mu_);
  for (const std::weak_ptr<ClientDependent>& weak : dependents_) {
    if (std::shared_ptr<ClientDependent> dependent = weak.lock()) {
      dependent->Detach();
    }
  }
  dependents_.clear();
  client_.reset();
}

bool ClientHandle::closed() const {
  absl::ReaderMutexLock lock(&mu_);
  return client_ == nullptr;
}

void ClientHandle::AddDependent(std::weak_ptr<ClientDependent> dependent) {
  py::gil_scoped_release nogil;
  absl::MutexLock lock(&mu_);
  if (client_ == nullptr) return;
  std::erase_if(dependents_, [](const std::weak_ptr<ClientDependent>& w) {
    return w.expired();
  });
  dependents_.push_back(std::move(dependent));
}

int ClientHandle::Dim(const std::string& table) {
  {
    absl::MutexLock lock(&dims_mu_);
    if (auto it = dims_.find(table); it != dims_.end()) return it->second;
  }
  const TableSpec spec =
      ValueOrThrow(Call([&](ParameterClient& c) { return c.GetTable(table); }));
  absl::MutexLock lock(&dims_mu_);
  dims_[table] = spec.dim;
  return spec.dim;
}

void ClientHandle::Forget(const std::string& table) {
  absl::MutexLock lock(&dims_mu_);
  dims_.erase(table);
}

namespace {

// Whole rows in Python: values (n, dim) and state (n, state_size) float32,
// and the RowHeader fields (psdb/row.h) as 1-D arrays.
struct Rows {
  py::array values, state, last_update_step, update_count, frequency;
};

template <typename T>
py::array_t<T> HeaderField(const RowBatch& batch, T RowHeader::*field) {
  py::array_t<T> out(static_cast<ssize_t>(batch.size()));
  T* data = out.mutable_data();
  for (size_t i = 0; i < batch.size(); ++i) data[i] = batch.headers[i].*field;
  return out;
}

Rows RowsFromBatch(RowBatch&& batch) {
  Rows rows;
  const size_t n = batch.size();
  rows.last_update_step = HeaderField(batch, &RowHeader::last_update_step);
  rows.update_count = HeaderField(batch, &RowHeader::update_count);
  rows.frequency = HeaderField(batch, &RowHeader::frequency);
  rows.values = ArrayFromVector(std::move(batch.values), n, batch.dim);
  rows.state = ArrayFromVector(std::move(batch.state), n, batch.state_size);
  return rows;
}

// RowBatch assigns from vectors it owns, so put_rows copies once here.
RowBatch BatchFromRows(const Rows& rows, size_t n) {
  const FloatArray values(rows.values, "rows.values");
  const FloatArray state(rows.state, "rows.state");
  for (const auto* a : {&values, &state}) {
    if (a->ndim() != 2 || a->shape(0) != static_cast<int64_t>(n)) {
      ThrowValueError(absl::StrCat(a == &values ? "rows.values" : "rows.state",
                                   " must have shape (", n, ", _)"));
    }
  }
  const KeyArray steps(rows.last_update_step, "rows.last_update_step");
  const KeyArray counts(rows.update_count, "rows.update_count");
  const KeyArray frequency(rows.frequency, "rows.frequency");
  for (const KeyArray* a : {&steps, &counts, &frequency}) {
    if (a->size() != n) {
      ThrowValueError(absl::StrCat("rows header arrays must have ", n,
                                   " entries, got ", a->size()));
    }
  }
  RowBatch batch;
  batch.Resize(static_cast<int>(values.shape(1)),
               static_cast<int>(state.shape(1)), n);
  std::copy(values.span().begin(), values.span().end(), batch.values.begin());
  std::copy(state.span().begin(), state.span().end(), batch.state.begin());
  for (size_t i = 0; i < n; ++i) {
    batch.headers[i].last_update_step = static_cast<int64_t>(steps.span()[i]);
    batch.headers[i].update_count = counts.span()[i];
    batch.headers[i].frequency = frequency.span()[i];
  }
  return batch;
}

double Seconds(absl::Duration d) { return absl::ToDoubleSeconds(d); }

std::shared_ptr<ClientHandle> Open(const std::string& url,
                                   const py::kwargs& kwargs) {
  const OpenOptions options = ParseOpenOptions(url, kwargs);
  absl::StatusOr<std::unique_ptr<ParameterClient>> client;
  {
    py::gil_scoped_release nogil;
    client = rpc::OpenParameterClient(url, options.remote, options.local);
  }
  return std::make_shared<ClientHandle>(url, ValueOrThrow(std::move(client)));
}

py::dict TableStatsDict(const TableStats& t) {
  py::dict d;
  d["name"] = t.name;
  d["memory_rows"] = t.memory_rows;
  d["memory_bytes"] = t.memory_bytes;
  d["disk_rows"] = t.disk_rows;
  d["disk_bytes"] = t.disk_bytes;
  d["hits"] = t.hits;
  d["misses"] = t.misses;
  d["created"] = t.created;
  d["evictions"] = t.evictions;
  d["background_evictions"] = t.background_evictions;
  d["dirty_writes"] = t.dirty_writes;
  d["not_admitted"] = t.not_admitted;
  d["step"] = t.step;
  d["disk_compaction_pending"] = t.disk_compaction_pending;
  return d;
}

py::dict StatsDict(const StoreStats& s) {
  py::dict tables;
  for (const TableStats& t : s.tables)
    tables[py::str(t.name)] = TableStatsDict(t);
  py::dict d;
  d["tables"] = tables;
  d["memory_budget_bytes"] = s.memory_budget_bytes;
  d["memory_used_bytes"] = s.memory_used_bytes;
  d["memory_yielded_bytes"] = s.memory_yielded_bytes;
  d["disk_running_compactions"] = s.disk_running_compactions;
  d["checkpoints"] = s.checkpoints;
  d["last_checkpoint_duration_s"] = Seconds(s.last_checkpoint_duration);
  d["total_checkpoint_duration_s"] = Seconds(s.total_checkpoint_duration);
  return d;
}

// A version argument: None, a checkpoint id or a psdb.Version.
std::string VersionId(const py::object& version) {
  if (version.is_none()) return "";
  if (py::isinstance<ReadVersion>(version)) {
    return version.cast<const ReadVersion&>().checkpoint_id;
  }
  if (py::isinstance<py::str>(version)) return version.cast<std::string>();
  ThrowValueError(
      "version must be None, a checkpoint id (str) or psdb.Version");
}

// A returned version: None from clients without versions.
py::object VersionObject(ReadVersion v) {
  if (v.checkpoint_id.empty()) return py::none();
  return py::cast(std::move(v));
}

// Several tables' rows at one version (ParameterClient::PullConsistent):
// reads maps table -> ids; returns {table: (len(ids), dim) float32} in the
// same order, and the version read.
std::pair<py::dict, py::object> PullTables(ClientHandle& c,
                                           const py::dict& reads, bool serving,
                                           const py::object& version) {
  std::vector<std::string> tables;
  std::vector<std::unique_ptr<KeyArray>> keys;
  std::vector<py::array_t<float>> rows;
  std::vector<TableRead> table_reads;
  for (const auto& [name, ids] : reads) {
    tables.push_back(py::cast<std::string>(name));
    keys.push_back(std::make_unique<KeyArray>(ids));
    const int dim = c.Dim(tables.back());
    rows.emplace_back(std::vector<ssize_t>{
        static_cast<ssize_t>(keys.back()->size()), static_cast<ssize_t>(dim)});
  }
  for (size_t i = 0; i < tables.size(); ++i) {
    table_reads.push_back(
        {tables[i], keys[i]->span(),
         absl::MakeSpan(rows[i].mutable_data(), rows[i].size())});
  }
  ConsistentReadOptions options;
  options.serving = serving;
  options.version = VersionId(version);
  ReadVersion read = ValueOrThrow(c.Call([&](ParameterClient& client) {
    return client.PullConsistent(table_reads, options);
  }));
  py::dict out;
  for (size_t i = 0; i < tables.size(); ++i) out[py::str(tables[i])] = rows[i];
  return {out, VersionObject(std::move(read))};
}

py::object Pull(ClientHandle& c, const std::string& table, py::handle ids,
                py::object out, bool serving, const py::object& version,
                bool return_version) {
  if (return_version) {
    // One table at one version: the consistent read, which says which.
    if (!out.is_none()) {
      ThrowValueError("out= is not supported with return_version=True");
    }
    py::dict reads;
    reads[py::str(table)] = ids;
    auto [rows, read] = PullTables(c, reads, serving, version);
    return py::make_tuple(rows[py::str(table)], read);
  }
  const KeyArray keys(ids);
  PullOptions options;
  options.serving = serving;
  options.version = VersionId(version);
  const auto pull = [&](absl::Span<float> rows) {
    return c.Call([&](ParameterClient& client) {
      return client.Pull(table, keys.span(), rows, options);
    });
  };
  int dim = c.Dim(table);
  if (!out.is_none()) {
    if (!py::isinstance<py::array>(out)) {
      ThrowValueError("out must be a numpy.ndarray");
    }
    ThrowIfError(pull(OutRows(out.cast<py::array>(), keys.size(), dim)));
    return out;
  }
  py::array_t<float> rows(
      {static_cast<ssize_t>(keys.size()), static_cast<ssize_t>(dim)});
  absl::Status status = pull({rows.mutable_data(), keys.size() * dim});
  if (absl::IsInvalidArgument(status) || absl::IsAborted(status)) {
    // The cached dim may be stale: another client recreated the table (the
    // local client says InvalidArgument, a remote one, which caches specs
    // too, Aborted "changed on the server during the call; retry").
    c.Forget(table);
    if (const int fresh = c.Dim(table); fresh != dim) {
      dim = fresh;
      rows = py::array_t<float>(
          {static_cast<ssize_t>(keys.size()), static_cast<ssize_t>(dim)});
      status = pull({rows.mutable_data(), keys.size() * dim});
    }
  }
  ThrowIfError(status);
  return rows;
}

void Push(ClientHandle& c, const std::string& table, py::handle ids,
          py::handle grads, std::optional<int64_t> step,
          std::optional<int32_t> worker_id) {
  const KeyArray keys(ids);
  const FloatArray g(grads, "grads");
  if (g.ndim() == 2 && g.shape(0) != static_cast<int64_t>(keys.size())) {
    ThrowValueError(absl::StrCat("grads has ", g.shape(0), " rows for ",
                                 keys.size(), " ids"));
  }
  if (g.ndim() != 1 && g.ndim() != 2) {
    ThrowValueError(absl::StrCat("grads must be (n, dim) or (n*dim,), got ",
                                 g.ndim(), "-D"));
  }
  PushOptions options;
  options.step = step.value_or(options.step);
  options.worker_id = worker_id.value_or(options.worker_id);
  ThrowIfError(c.Call([&](ParameterClient& client) {
    return client.Push(table, keys.span(), g.span(), options);
  }));
}

}  // namespace

void RegisterClient(py::module_& m) {
  py::class_<Rows>(m, "Rows", R"doc(
Whole rows of one table (Client.pull_rows / Client.put_rows): values
(n, dim) and state (n, state_size) as float32, and the row header
(psdb/row.h RowHeader) as 1-D arrays last_update_step (int64),
update_count (uint64) and frequency (uint64). The arrays may be replaced
or modified in place before put_rows.
)doc")
      .def(py::init([](py::object values, py::object state,
                       py::object last_update_step, py::object update_count,
                       py::object frequency) {
             Rows rows;
             rows.values = py::array::ensure(values);
             if (!rows.values || rows.values.ndim() != 2) {
               PyErr_Clear();
               ThrowValueError("values must be a 2-D array (n, dim)");
             }
             const ssize_t n = rows.values.shape(0);
             const auto or_zeros = [n](py::object a, py::dtype dtype) {
               if (!a.is_none()) return py::array::ensure(a);
               return py::array(dtype, {n}, {});
             };
             rows.state = state.is_none()
                              ? py::array(py::dtype::of<float>(),
                                          std::vector<ssize_t>{n, 0}, {})
                              : py::array::ensure(state);
             rows.last_update_step =
                 or_zeros(last_update_step, py::dtype::of<int64_t>());
             rows.update_count =
                 or_zeros(update_count, py::dtype::of<uint64_t>());
             rows.frequency = or_zeros(frequency, py::dtype::of<uint64_t>());
             for (py::array* a : {&rows.state, &rows.last_update_step,
                                  &rows.update_count, &rows.frequency}) {
               if (!*a) ThrowValueError("Rows fields must be array-like");
             }
             // array(dtype, shape) leaves memory uninitialized: zero it.
             if (last_update_step.is_none())
               rows.last_update_step.attr("fill")(0);
             if (update_count.is_none()) rows.update_count.attr("fill")(0);
             if (frequency.is_none()) rows.frequency.attr("fill")(0);
             return rows;
           }),
           py::arg("values"), py::arg("state") = py::none(),
           py::arg("last_update_step") = py::none(),
           py::arg("update_count") = py::none(),
           py::arg("frequency") = py::none())
      .def_readwrite("values", &Rows::values)
      .def_readwrite("state", &Rows::state)
      .def_readwrite("last_update_step", &Rows::last_update_step)
      .def_readwrite("update_count", &Rows::update_count)
      .def_readwrite("frequency", &Rows::frequency)
      .def("__len__", [](const Rows& r) { return r.values.shape(0); });

  py::class_<ReadVersion>(m, "Version",
                          "A checkpoint a serving replica reads from.")
      .def_readonly("checkpoint_id", &ReadVersion::checkpoint_id)
      .def_readonly("step", &ReadVersion::step)
      .def_readonly("seq", &ReadVersion::seq)
      .def("__eq__",
           [](const ReadVersion& a, const ReadVersion& b) {
             return a.checkpoint_id == b.checkpoint_id;
           })
      .def("__hash__",
           [](const ReadVersion& v) {
             return py::hash(py::str(v.checkpoint_id));
           })
      .def("__str__", [](const ReadVersion& v) { return v.checkpoint_id; })
      .def("__repr__", [](const ReadVersion& v) {
        return absl::StrCat("psdb.Version('", v.checkpoint_id,
                            "', step=", v.step, ", seq=", v.seq, ")");
      });

  py::class_<ClientHandle, std::shared_ptr<ClientHandle>> client(
      m, "Client", "A psdb client; see psdb.open.");
  client
      .def(
          "drop_table",
          [](ClientHandle& c, const std::string& table) {
            const absl::Status status =
                c.Call([&](ParameterClient& p) { return p.DropTable(table); });
            c.Forget(table);
            ThrowIfError(status);
          },
          py::arg("name"), "Drops a table and its rows. KeyError if unknown.")
      .def(
          "list_tables",
          [](ClientHandle& c) {
            return ValueOrThrow(
                c.Call([](ParameterClient& p) { return p.ListTables(); }));
          },
          "The tables, as [psdb.TableSpec].")
      .def(
          "get_table",
          [](ClientHandle& c, const std::string& table) {
            return ValueOrThrow(
                c.Call([&](ParameterClient& p) { return p.GetTable(table); }));
          },
          py::arg("name"), "The table's psdb.TableSpec. KeyError if unknown.")
      .def("pull", &Pull, py::arg("table"), py::arg("ids"), py::kw_only(),
           py::arg("out") = py::none(), py::arg("serving") = false,
           py::arg("version") = py::none(), py::arg("return_version") = false,
           R"doc(Rows of `ids` as float32 (len(ids), dim), created on first
sight (get-or-create); duplicate ids are answered per position. ids: a 1-D
integer array. out: a C-contiguous float32 (len(ids), dim) array to fill
and return instead of a new one. serving=True creates nothing: missing ids
get the table's serving_default.

Serving replicas hold versions (checkpoints; docs/serving.md). version: a
checkpoint id or psdb.Version to read (KeyError when a shard does not
hold it); None reads the newest. return_version=True returns
(rows, version): the rows all come from that one psdb.Version, read as
pull_tables does; version is None from a client without versions (local:,
training servers).)doc")
      .def(
          "pull_tables",
          [](ClientHandle& c, const py::dict& reads, bool serving,
             const py::object& version, bool return_version) -> py::object {
            auto [rows, read] = PullTables(c, reads, serving, version);
            if (!return_version) return std::move(rows);
            return py::make_tuple(rows, read);
          },
          py::arg("reads"), py::kw_only(), py::arg("serving") = false,
          py::arg("version") = py::none(), py::arg("return_version") = false,
          R"doc(Several tables' rows at one version: reads maps table name
to ids; returns {table: float32 (len(ids), dim)} in the order given, every
row of every table from one version; with return_version=True,
(tables, version), the psdb.Version read (None from a client without
versions). Over replicas: the newest version every shard involved holds,
never older than one this client returned before; FailedPreconditionError
naming each shard's versions when none is common before the call's
deadline. version: read that checkpoint id or psdb.Version instead.)doc")
      .def("push", &Push, py::arg("table"), py::arg("ids"), py::arg("grads"),
           py::kw_only(), py::arg("step") = py::none(),
           py::arg("worker_id") = py::none(),
           R"doc(Applies gradients with the table's optimizer. grads: float32
(len(ids), dim) or (len(ids) * dim,); rows of duplicate ids are summed and
the optimizer runs once per id. step: the trainer's global step (>= 1;
None = the table's step + 1). worker_id: for synchronous clusters. A
non-finite gradient, or one beyond 1e18 in magnitude (alone or summed over
an id's duplicates), is a ValueError and changes nothing (table option
non_finite="reject").)doc")
      .def(
          "pull_rows",
          [](ClientHandle& c, const std::string& table, py::handle ids) {
            const KeyArray keys(ids);
            RowBatch batch;
            ThrowIfError(c.Call([&](ParameterClient& p) {
              return p.PullRows(table, keys.span(), &batch);
            }));
            return RowsFromBatch(std::move(batch));
          },
          py::arg("table"), py::arg("ids"),
          "Whole rows (values, optimizer state, header) as psdb.Rows; "
          "get-or-create.")
      .def(
          "put_rows",
          [](ClientHandle& c, const std::string& table, py::handle ids,
             const Rows& rows) {
            const KeyArray keys(ids);
            const RowBatch batch = BatchFromRows(rows, keys.size());
            ThrowIfError(c.Call([&](ParameterClient& p) {
              return p.PutRows(table, keys.span(), batch);
            }));
          },
          py::arg("table"), py::arg("ids"), py::arg("rows"),
          "Assigns whole rows (no optimizer), creating them as needed; for "
          "duplicate ids the last one wins.")
      .def(
          "checkpoint",
          [](ClientHandle& c, const std::string& dir,
             std::optional<int> keep_last) {
            CheckpointOptions options;
            options.keep_last = keep_last.value_or(options.keep_last);
            const CheckpointInfo info =
                ValueOrThrow(c.Call([&](ParameterClient& p) {
                  return p.Checkpoint(dir, options);
                }));
            py::dict d;
            d["path"] = info.path;
            d["step"] = info.step;
            d["rows_flushed"] = info.rows_flushed;
            d["rows_expired"] = info.rows_expired;
            d["duration_s"] = Seconds(info.duration);
            return d;
          },
          py::arg("dir"), py::kw_only(), py::arg("keep_last") = py::none(),
          "Writes a checkpoint under `dir` (on the machine(s) holding the "
          "data), keeping the newest keep_last (None: 3, 0: all). Returns "
          "{path, step, rows_flushed, rows_expired, duration_s}.")
      .def(
          "stats",
          [](ClientHandle& c) {
            return StatsDict(ValueOrThrow(
                c.Call([](ParameterClient& p) { return p.Stats(); })));
          },
          "{tables: {name: {TableStats fields}}, memory_budget_bytes, "
          "memory_used_bytes, memory_yielded_bytes, disk_running_compactions, "
          "checkpoints, "
          "last_checkpoint_duration_s, total_checkpoint_duration_s}")
      .def("close", &ClientHandle::Close,
           "Waits for calls in flight, closes the caches opened over this "
           "client (without flushing them), then the client (a local store "
           "flushes its rows to disk). Later calls raise ValueError.")
      .def_property_readonly("closed", &ClientHandle::closed)
      .def_property_readonly("url", &ClientHandle::url)
      .def("__enter__", [](py::object self) { return self; })
      .def("__exit__", [](ClientHandle& c, py::handle, py::handle,
                          py::handle) { c.Close(); })
      .def("__repr__", [](const ClientHandle& c) {
        return absl::StrCat("psdb.Client('", c.url(), "'",
                            c.closed() ? ", closed" : "", ")");
      });
  RegisterCreateTable(client);

  m.def("open", &Open, py::arg("url"));
}

}  // namespace psdb::python
