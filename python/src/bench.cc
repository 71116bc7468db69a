#include "python/src/bench.h"

#include <pybind11/numpy.h>

#include <chrono>
#include <vector>

#include "absl/strings/str_cat.h"
#include "python/src/arrays.h"
#include "python/src/client.h"
#include "python/src/errors.h"

namespace psdb::python {
namespace {

namespace py = pybind11;

// Runs every row of `batches` (a 2-D uint64/int64 array, one batch per row)
// through client.Pull (op "pull", into one reused buffer) or client.Push
// (op "push", with `grads` (batch, dim) for every batch) in C++, with the
// GIL released, and returns the seconds it took. The peer of the same loop
// written in Python over psdb.Client.
double BenchLoop(ClientHandle& c, const std::string& table,
                 const py::array& batches, const std::string& op,
                 py::object grads) {
  if (batches.ndim() != 2) ThrowValueError("batches must be 2-D");
  const size_t count = static_cast<size_t>(batches.shape(0));
  const size_t size = static_cast<size_t>(batches.shape(1));
  std::vector<KeyArray> keys;
  keys.reserve(count);
  for (size_t i = 0; i < count; ++i) {
    keys.emplace_back(batches[py::int_(i)], "batches[i]");
  }
  const int dim = c.Dim(table);
  std::vector<float> out(size * dim);
  std::optional<FloatArray> g;
  if (op == "push") {
    g.emplace(grads, "grads");
  } else if (op != "pull") {
    ThrowValueError(absl::StrCat("unknown op ", op));
  }
  double seconds = 0;
  ThrowIfError(c.Call([&](ParameterClient& client) {
    const auto start = std::chrono::steady_clock::now();
    for (const KeyArray& k : keys) {
      const absl::Status status =
          g.has_value() ? client.Push(table, k.span(), g->span(), {})
                        : client.Pull(table, k.span(), absl::MakeSpan(out), {});
      if (!status.ok()) return status;
    }
    seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
            .count();
    return absl::OkStatus();
  }));
  return seconds;
}

}  // namespace

void RegisterBench(py::module_& m) {
  m.def("_bench_loop", &BenchLoop, py::arg("client"), py::arg("table"),
        py::arg("batches"), py::arg("op"), py::arg("grads") = py::none(),
        "Benchmark peer: the batches' pulls or pushes run in a C++ loop "
        "over the same ParameterClient; returns seconds.");
}

}  // namespace psdb::python
