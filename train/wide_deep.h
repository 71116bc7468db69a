// The click models of ps-train (--model), one forward/backward structure
// with optional parts, on Criteo features. Wide&Deep (Cheng et al. 2016),
// the model of the seeds' host/device hybrid example, is the default:
//   wide  = sum over the 26 fields of a dim-1 embedding of the id (FTRL)
//           + a linear model on the 13 normalized integer features (FTRL);
//   deep  = the 26 dim-`deep_dim` embeddings (LazyAdam or Adagrad)
//           concatenated with the normalized integer features, through an
//           MLP (429 -> 64 -> 32 -> 1 by default, ReLU), whose weights are
//           psdb dense tables (Adam);
//   p     = sigmoid(wide + deep), trained on mean sigmoid cross-entropy.
// The other models (ModelKind) keep the wide part and change the deep one:
//   deepfm  deep = MLP + FM, the factorization machine's second-order term
//           over the 26 deep embeddings (train/fm.h; DeepFM, Guo et al.
//           2017, whose first-order term is the wide part here);
//   dcn     deep = MLP + cross network (train/cross_net.h; DCN-v2, Wang et
//           al. 2021) over the same input as the MLP, the two in parallel;
//           its weights are dense tables like the MLP's (Adam), replicated
//           with them under --dense=allreduce;
//   deepfwfm deep = MLP + the field-weighted FM term over the deep
//           embeddings, sum over field pairs f < g of r_fg <v_f, v_g>
//           with one learned weight r_fg per pair (train/fm.h; FwFM, Pan
//           et al. 2018; DeepFwFM, Deng et al. 2021); the 325 weights are
//           a dense table ("fwfm.r", Adam at pair_lr) that starts at
//           pair_weight_init for every pair and learns which pairs the
//           data rewards (DeepFM is r = 1, fixed); ps-train's default;
//   lr      no deep part: logistic regression on hashed one-hot features
//           (the wide part alone), the baseline the others must beat.
// The wide logit is the sum of the 26 wide embeddings plus the linear model
// (weights . normalized ints + bias), with each field's embedding times a
// learned per-field scale under wide_field_scale; the deep logit is the deep
// part's output (MLP, MLP + FM, MLP + cross readout, MLP + FwFM; 0 for lr).
// Besides the trained loss, ForwardBackward reports each part's own loss
// (WideDeepLoss): the log-loss of sigmoid(wide logit) and of sigmoid(deep
// logit), from the same forward pass. They say how well each part predicts
// alone; they are not separate objectives (both parts train on the joint
// loss). For lr the deep logit is 0, so deep_loss is log 2 and wide_loss
// is the loss.
// Integer feature x is normalized to sign(x) * log(1 + |x|), 0 if missing.
//
// Tables (created idempotently by Create): "wide" (dim 1), "deep"
// (dim deep_dim; not lr), "wide_linear" (13 weights + bias), "mlp.w<l>" and
// "mlp.b<l>" (not lr), "cross.w<l>", "cross.b<l>" and "cross.out" (dcn),
// "fwfm.r" (deepfwfm), "wide.scale" (wide_field_scale) (dense, blocks of
// block_dim floats).
//
// ForwardBackward() is the pure math (no I/O), checked against finite
// differences in tests; WideDeepModel wires it to an EmbeddingSource and a
// ParameterClient.
//
// Thread-safety: WideDeepModel is thread-compatible (one training thread).
#ifndef PSDB_TRAIN_WIDE_DEEP_H_
#define PSDB_TRAIN_WIDE_DEEP_H_

#include <array>
#include <cstdint>
#include <future>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "collective/all_reducer.h"
#include "optim/optimizer.h"
#include "psdb/parameter_client.h"
#include "train/criteo_reader.h"
#include "train/cross_net.h"
#include "train/dense_tensor.h"
#include "train/embedding_source.h"
#include "train/mlp.h"
#include "train/replicated_dense.h"

