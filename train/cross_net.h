// DCN-v2's cross network (Wang et al. 2021, "DCN V2: Improved Deep & Cross
// Network", eq. 1) on the CPU with Eigen: over an input x0 of `width`
// features, L cross layers
//   x_{l+1} = x0 * (x_l W_l + b_l) + x_l   (* elementwise, W_l: width x width)
// each multiplying the input feature-wise with a learned linear map of the
// previous layer, so layer l holds explicit feature crosses of degree l + 1;
// then a linear readout to one logit, out = x_L . w_out. psdb's DCN runs it
// in parallel with the MLP on the same input (the paper's "parallel"
// structure, whose final concatenation + linear layer is the sum of this
// readout and the MLP's last layer). Parameters live outside the class
// (psdb dense tables, as the Mlp's), as tensors
//   w0 [width x width] (row-major, x_l W_l: row = input feature),
//   b0 [width], w1, b1, ..., w_out [width].
//
// Thread-safety: CrossNet is immutable after construction; a Workspace
// belongs to one thread.
#ifndef PSDB_TRAIN_CROSS_NET_H_
#define PSDB_TRAIN_CROSS_NET_H_

#include <cstddef>
#include <vector>

#include "absl/types/span.h"

namespace psdb::train {

class CrossNet {
 public:
  // One forward pass's layer inputs and linear maps, kept for backward.
  struct Workspace {
    std::vector<std::vector<float>> xs;  // xs[l]: batch x width, l = 0..L
    std::vector<std::vector<float>> us;  // us[l] = x_l W_l + b_l, l < L
  };

  // REQUIRES: width >= 1, layers >= 0 (0 layers: out = x0 . w_out).
  CrossNet(int width, int layers) : width_(width), layers_(layers) {}

  int width() const { return width_; }
  int layers() const { return layers_; }
  // Floats of each parameter tensor, in order w0, b0, ..., w_out.
  std::vector<size_t> TensorSizes() const;
  // Glorot-uniform limits sqrt(6 / (fan_in + fan_out)): of a layer's W
  // (width x width) and of w_out (width x 1).
  float LayerGlorotLimit() const;
  float OutGlorotLimit() const;

  // out[batch] = the readout of x_L for x0 = x[batch x width].
  // REQUIRES: params sized as TensorSizes().
  void Forward(absl::Span<const absl::Span<const float>> params,
               absl::Span<const float> x, int batch, Workspace* ws,
               absl::Span<float> out) const;

  // Given d loss / d out, writes d loss / d params (overwriting grads) and
  // adds d loss / d x0 to dx (batch x width). REQUIRES: ws from Forward on
  // the same params and batch.
  void Backward(absl::Span<const absl::Span<const float>> params,
                const Workspace& ws, absl::Span<const float> dout, int batch,
                absl::Span<const absl::Span<float>> grads,
                absl::Span<float> dx) const;

 private:
  int width_;
  int layers_;
};

}  // namespace psdb::train

#endif  // PSDB_TRAIN_CROSS_NET_H_
