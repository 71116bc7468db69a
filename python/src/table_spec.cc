#include "python/src/table_spec.h"

#include <charconv>
#include <cstdlib>
#include <limits>

#include "absl/strings/str_cat.h"
#include "manifest/manifest.h"
#include "optim/optimizer.h"
#include "python/src/errors.h"

namespace psdb::python {
namespace {

namespace py = pybind11;

int64_t CheckRange(const char* what, int64_t v, int64_t lo, int64_t hi) {
  if (v < lo || v > hi) {
    ThrowValueError(
        absl::StrCat(what, " = ", v, " is out of range [", lo, ", ", hi, "]"));
  }
  return v;
}

}  // namespace

double ShortestDouble(float f) {
  char buf[64];
  const auto result = std::to_chars(buf, buf + sizeof(buf) - 1, f);
  *result.ptr = '\0';
  return std::strtod(buf, nullptr);
}

TableSpec TableSpecFromArgs(const TableSpecArgs& a) {
  v1::TableSpec p;
  p.set_name(a.name);
  p.set_dim(static_cast<int32_t>(
      CheckRange("dim", a.dim, 0, std::numeric_limits<int32_t>::max())));
  v1::OptimizerSpec* o = p.mutable_optimizer();
  o->set_kind(a.optimizer);
  o->set_learning_rate(static_cast<float>(a.learning_rate));
  o->set_momentum(static_cast<float>(a.momentum));
  o->set_nesterov(a.nesterov);
  o->set_initial_accumulator(static_cast<float>(a.initial_accumulator));
  o->set_beta1(static_cast<float>(a.beta1));
  o->set_beta2(static_cast<float>(a.beta2));
  o->set_epsilon(static_cast<float>(a.epsilon));
  o->set_l1(static_cast<float>(a.l1));
  o->set_l2(static_cast<float>(a.l2));
  o->set_lr_power(static_cast<float>(a.lr_power));
  o->set_weight_decay(static_cast<float>(a.weight_decay));
  o->set_accumulator_decay(static_cast<float>(a.accumulator_decay));
  v1::InitializerSpec* init = p.mutable_initializer();
  init->set_kind(a.initializer);
  init->set_a(static_cast<float>(a.init_a));
  init->set_b(static_cast<float>(a.init_b));
  p.set_seed(a.seed);
  p.set_admission_threshold(static_cast<uint32_t>(
      CheckRange("admission_threshold", a.admission_threshold, 0,
                 std::numeric_limits<uint32_t>::max())));
  p.set_ttl_steps(a.ttl_steps);
  // Empty strings read as the defaults in TableSpecFromProto; here they are
  // a caller's mistake.
  if (a.non_finite.empty() || a.serving_default.empty() ||
      a.optimizer.empty() || a.initializer.empty()) {
    ThrowValueError(
        "optimizer, initializer, non_finite and serving_default "
        "must not be empty");
  }
  p.set_non_finite(a.non_finite);
  p.set_serving_default(a.serving_default);
  return ValueOrThrow(TableSpecFromProto(p));
}

void RegisterTableSpec(py::module_& m) {
  py::class_<TableSpec> spec(m, "TableSpec", R"doc(
A table's definition, as the store holds it (read-only).

Attributes: name, dim, optimizer, learning_rate, momentum, nesterov,
initial_accumulator, beta1, beta2, epsilon, l1, l2, lr_power, weight_decay,
accumulator_decay, initializer, init_a, init_b, seed, admission_threshold, ttl_steps,
non_finite, serving_default (the keyword arguments of Client.create_table),
and state_size: floats of optimizer state per row (SGD 0, Adagrad dim,
row-wise Adagrad 1, Adam 2*dim+1, FTRL 2*dim, ...).
)doc");
  // Names come from the proto form so they are spelled as everywhere else.
  spec.def_readonly("name", &TableSpec::name)
      .def_readonly("dim", &TableSpec::dim)
      .def_property_readonly("optimizer",
                             [](const TableSpec& s) {
                               return TableSpecToProto(s).optimizer().kind();
                             })
      .def_property_readonly("initializer",
                             [](const TableSpec& s) {
                               return TableSpecToProto(s).initializer().kind();
                             })
      .def_property_readonly(
          "non_finite",
          [](const TableSpec& s) { return TableSpecToProto(s).non_finite(); })
      .def_property_readonly("serving_default",
                             [](const TableSpec& s) {
                               return TableSpecToProto(s).serving_default();
                             })
      .def_readonly("seed", &TableSpec::seed)
      .def_readonly("admission_threshold", &TableSpec::admission_threshold)
      .def_readonly("ttl_steps", &TableSpec::ttl_steps)
      .def_property_readonly(
          "nesterov", [](const TableSpec& s) { return s.optimizer.nesterov; })
      .def_property_readonly("state_size", [](const TableSpec& s) {
        return optim::StateSize(s.optimizer, s.dim);
      });
  // The float fields, as the shortest decimals of their float32 values.
  const std::pair<const char*, float optim::OptimizerSpec::*>
      kOptimizerFloats[] = {
          {"learning_rate", &optim::OptimizerSpec::learning_rate},
          {"momentum", &optim::OptimizerSpec::momentum},
          {"initial_accumulator", &optim::OptimizerSpec::initial_accumulator},
          {"beta1", &optim::OptimizerSpec::beta1},
          {"beta2", &optim::OptimizerSpec::beta2},
          {"epsilon", &optim::OptimizerSpec::epsilon},
          {"l1", &optim::OptimizerSpec::l1},
          {"l2", &optim::OptimizerSpec::l2},
          {"lr_power", &optim::OptimizerSpec::lr_power},
          {"weight_decay", &optim::OptimizerSpec::weight_decay},
          {"accumulator_decay", &optim::OptimizerSpec::accumulator_decay}};
  for (const auto& [field, member] : kOptimizerFloats) {
    spec.def_property_readonly(field, [member = member](const TableSpec& s) {
      return ShortestDouble(s.optimizer.*member);
    });
  }
  spec.def_property_readonly(
          "init_a",
          [](const TableSpec& s) { return ShortestDouble(s.initializer.a); })
      .def_property_readonly(
          "init_b",
          [](const TableSpec& s) { return ShortestDouble(s.initializer.b); })
      .def("__eq__",
           [](const TableSpec& a, const TableSpec& b) { return a == b; })
      .def("__repr__", [](const TableSpec& s) {
        return absl::StrCat("psdb.TableSpec(", TableSpecToJson(s), ")");
      });
  // to_dict(): create_table's keyword arguments (name and dim included), so
  // client.create_table(**spec.to_dict()) recreates the table elsewhere.
  spec.def(
      "to_dict",
      [](py::object self) {
        py::dict d;
        for (const char* field : {"name",
                                  "dim",
                                  "optimizer",
                                  "learning_rate",
                                  "momentum",
                                  "nesterov",
                                  "initial_accumulator",
                                  "beta1",
                                  "beta2",
                                  "epsilon",
                                  "l1",
                                  "l2",
                                  "lr_power",
                                  "weight_decay",
                                  "accumulator_decay",
                                  "initializer",
                                  "init_a",
                                  "init_b",
                                  "seed",
                                  "admission_threshold",
                                  "ttl_steps",
                                  "non_finite",
                                  "serving_default"}) {
          d[field] = self.attr(field);
        }
        return d;
      },
      "create_table's keyword arguments for this spec (name and dim "
      "included).");
}

void RegisterCreateTable(
    py::class_<ClientHandle, std::shared_ptr<ClientHandle>>& client) {
  const TableSpec defaults;
  const v1::TableSpec names = TableSpecToProto(defaults);
  const optim::OptimizerSpec& o = defaults.optimizer;
  client.def(
      "create_table",
      [](ClientHandle& c, std::string name, int64_t dim, std::string optimizer,
         double learning_rate, double momentum, bool nesterov,
         double initial_accumulator, double beta1, double beta2, double epsilon,
         double l1, double l2, double lr_power, double weight_decay,
         double accumulator_decay, std::string initializer, double init_a,
         double init_b, uint64_t seed, int64_t admission_threshold,
         int64_t ttl_steps, std::string non_finite,
         std::string serving_default) {
        const TableSpec spec = TableSpecFromArgs({std::move(name),
                                                  dim,
                                                  std::move(optimizer),
                                                  learning_rate,
                                                  momentum,
                                                  nesterov,
                                                  initial_accumulator,
                                                  beta1,
                                                  beta2,
                                                  epsilon,
                                                  l1,
                                                  l2,
                                                  lr_power,
                                                  weight_decay,
                                                  accumulator_decay,
                                                  std::move(initializer),
                                                  init_a,
                                                  init_b,
                                                  seed,
                                                  admission_threshold,
                                                  ttl_steps,
                                                  std::move(non_finite),
                                                  std::move(serving_default)});
        c.Forget(spec.name);
        ThrowIfError(
            c.Call([&](ParameterClient& p) { return p.CreateTable(spec); }));
      },
      py::arg("name"), py::arg("dim"), py::kw_only(),
      py::arg("optimizer") = names.optimizer().kind(),
      py::arg("learning_rate") = ShortestDouble(o.learning_rate),
      py::arg("momentum") = ShortestDouble(o.momentum),
      py::arg("nesterov") = o.nesterov,
      py::arg("initial_accumulator") = ShortestDouble(o.initial_accumulator),
      py::arg("beta1") = ShortestDouble(o.beta1),
      py::arg("beta2") = ShortestDouble(o.beta2),
      py::arg("epsilon") = ShortestDouble(o.epsilon),
      py::arg("l1") = ShortestDouble(o.l1),
      py::arg("l2") = ShortestDouble(o.l2),
      py::arg("lr_power") = ShortestDouble(o.lr_power),
      py::arg("weight_decay") = ShortestDouble(o.weight_decay),
      py::arg("accumulator_decay") = ShortestDouble(o.accumulator_decay),
      py::arg("initializer") = names.initializer().kind(),
      py::arg("init_a") = ShortestDouble(defaults.initializer.a),
      py::arg("init_b") = ShortestDouble(defaults.initializer.b),
      py::arg("seed") = defaults.seed,
      py::arg("admission_threshold") =
          static_cast<int64_t>(defaults.admission_threshold),
      py::arg("ttl_steps") = defaults.ttl_steps,
      py::arg("non_finite") = names.non_finite(),
      py::arg("serving_default") = names.serving_default(),
      R"doc(Creates a table (idempotent for an identical spec).

optimizer: sgd | momentum | adagrad | rowwise_adagrad | adam | lazy_adam | ftrl,
with its hyper-parameters; initializer: zeros | constant (init_a) |
uniform (init_a, init_b) | normal | truncated_normal (mean init_a, std init_b);
non_finite: reject | skip_row; serving_default: init | zeros. The defaults
are the C++ TableSpec defaults. ValueError on invalid specs,
RuntimeError (AlreadyExists) if the table exists with a different spec.)doc");
}

}  // namespace psdb::python