namespace psdb::train {

// ps-train --model: which deep part the model has (header comment).
enum class ModelKind : int {
  kWideDeep = 0,
  kDeepFm = 1,
  kDcn = 2,
  kLr = 3,
  kDeepFwFm = 4
};
// "wide_deep", "deepfm", "dcn", "lr", "deepfwfm".
absl::string_view ModelKindName(ModelKind kind);
// The inverse of ModelKindName; InvalidArgument naming the choices.
absl::StatusOr<ModelKind> ParseModelKind(absl::string_view name);
// The name a log line gives the model: "Wide&Deep", "DeepFM", "DCN-v2",
// "LR (hashed one-hot, FTRL)", "DeepFwFM".
absl::string_view ModelKindTitle(ModelKind kind);

struct WideDeepConfig {
  // The model (ps-train --model, whose default is kDeepFwFm:
  // tools/train/train_flags.cc). Default: kWideDeep
  ModelKind kind = ModelKind::kWideDeep;
  // kDeepFwFm's pair weights at start, every pair alike (ps-train
  // --pair_init; 0 = start as Wide&Deep, 1 = start as DeepFM). With
  // pair_lr 0.01, 0.1 keeps the additive and longtail data's AUC at 0.3's
  // (within 0.0001) and gains 0.018 on the pairs data (docs/benchmarks/
  // train.md, issue 18). Default: 0.1
  float pair_weight_init = 0.1f;
  // Adam learning rate of kDeepFwFm's pair weights (ps-train --pair_lr):
  // 10 x the MLP's dense_lr, so that in one epoch the pairs that interact
  // grow and the others fade (at dense_lr's 0.001 they barely move from
  // their start). Default: 0.01
  float pair_lr = 0.01f;
  // Cross layers of kDcn (--cross_layers). Default: 2
  int cross_layers = 2;
  // Width of the deep embeddings. Default: 16
  int deep_dim = 16;
  // Hidden layer widths of the MLP: 64,32 scored as 256,128 within
  // 0.0006 AUC on the additive and pairs data at a fifth of the MLP's FLOPs
  // (docs/benchmarks/train.md, issue 18). Default: {64, 32}
  std::vector<int> hidden = {64, 32};
  // kLazyAdam or kAdagrad. Default: kLazyAdam
  optim::OptimizerKind deep_optimizer = optim::OptimizerKind::kLazyAdam;
  // Deep embedding learning rate. Default: 0.002
  float deep_lr = 0.002f;
  // A new deep embedding row is drawn uniformly from [-deep_init,
  // deep_init] (ps-train --deep_init), in (0, 1]. Small, so that a rare
  // id's few updates are not drowned in its random start and an id first
  // seen at test time adds little noise: 0.002 scored +0.0005 AUC over
  // Keras' 0.05 with Wide&Deep on ps-bench train's additive data and made
  // DeepFM +0.0014 / +0.0036 on additive / pairs (docs/benchmarks/
  // train.md, issue 18). Default: 0.002
  float deep_init = 0.002f;
  // FTRL learning rate, L1 and L2 of the wide part. These defaults are
  // not at any batch's per-example scale; ps-train sets the wide FTRL with
  // SetWideFtrlProximal (below). Defaults: 0.05, 0, 0.001
  float wide_lr = 0.05f;
  float wide_l1 = 0.0f;
  float wide_l2 = 0.001f;
  // The wide FTRL's starting accumulator n, learning-rate power and
  // accumulator decay (optim::OptimizerSpec's initial_accumulator, lr_power,
  // accumulator_decay; ps-train --wide_init_acc, --wide_lr_power,
  // --wide_decay). Defaults: 0.1, -0.5, 1
  float wide_initial_accumulator = 0.1f;
  float wide_lr_power = -0.5f;
  float wide_accumulator_decay = 1.0f;
  // Per-field scales of the wide logit (ps-train --wide_field_scale):
  // wide logit = sum_f s_f w_f(id) + linear, with the 26 s_f a dense table
  // ("wide.scale", all 1 at start, Adam at wide_scale_lr), so the model
  // can shrink a field whose ids carry little signal and grow one whose
  // ids carry much, as the Bayes estimator of per-field weight priors
  // would. Default: false
  bool wide_field_scale = false;
  // Adam learning rate of the scales (ps-train --wide_scale_lr): 0.03
  // scored +0.0007 / +0.0011 / +0.0000 AUC over 0.01 on the additive /
  // pairs / longtail data with ps-train's other wide defaults and
  // --wide_decay 0.993 (issue 18). Default: 0.03
  float wide_scale_lr = 0.03f;
  // L2 on the deep embedding rows: the deep table's optimizer weight_decay
  // (grad += deep_l2 * row), applied by the store when a row is updated,
  // never as a sweep over the table (lazy, as TensorFlow's sparse L2 and
  // FTRL's own l2 are). Default: 0
  float deep_l2 = 0.0f;
  // Dropout rate of the MLP's hidden activations in training steps
  // (train/mlp.h; the mask is seeded by (seed, step), so a run is
  // reproducible), in [0, 1). Default: 0
  float dropout = 0.0f;
  // Adam learning rate of the MLP. Default: 0.001
  float dense_lr = 0.001f;
  // Floats per dense-table row. Default: 256
  int block_dim = 256;
  // Seed of every table's deterministic initializer. Default: 42
  uint64_t seed = 42;
  // Push asynchronously: a step's pushes run in the background while the
  // next step pulls (--mode async). Default: false (each push completes
  // before the next pull, so runs are deterministic).
  bool async_push = false;
  // Dense tensors (MLP, cross network, wide linear) replicated on every worker
  // and averaged by this AllReducer (train/replicated_dense.h) instead of
  // pushed to psdb's dense tables (ps-train --dense=allreduce); null =
  // psdb's dense tables. Requires async_push false; must outlive the
  // model. Default: null
  collective::AllReducer* dense_reducer = nullptr;
};

// FTRL-Proximal's per-example hyperparameters (McMahan et al. 2013,
// Algorithm 1): per coordinate, learning rate alpha / (beta + sqrt(n)), n
// the sum of squared gradients, and L1 lambda1 and L2 lambda2 per example.
struct FtrlProximal {
  double alpha = 0.1;
  double beta = 1;
  double lambda1 = 0;
  double lambda2 = 0;
};

// ps-train's wide part by model: for lr, the baseline, alpha 0.2 and
// lambda1 = lambda2 = 1 (the best of four settings tried on it); for the
// models with deep embeddings alpha 0.1 without L1/L2, which with their
// wide_field_scale beat the per-coordinate Newton step they had before
// (lr_power -1, decay 0.99) by +0.0011 / +0.0017 / -0.0013 test AUC on the
// additive / pairs / longtail data of ps-bench train (seed 1), +0.0017 /
// +0.0050 / -0.0001 on seed 2, and +0.0024 / +0.0023 / -0.0009 on `ps-train
// gen`'s default size (docs/benchmarks/train.md, "The lr baseline at its
// per-example scale" and "Every model's wide part at the per-example scale").
// beta is 1.
FtrlProximal DefaultWideFtrl(ModelKind kind);

// Sets config's wide FTRL to per-example FTRL-Proximal `ftrl` for updates
// whose gradients are means over `examples` examples: the batch, or in a
// sync cluster the batch times the workers (the servers average their
// gradients). wide_lr alpha, wide_initial_accumulator (beta / examples)^2
// (beta enters as sqrt(n0), TensorFlow's form), wide_l1 lambda1 /
// examples, wide_l2 lambda2 / (2 examples) (the kernel's denominator has 2
// l2), wide_lr_power -0.5, wide_accumulator_decay 1: a rare id's update
// is then the one per-example FTRL makes. Unscaled (accumulator 0.1 at
// batch 512 is a beta of 162) lr scored 0.011 lower on the additive data.
// `examples` >= 1.
void SetWideFtrlProximal(const FtrlProximal& ftrl, int64_t examples,
                         WideDeepConfig* config);

// The sizes the math works on, derived from the config.
struct WideDeepShape {
  ModelKind kind = ModelKind::kWideDeep;
  int deep_dim = 16;
  // Unused by kLr.
  Mlp mlp{{kNumCatFeatures * 16 + kNumIntFeatures, 256, 128, 1}};
  // kDcn's cross network (0 layers, unused, for the other kinds).
  CrossNet cross{kNumCatFeatures * 16 + kNumIntFeatures, 0};
  // Whether the wide embeddings are scaled per field
  // (WideDeepConfig::wide_field_scale).
  bool wide_field_scale = false;
  // Whether the model has a deep part (deep embeddings and an MLP).
  bool has_deep() const { return kind != ModelKind::kLr; }
};
WideDeepShape ShapeOf(const WideDeepConfig& config);

// Parameters and gathered embeddings of one batch of n examples.
struct WideDeepInputs {
  int n = 0;
  absl::Span<const float> wide;    // n * 26: wide embedding per position
  absl::Span<const float> deep;    // n * 26 * deep_dim (empty for lr)
  absl::Span<const float> dense;   // n * 13 normalized integer features
  absl::Span<const float> labels;  // n
  absl::Span<const float> linear;  // 14: 13 weights, then the bias
  // 26 per-field scales of the wide embeddings (wide_field_scale only;
  // empty otherwise).
  absl::Span<const float> wide_scale;
  std::vector<absl::Span<const float>> mlp;  // Mlp::TensorSizes() tensors
  // The extra part's dense tensors: dcn's CrossNet::TensorSizes(),
  // deepfwfm's pair weights (one tensor); empty for the others.
  std::vector<absl::Span<const float>> part;
  MlpDropout dropout;  // training only; default none
};

struct WideDeepGrads {
  std::vector<float> wide;               // n * 26
  std::vector<float> deep;               // n * 26 * deep_dim
  std::vector<float> linear;             // 14
  std::vector<float> wide_scale;         // 26 (wide_field_scale; else empty)
  std::vector<std::vector<float>> mlp;   // empty for lr
  std::vector<std::vector<float>> part;  // as WideDeepInputs::part
};

// Mean sigmoid cross-entropy over a batch, of the model and of each part's
// own prediction. Each is mean_i [log(1 + e^z_i) - y_i z_i] for its logit z:
struct WideDeepLoss {
  double loss = 0;       // z = wide + deep: the loss that is trained
  double wide_loss = 0;  // z = wide logit alone (embeddings + linear + bias)
  double deep_loss = 0;  // z = deep logit alone (MLP [+ FM | cross | FwFM])
};

// Fills probs (n, sigmoid(wide + deep)) and, if grads is not null, the
// gradients of the mean loss (WideDeepLoss::loss). One forward pass gives
// all three losses.
WideDeepLoss ForwardBackward(const WideDeepShape& shape,
                             const WideDeepInputs& in,
                             std::vector<float>* probs, WideDeepGrads* grads);

// sign(x) * log1p(|x|) of present features, 0 for missing ones.
void NormalizeIntFeatures(const CriteoBatch& batch, std::vector<float>* out);

// Every table of the model with its full spec: "wide", "deep",
// "wide_linear", "mlp.w0", "mlp.b0", ..., "cross.w0", ..., "fwfm.r" (those its
// kind has).
std::vector<TableSpec> ModelTableSpecs(const WideDeepConfig& config);
// Creates them (idempotent: OK if they exist with the same specs).
absl::Status CreateModelTables(const WideDeepConfig& config,
                               ParameterClient* client);
// The embedding tables ("wide", and "deep" unless lr), the ones a worker
// cache serves.
std::vector<std::string> EmbeddingTables(const WideDeepConfig& config);

class WideDeepModel {
 public:
  // Creates (or reuses, if identical) the model's tables. `client` and
  // `embeddings` must outlive the model.
  static absl::StatusOr<std::unique_ptr<WideDeepModel>> Create(
      const WideDeepConfig& config, ParameterClient* client,
      EmbeddingSource* embeddings);
  ~WideDeepModel();

