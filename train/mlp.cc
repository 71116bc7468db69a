#include "train/mlp.h"

#include <cmath>
#include <utility>

#include "Eigen/Core"
#include "util/hash.h"

namespace psdb::train {
namespace {

using RowMat =
    Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using MapMat = Eigen::Map<RowMat>;
using ConstMapMat = Eigen::Map<const RowMat>;
using ConstMapVec = Eigen::Map<const Eigen::RowVectorXf>;
using MapVec = Eigen::Map<Eigen::RowVectorXf>;

}  // namespace

Mlp::Mlp(std::vector<int> sizes) : sizes_(std::move(sizes)) {}

std::vector<size_t> Mlp::TensorSizes() const {
  std::vector<size_t> out;
  for (int l = 0; l < num_layers(); ++l) {
    out.push_back(static_cast<size_t>(sizes_[l]) * sizes_[l + 1]);
    out.push_back(static_cast<size_t>(sizes_[l + 1]));
  }
  return out;
}

float Mlp::GlorotLimit(int layer) const {
  return std::sqrt(6.0f /
                   static_cast<float>(sizes_[layer] + sizes_[layer + 1]));
}

void Mlp::Forward(absl::Span<const absl::Span<const float>> params,
                  absl::Span<const float> x, int batch, Workspace* ws,
                  absl::Span<float> out, const MlpDropout& dropout) const {
  const int layers = num_layers();
  ws->acts.resize(layers + 1);
  ws->masks.assign(dropout.rate > 0 ? layers : 0, {});
  ws->acts[0].assign(x.begin(), x.end());
  for (int l = 0; l < layers; ++l) {
    const int in = sizes_[l], outd = sizes_[l + 1];
    ConstMapMat a(ws->acts[l].data(), batch, in);
    ConstMapMat w(params[2 * l].data(), in, outd);
    ConstMapVec b(params[2 * l + 1].data(), outd);
    std::vector<float>& next = ws->acts[l + 1];
    next.resize(static_cast<size_t>(batch) * outd);
    MapMat z(next.data(), batch, outd);
    z.noalias() = a * w;
    z.rowwise() += b;
    if (l + 1 < layers) {
      z = z.cwiseMax(0.0f);
      if (dropout.rate > 0) {
        std::vector<float>& mask = ws->masks[l + 1];
        mask.resize(next.size());
        const float keep_scale = 1.0f / (1.0f - dropout.rate);
        // A 53-bit uniform per (seed, layer, example, unit).
        const uint64_t layer_seed = Mix64(dropout.seed ^ Mix64(l + 1));
        for (size_t i = 0; i < mask.size(); ++i) {
          const double u =
              static_cast<double>(Mix64(layer_seed + i) >> 11) * 0x1p-53;
          mask[i] = u < dropout.rate ? 0.0f : keep_scale;
          next[i] *= mask[i];
        }
      }
    }
  }
  const std::vector<float>& last = ws->acts[layers];
  std::copy(last.begin(), last.end(), out.begin());
}

void Mlp::Backward(absl::Span<const absl::Span<const float>> params,
                   const Workspace& ws, absl::Span<const float> dout, int batch,
                   absl::Span<const absl::Span<float>> grads,
                   absl::Span<float> dx) const {
  const int layers = num_layers();
  // delta: d loss / d (pre-activation output of layer l), batch x sizes[l+1].
  RowMat delta = ConstMapMat(dout.data(), batch, sizes_[layers]);
  for (int l = layers - 1; l >= 0; --l) {
    const int in = sizes_[l], outd = sizes_[l + 1];
    ConstMapMat a(ws.acts[l].data(), batch, in);
    MapMat gw(grads[2 * l].data(), in, outd);
    MapVec gb(grads[2 * l + 1].data(), outd);
    gw.noalias() = a.transpose() * delta;
    gb = delta.colwise().sum();
    if (l == 0 && dx.empty()) break;
    ConstMapMat w(params[2 * l].data(), in, outd);
    RowMat prev = delta * w.transpose();
    if (l > 0) {
      // ReLU': the activation a = relu(z) is > 0 exactly where z > 0 (and,
      // with dropout, the unit was kept: its mask then scales it).
      if (!ws.masks.empty()) {
        prev = prev.cwiseProduct(ConstMapMat(ws.masks[l].data(), batch, in));
      }
      prev = prev.cwiseProduct((a.array() > 0.0f).cast<float>().matrix());
      delta = std::move(prev);
    } else {
      MapMat(dx.data(), batch, in) = prev;
    }
  }
}

}  // namespace psdb::train
