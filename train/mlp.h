// A fully connected network (ReLU between layers, linear output) on the CPU
// with Eigen: the deep tower of Wide&Deep. Parameters live outside the class
// (they are pulled from psdb dense tables each step), as tensors
//   w0 [sizes[0] x sizes[1]] (row-major), b0 [sizes[1]], w1, b1, ...
//
// Dropout (Srivastava et al. 2014, "inverted" form as in PyTorch's
// nn.Dropout): in training, each hidden activation (after its ReLU; never
// the input or the output) is kept with probability 1 - rate and scaled by
// 1 / (1 - rate), so inference needs no rescaling. The mask is a pure
// function of (seed, layer, example, unit): the same seed gives the same
// mask, so a step is reproducible and Backward sees Forward's mask.
//
// Thread-safety: Mlp is immutable after construction; a Workspace belongs to
// one thread.
#ifndef PSDB_TRAIN_MLP_H_
#define PSDB_TRAIN_MLP_H_

#include <cstddef>
#include <cstdint>
#include <vector>

#include "absl/types/span.h"

namespace psdb::train {

// Dropout of an Mlp's hidden activations (see above).
struct MlpDropout {
  // Probability of dropping a hidden activation, in [0, 1); 0 = none.
  // Default: 0
  float rate = 0;
  // Seed of the mask (e.g. a hash of the step). Default: 0
  uint64_t seed = 0;
};

class Mlp {
 public:
  // Activations of one forward pass, kept for the backward pass.
  struct Workspace {
    std::vector<std::vector<float>> acts;  // acts[l]: batch x sizes[l]
    // masks[l] (l = 1 .. num_layers - 1, hidden layers): 0 or
    // 1 / (1 - rate) per activation; empty without dropout.
    std::vector<std::vector<float>> masks;
  };

  // REQUIRES: sizes.size() >= 2, every size >= 1.
  explicit Mlp(std::vector<int> sizes);

  const std::vector<int>& sizes() const { return sizes_; }
  int num_layers() const { return static_cast<int>(sizes_.size()) - 1; }
  // Floats of each parameter tensor, in order w0, b0, w1, b1, ...
  std::vector<size_t> TensorSizes() const;
  // Glorot-uniform limit sqrt(6 / (fan_in + fan_out)) of layer l's weights.
  float GlorotLimit(int layer) const;

  // out[batch x sizes.back()] = net(x[batch x sizes[0]]), with `dropout`
  // on the hidden activations (training only; the default is none).
  // REQUIRES: params.size() == 2 * num_layers(), sized as TensorSizes().
  void Forward(absl::Span<const absl::Span<const float>> params,
               absl::Span<const float> x, int batch, Workspace* ws,
               absl::Span<float> out, const MlpDropout& dropout = {}) const;

  // Given d loss / d out, writes d loss / d params (overwriting grads) and,
  // if dx is non-empty, d loss / d x. REQUIRES: ws from Forward on the same
  // params and batch.
  void Backward(absl::Span<const absl::Span<const float>> params,
                const Workspace& ws, absl::Span<const float> dout, int batch,
                absl::Span<const absl::Span<float>> grads,
                absl::Span<float> dx) const;

 private:
  std::vector<int> sizes_;
};

}  // namespace psdb::train

#endif  // PSDB_TRAIN_MLP_H_