  // Announces the first batch to the embedding source (lookahead policies
  // need to know every batch before it is looked up).
  void Begin(const CriteoBatch& first);
  // One step on `batch` at global step `step` (>= 1): look up, prefetch
  // `next`'s rows (if not null; it is also announced), forward, backward,
  // update. Returns the batch's mean losses (the trained one and each
  // part's); probs gets its predictions.
  absl::StatusOr<WideDeepLoss> TrainStep(const CriteoBatch& batch,
                                         const CriteoBatch* next, int64_t step,
                                         std::vector<float>* probs);
  // Predictions without creating rows or updating anything.
  absl::Status Predict(const CriteoBatch& batch, std::vector<float>* probs);
  // Waits for a pending asynchronous push; returns its status.
  absl::Status WaitForPush();
  // With a dense_reducer: rank 0 writes the replicated dense rows to the
  // store (PutRows), e.g. before a checkpoint; other ranks and the psdb
  // dense tables do nothing.
  absl::Status PublishDense();
  // With a dense_reducer: the replicas' fingerprint (equal on every rank
  // after every step); nullopt otherwise.
  std::optional<uint64_t> DenseFingerprint() const;
  // "ps" or "allreduce (gloo (tcp, 2 ranks))".
  std::string DenseDescription() const;

  std::vector<std::string> TableNames() const;
  const WideDeepConfig& config() const { return config_; }

