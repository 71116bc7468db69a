#include "train/cross_net.h"

#include <cmath>

#include "Eigen/Core"

namespace psdb::train {
namespace {

using RowMat =
    Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using MapMat = Eigen::Map<RowMat>;
using ConstMapMat = Eigen::Map<const RowMat>;
using ConstMapVec = Eigen::Map<const Eigen::RowVectorXf>;
using MapVec = Eigen::Map<Eigen::RowVectorXf>;

}  // namespace

std::vector<size_t> CrossNet::TensorSizes() const {
  std::vector<size_t> out;
  for (int l = 0; l < layers_; ++l) {
    out.push_back(static_cast<size_t>(width_) * width_);
    out.push_back(static_cast<size_t>(width_));
  }
  out.push_back(static_cast<size_t>(width_));
  return out;
}

float CrossNet::LayerGlorotLimit() const {
  return std::sqrt(6.0f / static_cast<float>(2 * width_));
}

float CrossNet::OutGlorotLimit() const {
  return std::sqrt(6.0f / static_cast<float>(width_ + 1));
}

void CrossNet::Forward(absl::Span<const absl::Span<const float>> params,
                       absl::Span<const float> x, int batch, Workspace* ws,
                       absl::Span<float> out) const {
  const int w = width_;
  ws->xs.resize(layers_ + 1);
  ws->us.resize(layers_);
  ws->xs[0].assign(x.begin(), x.end());
  ConstMapMat x0(ws->xs[0].data(), batch, w);
  for (int l = 0; l < layers_; ++l) {
    ConstMapMat xl(ws->xs[l].data(), batch, w);
    ConstMapMat wl(params[2 * l].data(), w, w);
    ConstMapVec bl(params[2 * l + 1].data(), w);
    ws->us[l].resize(static_cast<size_t>(batch) * w);
    MapMat u(ws->us[l].data(), batch, w);
    u.noalias() = xl * wl;
    u.rowwise() += bl;
    ws->xs[l + 1].resize(static_cast<size_t>(batch) * w);
    MapMat next(ws->xs[l + 1].data(), batch, w);
    next = x0.cwiseProduct(u) + xl;
  }
  ConstMapMat xl(ws->xs[layers_].data(), batch, w);
  const Eigen::Map<const Eigen::VectorXf> w_out(params[2 * layers_].data(), w);
  Eigen::Map<Eigen::VectorXf>(out.data(), batch).noalias() = xl * w_out;
}

void CrossNet::Backward(absl::Span<const absl::Span<const float>> params,
                        const Workspace& ws, absl::Span<const float> dout,
                        int batch, absl::Span<const absl::Span<float>> grads,
                        absl::Span<float> dx) const {
  const int w = width_;
  const Eigen::Map<const Eigen::VectorXf> g_out(dout.data(), batch);
  ConstMapVec w_out(params[2 * layers_].data(), w);
  ConstMapMat x0(ws.xs[0].data(), batch, w);
  // out_i = x_L[i] . w_out: d out / d w_out = sum_i dout_i x_L[i].
  MapVec(grads[2 * layers_].data(), w) =
      g_out.transpose() * ConstMapMat(ws.xs[layers_].data(), batch, w);
  // g: d loss / d x_l, starting at l = L.
  RowMat g = g_out * w_out;
  MapMat dx0(dx.data(), batch, w);
  for (int l = layers_ - 1; l >= 0; --l) {
    // x_{l+1} = x0 * u_l + x_l (elementwise), u_l = x_l W_l + b_l.
    ConstMapMat xl(ws.xs[l].data(), batch, w);
    ConstMapMat ul(ws.us[l].data(), batch, w);
    ConstMapMat wl(params[2 * l].data(), w, w);
    const RowMat h = g.cwiseProduct(x0);  // d loss / d u_l
    MapMat(grads[2 * l].data(), w, w).noalias() = xl.transpose() * h;
    MapVec(grads[2 * l + 1].data(), w) = h.colwise().sum();
    dx0 += g.cwiseProduct(ul);
    g += h * wl.transpose();
  }
  dx0 += g;  // x_0 is x0 itself
}

}  // namespace psdb::train
