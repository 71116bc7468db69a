#include "optim/optimizer.h"

#include <cmath>
#include <initializer_list>

#include "absl/strings/str_cat.h"
#include "optim/kernels.h"

namespace psdb::optim {
namespace {

constexpr std::pair<OptimizerKind, absl::string_view> kNames[] = {
    {OptimizerKind::kSgd, "sgd"},
    {OptimizerKind::kMomentum, "momentum"},
    {OptimizerKind::kAdagrad, "adagrad"},
    {OptimizerKind::kRowwiseAdagrad, "rowwise_adagrad"},
    {OptimizerKind::kAdam, "adam"},
    {OptimizerKind::kLazyAdam, "lazy_adam"},
    {OptimizerKind::kFtrl, "ftrl"},
};

// One range check of a hyper-parameter.
struct Rule {
  bool ok;
  const char* what;
  float value;
};

absl::Status FirstFailure(std::initializer_list<Rule> rules) {
  for (const Rule& r : rules) {
    if (!r.ok) {
      return absl::InvalidArgumentError(
          absl::StrCat("optimizer: ", r.what, " (got ", r.value, ")"));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status Validate(const OptimizerSpec& s) {
  const int kind = static_cast<int>(s.kind);
  if (kind < 0 || kind > static_cast<int>(OptimizerKind::kFtrl)) {
    return absl::InvalidArgumentError(
        absl::StrCat("optimizer: unknown kind ", kind));
  }
  for (float f : {s.learning_rate, s.momentum, s.initial_accumulator, s.beta1,
                  s.beta2, s.epsilon, s.l1, s.l2, s.lr_power, s.weight_decay,
                  s.accumulator_decay}) {
    if (!std::isfinite(f)) {
      return FirstFailure({{false, "hyper-parameters must be finite", f}});
    }
  }
  if (absl::Status st = FirstFailure(
          {{s.learning_rate > 0, "learning_rate must be > 0", s.learning_rate},
           {s.weight_decay >= 0, "weight_decay must be >= 0", s.weight_decay}});
      !st.ok()) {
    return st;
  }
  switch (s.kind) {
    case OptimizerKind::kSgd:
      return absl::OkStatus();
    case OptimizerKind::kMomentum:
      return FirstFailure({{s.momentum >= 0 && s.momentum < 1,
                            "momentum must be in [0, 1)", s.momentum}});
    case OptimizerKind::kAdagrad:
    case OptimizerKind::kRowwiseAdagrad:
      // With both zero the first zero gradient divides 0 by 0.
      return FirstFailure(
          {{s.initial_accumulator >= 0, "initial_accumulator must be >= 0",
            s.initial_accumulator},
           {s.epsilon > 0 || s.initial_accumulator > 0,
            "adagrad needs epsilon > 0 or initial_accumulator > 0",
            s.epsilon}});
    case OptimizerKind::kAdam:
    case OptimizerKind::kLazyAdam:
      return FirstFailure(
          {{s.beta1 >= 0 && s.beta1 < 1, "beta1 must be in [0, 1)", s.beta1},
           {s.beta2 >= 0 && s.beta2 < 1, "beta2 must be in [0, 1)", s.beta2},
           {s.epsilon > 0, "epsilon must be > 0", s.epsilon}});
    case OptimizerKind::kFtrl:
      // n = 0 with l2 = 0 makes the first denominator n^(-p)/lr zero.
      return FirstFailure(
          {{s.l1 >= 0, "l1 must be >= 0", s.l1},
           {s.l2 >= 0, "l2 must be >= 0", s.l2},
           {s.lr_power <= 0, "lr_power must be <= 0", s.lr_power},
           {s.initial_accumulator > 0, "ftrl needs initial_accumulator > 0",
            s.initial_accumulator},
           {s.accumulator_decay > 0 && s.accumulator_decay <= 1,
            "accumulator_decay must be in (0, 1]", s.accumulator_decay}});
  }
  return absl::OkStatus();
}

int StateSize(const OptimizerSpec& spec, int dim) {
  return StateSizeKernel(static_cast<int>(spec.kind), dim);
}

KernelParams KernelParamsOf(const OptimizerSpec& s) {
  return KernelParams{static_cast<int>(s.kind),
                      s.learning_rate,
                      s.momentum,
                      s.nesterov,
                      s.initial_accumulator,
                      s.beta1,
                      s.beta2,
                      s.epsilon,
                      s.l1,
                      s.l2,
                      s.lr_power,
                      s.weight_decay,
                      s.accumulator_decay};
}

void InitState(const OptimizerSpec& spec, int dim, absl::Span<float> state) {
  InitStateKernel(KernelParamsOf(spec), dim, state.data());
}

void Apply(const OptimizerSpec& spec, absl::Span<float> value,
           absl::Span<float> state, absl::Span<const float> grad,
           int64_t step) {
  ApplyKernel(KernelParamsOf(spec), static_cast<int>(value.size()),
              value.data(), state.data(), grad.data(), step);
}

absl::string_view KindName(OptimizerKind kind) {
  for (const auto& [k, name] : kNames) {
    if (k == kind) return name;
  }
  return "unknown";
}

absl::StatusOr<OptimizerKind> ParseKind(absl::string_view name) {
  for (const auto& [k, n] : kNames) {
    if (n == name) return k;
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "unknown optimizer '", name,
      "' (expected sgd, momentum, adagrad, rowwise_adagrad, adam, lazy_adam "
      "or ftrl)"));
}

}  // namespace psdb::optim
