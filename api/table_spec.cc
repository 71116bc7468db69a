#include "psdb/table_spec.h"

#include <cmath>
#include <cstdint>

#include "absl/strings/str_cat.h"
#include "util/hash.h"

namespace psdb {
namespace {

constexpr uint64_t kGolden = 0x9e3779b97f4a7c15ULL;
constexpr int kMaxDim = 65536;
// A truncated-normal element redraws while outside mean +- 2 std; each try
// succeeds with p = 0.954, so 64 tries fail with p < 1e-85. After that the
// element is clamped (never reached in practice, but bounded by design).
constexpr int kMaxTruncatedTries = 64;

bool NameCharOk(char c) {
  return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') ||
         (c >= '0' && c <= '9') || c == '_' || c == '.' || c == '-';
}

// The counter-based stream of one row: draw(c) in [0, 1) with 53 bits.
struct RowStream {
  uint64_t base;
  double Uniform(uint64_t counter) const {
    return static_cast<double>(Mix64(base + counter * kGolden) >> 11) *
           0x1.0p-53;
  }
  // Box-Muller on draws (2c, 2c+1); 1 - u keeps the log argument in (0, 1].
  double Normal(uint64_t c) const {
    const double u1 = 1.0 - Uniform(2 * c);
    const double u2 = Uniform(2 * c + 1);
    return std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * M_PI * u2);
  }
};

bool OptimizerSpecEqual(const optim::OptimizerSpec& x,
                        const optim::OptimizerSpec& y) {
  return x.kind == y.kind && x.learning_rate == y.learning_rate &&
         x.momentum == y.momentum && x.nesterov == y.nesterov &&
         x.initial_accumulator == y.initial_accumulator && x.beta1 == y.beta1 &&
         x.beta2 == y.beta2 && x.epsilon == y.epsilon && x.l1 == y.l1 &&
         x.l2 == y.l2 && x.lr_power == y.lr_power &&
         x.weight_decay == y.weight_decay &&
         x.accumulator_decay == y.accumulator_decay;
}

}  // namespace

bool operator==(const TableSpec& x, const TableSpec& y) {
  return x.name == y.name && x.dim == y.dim &&
         x.initializer.kind == y.initializer.kind &&
         x.initializer.a == y.initializer.a &&
         x.initializer.b == y.initializer.b &&
         OptimizerSpecEqual(x.optimizer, y.optimizer) && x.seed == y.seed &&
         x.admission_threshold == y.admission_threshold &&
         x.ttl_steps == y.ttl_steps && x.non_finite == y.non_finite &&
         x.serving_default == y.serving_default;
}

absl::Status ValidateTableName(absl::string_view name) {
  if (name.empty() || name.size() > 128) {
    return absl::InvalidArgumentError(
        absl::StrCat("bad table name \"", name.substr(0, 160),
                     "\": length must be 1..128, got ", name.size()));
  }
  if (name == "." || name == ".." || name == "default") {
    return absl::InvalidArgumentError(
        absl::StrCat("bad table name \"", name, "\": reserved"));
  }
  for (char c : name) {
    if (!NameCharOk(c)) {
      return absl::InvalidArgumentError(
          absl::StrCat("bad table name \"", name,
                       "\": allowed characters are [A-Za-z0-9_.-]"));
    }
  }
  return absl::OkStatus();
}

absl::Status ValidateTableSpec(const TableSpec& spec) {
  if (absl::Status s = ValidateTableName(spec.name); !s.ok()) return s;
  const std::string& n = spec.name;
  if (spec.dim < 1 || spec.dim > kMaxDim) {
    return absl::InvalidArgumentError(absl::StrCat(
        "table ", n, ": dim must be 1..", kMaxDim, ", got ", spec.dim));
  }
  const InitializerSpec& init = spec.initializer;
  if (!std::isfinite(init.a) || !std::isfinite(init.b)) {
    return absl::InvalidArgumentError(
        absl::StrCat("table ", n, ": initializer parameters must be finite"));
  }
  switch (init.kind) {
    case InitKind::kZeros:
    case InitKind::kConstant:
      break;
    case InitKind::kUniform:
      if (!(init.a < init.b)) {
        return absl::InvalidArgumentError(
            absl::StrCat("table ", n, ": uniform initializer needs a < b, got ",
                         init.a, " and ", init.b));
      }
      break;
    case InitKind::kNormal:
    case InitKind::kTruncatedNormal:
      if (!(init.b > 0)) {
        return absl::InvalidArgumentError(absl::StrCat(
            "table ", n, ": normal initializer needs std (b) > 0, got ",
            init.b));
      }
      break;
    default:
      return absl::InvalidArgumentError(
          absl::StrCat("table ", n, ": unknown initializer kind ",
                       static_cast<int>(init.kind)));
  }
  if (spec.ttl_steps < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "table ", n, ": ttl_steps must be >= 0, got ", spec.ttl_steps));
  }
  if (spec.non_finite != NonFinitePolicy::kReject &&
      spec.non_finite != NonFinitePolicy::kSkipRow) {
    return absl::InvalidArgumentError(
        absl::StrCat("table ", n, ": unknown non_finite policy"));
  }
  if (spec.serving_default != MissingRowValue::kInit &&
      spec.serving_default != MissingRowValue::kZeros) {
    return absl::InvalidArgumentError(
        absl::StrCat("table ", n, ": unknown serving_default"));
  }
  if (absl::Status s = optim::Validate(spec.optimizer); !s.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("table ", n, ": optimizer: ", s.message()));
  }
  return absl::OkStatus();
}

void InitializeRow(const TableSpec& spec, uint64_t key,
                   absl::Span<float> values) {
  const InitializerSpec& init = spec.initializer;
  const size_t dim = values.size();
  const RowStream stream{HashKey(key, spec.seed)};
  switch (init.kind) {
    case InitKind::kZeros:
      for (size_t j = 0; j < dim; ++j) values[j] = 0.0f;
      return;
    case InitKind::kConstant:
      for (size_t j = 0; j < dim; ++j) values[j] = init.a;
      return;
    case InitKind::kUniform: {
      const double a = init.a, width = double{init.b} - double{init.a};
      for (size_t j = 0; j < dim; ++j) {
        values[j] = static_cast<float>(a + width * stream.Uniform(j));
      }
      return;
    }
    case InitKind::kNormal:
      for (size_t j = 0; j < dim; ++j) {
        values[j] = static_cast<float>(init.a + init.b * stream.Normal(j));
      }
      return;
    case InitKind::kTruncatedNormal:
      // Try r of element j uses counter j + r * dim, so elements never share
      // draws and the result does not depend on evaluation order.
      for (size_t j = 0; j < dim; ++j) {
        double z = 2.0;
        for (int r = 0; r < kMaxTruncatedTries; ++r) {
          z = stream.Normal(j + static_cast<uint64_t>(r) * dim);
          if (std::fabs(z) <= 2.0) break;
        }
        z = std::fmax(-2.0, std::fmin(2.0, z));
        values[j] = static_cast<float>(init.a + init.b * z);
      }
      return;
  }
  for (size_t j = 0; j < dim; ++j) values[j] = 0.0f;
}

void DefaultRow(const TableSpec& spec, uint64_t key, absl::Span<float> values) {
  if (spec.serving_default == MissingRowValue::kZeros) {
    for (float& v : values) v = 0.0f;
  } else {
    InitializeRow(spec, key, values);
  }
}

}  // namespace psdb