 private:
  WideDeepModel(const WideDeepConfig& config, ParameterClient* client,
                EmbeddingSource* embeddings);
  absl::Status CreateTables();
  // Unique ids of the batch in first-occurrence order into *uniq, position
  // -> unique index into *inv (if not null).
  static void Dedup(const CriteoBatch& batch, std::vector<uint64_t>* uniq,
                    std::vector<int32_t>* inv);
  std::vector<EmbeddingRequest> Requests(
      const std::vector<uint64_t>& ids) const;
  absl::Status PullAll(const CriteoBatch& batch, const CriteoBatch* next,
                       bool serving);
  absl::Status PushEmbeddings(int64_t step);
  absl::Status PushDense(int64_t step);
  // The batch's inputs to ForwardBackward, from the pulled buffers.
  WideDeepInputs Inputs(const CriteoBatch& batch) const;
  // The dense tensors after the linear part, each group with its pulled
  // values and its gradients to push, in Create's order (the replicated
  // tensors' too): the MLP's, the extra part's, the wide scales.
  struct DenseGroup {
    std::vector<DenseTensor>* tensors;
    std::vector<std::vector<float>>* values;
    std::vector<std::vector<float>>* push;
  };
  std::array<DenseGroup, 3> DenseGroups() {
    return {{{&mlp_tensors_, &mlp_values_, &push_mlp_},
             {&part_tensors_, &part_values_, &push_part_},
             {&scale_tensors_, &scale_values_, &push_scale_}}};
  }

