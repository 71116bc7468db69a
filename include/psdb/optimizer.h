// The optimizers psdb applies to pushed gradients, as a table names them
// (TableSpec::optimizer): their kinds and hyper-parameters, checked by
// Validate, and the optimizer state each keeps per row. The math itself
// (one row's update) is internal to psdb (optim/ in its source tree); every
// update runs on the server or store that holds the row, or in a worker's
// write-back VocabCache.
//
// Thread-safety: plain values and pure functions.
#ifndef PSDB_OPTIMIZER_H_
#define PSDB_OPTIMIZER_H_

#include <cstdint>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace psdb::optim {

enum class OptimizerKind : int {
  kSgd = 0,
  kMomentum = 1,
  kAdagrad = 2,
  kRowwiseAdagrad = 3,
  kAdam = 4,
  kLazyAdam = 5,
  kFtrl = 6,
};

// Hyper-parameters of every optimizer; each kind reads the fields it needs.
struct OptimizerSpec {
  OptimizerKind kind = OptimizerKind::kSgd;
  // Step size (all kinds). Default: 0.01
  float learning_rate = 0.01f;
  // Momentum coefficient (kMomentum). Default: 0.9
  float momentum = 0.9f;
  // Nesterov momentum (kMomentum). Default: false
  bool nesterov = false;
  // Starting value of Adagrad accumulators and of FTRL's n. Default: 0.1
  float initial_accumulator = 0.1f;
  // Adam/LazyAdam moment decay rates. Defaults: 0.9, 0.999
  float beta1 = 0.9f;
  float beta2 = 0.999f;
  // Added to denominators (Adagrad, row-wise Adagrad, Adam). Default: 1e-8
  float epsilon = 1e-8f;
  // FTRL-Proximal regularization and learning-rate power. Defaults: 0, 0, -0.5
  float l1 = 0.0f;
  float l2 = 0.0f;
  float lr_power = -0.5f;
  // L2 weight decay added to the gradient (grad += wd * value) before any
  // kind's update. Default: 0
  float weight_decay = 0.0f;
  // FTRL only: each update of a row first multiplies its accumulator n by
  // this factor, in (0, 1] (n' = decay * n + g^2), so a row's learning rate
  // stops shrinking once its recent gradients settle: the row forgets
  // gradients older than about 1 / (1 - decay) of its own updates and can
  // track weights that drift. Lazy: counted in the row's updates, never a
  // sweep. Default: 1 (none; the textbook FTRL-Proximal)
  float accumulator_decay = 1.0f;
};

// Checks ranges (learning_rate > 0, 0 <= beta < 1, l1, l2 >= 0,
// lr_power <= 0, initial_accumulator >= 0 (> 0 for FTRL),
// accumulator_decay in (0, 1], ...).
absl::Status Validate(const OptimizerSpec& spec);

// Number of floats of optimizer state per row of width `dim`:
// SGD 0; Momentum dim; Adagrad dim; row-wise Adagrad 1; Adam and LazyAdam
// 2*dim+1 (m, v, step); FTRL 2*dim (z, n).
int StateSize(const OptimizerSpec& spec, int dim);

// Stable lower-case names: "sgd", "momentum", "adagrad", "rowwise_adagrad",
// "adam", "lazy_adam", "ftrl".
absl::string_view KindName(OptimizerKind kind);
absl::StatusOr<OptimizerKind> ParseKind(absl::string_view name);

}  // namespace psdb::optim

#endif  // PSDB_OPTIMIZER_H_