  const WideDeepConfig config_;
  const WideDeepShape shape_;
  ParameterClient* const client_;
  EmbeddingSource* const embeddings_;
  DenseTensor linear_;
  std::vector<DenseTensor> mlp_tensors_;    // empty for lr
  std::vector<DenseTensor> part_tensors_;   // dcn, deepfwfm
  std::vector<DenseTensor> scale_tensors_;  // wide_field_scale: "wide.scale"

  // Per-step buffers.
  std::vector<uint64_t> uniq_;
  std::vector<int32_t> inv_;
  std::vector<uint64_t> next_uniq_;
  std::vector<std::vector<float>> rows_;    // [wide, deep] per unique id
  std::vector<float> wide_pos_, deep_pos_;  // per position (deep: not lr)
  std::vector<float> dense_;
  std::vector<float> linear_values_;
  std::vector<std::vector<float>> mlp_values_;
  std::vector<std::vector<float>> part_values_;
  std::vector<std::vector<float>> scale_values_;
  WideDeepGrads grads_;
  // Gradients per unique id, owned by the (possibly asynchronous) push.
  std::vector<uint64_t> push_keys_;
  std::vector<float> push_wide_, push_deep_, push_linear_;
  std::vector<std::vector<float>> push_mlp_;
  std::vector<std::vector<float>> push_part_;
  std::vector<std::vector<float>> push_scale_;
  std::future<absl::Status> pending_push_;
  // Set when config_.dense_reducer is: the dense tensors live here.
  std::unique_ptr<ReplicatedDense> replicated_;
};

}  // namespace psdb::train

#endif  // PSDB_TRAIN_WIDE_DEEP_H_
