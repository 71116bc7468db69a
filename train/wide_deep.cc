#include "train/wide_deep.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "train/fm.h"
#include "util/hash.h"
#include "util/status_macros.h"

namespace psdb::train {
namespace {

constexpr char kWideTable[] = "wide";
constexpr char kDeepTable[] = "deep";
constexpr char kLinearTable[] = "wide_linear";
constexpr char kFwFmTable[] = "fwfm.r";
constexpr char kScaleTable[] = "wide.scale";
constexpr int kLinearSize = kNumIntFeatures + 1;

// Width of the deep input, [26 deep embeddings | 13 normalized ints].
int DeepInputWidth(const WideDeepConfig& c) {
  return kNumCatFeatures * c.deep_dim + kNumIntFeatures;
}

std::vector<int> MlpSizes(const WideDeepConfig& c) {
  std::vector<int> sizes = {DeepInputWidth(c)};
  sizes.insert(sizes.end(), c.hidden.begin(), c.hidden.end());
  sizes.push_back(1);
  return sizes;
}

// The wide part's FTRL (both tables).
optim::OptimizerSpec Ftrl(const WideDeepConfig& c) {
  optim::OptimizerSpec o;
  o.learning_rate = c.wide_lr;
  o.kind = optim::OptimizerKind::kFtrl;
  o.l1 = c.wide_l1;
  o.l2 = c.wide_l2;
  o.initial_accumulator = c.wide_initial_accumulator;
  o.lr_power = c.wide_lr_power;
  o.accumulator_decay = c.wide_accumulator_decay;
  return o;
}

// "mlp.w0", "mlp.b0", ... of Mlp::TensorSizes() index t; "cross.w0",
// "cross.b0", ..., "cross.out" of CrossNet::TensorSizes() index t.
std::string MlpTensorName(size_t t) {
  return absl::StrCat("mlp.", t % 2 == 0 ? "w" : "b", t / 2);
}
std::string CrossTensorName(const CrossNet& cross, size_t t) {
  if (t == static_cast<size_t>(2 * cross.layers())) return "cross.out";
  return absl::StrCat("cross.", t % 2 == 0 ? "w" : "b", t / 2);
}

constexpr struct {
  ModelKind kind;
  absl::string_view name;
  absl::string_view title;
} kModelKinds[] = {
    {ModelKind::kWideDeep, "wide_deep", "Wide&Deep"},
    {ModelKind::kDeepFm, "deepfm", "DeepFM"},
    {ModelKind::kDcn, "dcn", "DCN-v2"},
    {ModelKind::kLr, "lr", "LR (hashed one-hot, FTRL)"},
    {ModelKind::kDeepFwFm, "deepfwfm", "DeepFwFM"},
};

}  // namespace

absl::string_view ModelKindName(ModelKind kind) {
  for (const auto& k : kModelKinds) {
    if (k.kind == kind) return k.name;
  }
  return "unknown";
}

absl::string_view ModelKindTitle(ModelKind kind) {
  for (const auto& k : kModelKinds) {
    if (k.kind == kind) return k.title;
  }
  return "unknown";
}

absl::StatusOr<ModelKind> ParseModelKind(absl::string_view name) {
  for (const auto& k : kModelKinds) {
    if (k.name == name) return k.kind;
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "unknown model '", name, "' (wide_deep, deepfm, dcn, lr or deepfwfm)"));
}

FtrlProximal DefaultWideFtrl(ModelKind kind) {
  FtrlProximal ftrl;
  if (kind == ModelKind::kLr) {
    ftrl.alpha = 0.2;
    ftrl.lambda1 = 1;
    ftrl.lambda2 = 1;
  }
  return ftrl;
}

void SetWideFtrlProximal(const FtrlProximal& ftrl, int64_t examples,
                         WideDeepConfig* config) {
  const double n = static_cast<double>(examples);
  config->wide_lr = static_cast<float>(ftrl.alpha);
  config->wide_initial_accumulator =
      static_cast<float>((ftrl.beta / n) * (ftrl.beta / n));
  config->wide_l1 = static_cast<float>(ftrl.lambda1 / n);
  config->wide_l2 = static_cast<float>(ftrl.lambda2 / (2 * n));
  config->wide_lr_power = -0.5f;
  config->wide_accumulator_decay = 1.0f;
}

WideDeepShape ShapeOf(const WideDeepConfig& config) {
  WideDeepShape shape;
  shape.kind = config.kind;
  shape.deep_dim = config.deep_dim;
  shape.wide_field_scale = config.wide_field_scale;
  shape.mlp = Mlp(MlpSizes(config));
  shape.cross =
      CrossNet(DeepInputWidth(config),
               config.kind == ModelKind::kDcn ? config.cross_layers : 0);
  return shape;
}

void NormalizeIntFeatures(const CriteoBatch& batch, std::vector<float>* out) {
  out->resize(batch.ints.size());
  for (size_t i = 0; i < batch.ints.size(); ++i) {
    const double x = static_cast<double>(batch.ints[i]);
    (*out)[i] =
        batch.int_present[i]
            ? static_cast<float>(std::copysign(std::log1p(std::abs(x)), x))
            : 0.0f;
  }
}

namespace {

// log(1 + e^z) - y z: sigmoid cross-entropy of logit z, stable for either
// sign of z.
double LogLossOfLogit(double z, double y) {
  return std::max(z, 0.0) - y * z + std::log1p(std::exp(-std::abs(z)));
}

}  // namespace

WideDeepLoss ForwardBackward(const WideDeepShape& shape,
                             const WideDeepInputs& in,
                             std::vector<float>* probs, WideDeepGrads* grads) {
  const int n = in.n;
  const int d = shape.deep_dim;
  const int deep_width = kNumCatFeatures * d;
  const int mlp_in = deep_width + kNumIntFeatures;
  const bool fm = shape.kind == ModelKind::kDeepFm;
  const bool cross = shape.kind == ModelKind::kDcn;
  const bool fwfm = shape.kind == ModelKind::kDeepFwFm;
  const bool scaled = shape.wide_field_scale;
  // Deep input (MLP and cross network): [deep embeddings | normalized
  // integer features].
  std::vector<float> x;
  Mlp::Workspace ws;
  CrossNet::Workspace cross_ws;
  std::vector<float> deep_logit(n, 0.0f);
  if (shape.has_deep()) {
    x.resize(static_cast<size_t>(n) * mlp_in);
    for (int i = 0; i < n; ++i) {
      std::copy_n(in.deep.begin() + static_cast<size_t>(i) * deep_width,
                  deep_width, x.begin() + static_cast<size_t>(i) * mlp_in);
      std::copy_n(in.dense.begin() + static_cast<size_t>(i) * kNumIntFeatures,
                  kNumIntFeatures,
                  x.begin() + static_cast<size_t>(i) * mlp_in + deep_width);
    }
    shape.mlp.Forward(in.mlp, x, n, &ws, absl::MakeSpan(deep_logit),
                      in.dropout);
  }
  // The deep logit adds the extra part's output to the MLP's (Wide&Deep's
  // stays the MLP's, bit for bit).
  std::vector<float> extra;
  if (fm || cross || fwfm) {
    extra.resize(n);
    if (fm) {
      FmForward(in.deep, n, kNumCatFeatures, d, absl::MakeSpan(extra));
    } else if (fwfm) {
      FwFmForward(in.deep, in.part[0], n, kNumCatFeatures, d,
                  absl::MakeSpan(extra));
    } else {
      shape.cross.Forward(in.part, x, n, &cross_ws, absl::MakeSpan(extra));
    }
    for (int i = 0; i < n; ++i) deep_logit[i] += extra[i];
  }

  probs->resize(n);
  std::vector<float> dlogit(n);
  WideDeepLoss loss;
  for (int i = 0; i < n; ++i) {
    // z adds the wide terms to the deep logit; the wide logit accumulates
    // the same terms, in the same order, on its own (39 more additions per
    // example, no second pass). Computing z as wide + deep instead would
    // round differently and change trained rows in their last bits.
    double z = deep_logit[i] + in.linear[kNumIntFeatures];
    double wide_z = in.linear[kNumIntFeatures];
    for (int f = 0; f < kNumCatFeatures; ++f) {
      float w = in.wide[static_cast<size_t>(i) * kNumCatFeatures + f];
      if (scaled) w *= in.wide_scale[f];
      z += w;
      wide_z += w;
    }
    for (int j = 0; j < kNumIntFeatures; ++j) {
      const float lx =
          in.linear[j] * in.dense[static_cast<size_t>(i) * kNumIntFeatures + j];
      z += lx;
      wide_z += lx;
    }
    const double y = in.labels[i];
    loss.loss += LogLossOfLogit(z, y);
    loss.wide_loss += LogLossOfLogit(wide_z, y);
    loss.deep_loss += LogLossOfLogit(deep_logit[i], y);
    const double p = 1.0 / (1.0 + std::exp(-z));
    (*probs)[i] = static_cast<float>(p);
    dlogit[i] = static_cast<float>((p - y) / n);
  }
  loss.loss /= n;
  loss.wide_loss /= n;
  loss.deep_loss /= n;
  if (grads == nullptr) return loss;

  grads->wide.resize(static_cast<size_t>(n) * kNumCatFeatures);
  grads->linear.assign(kLinearSize, 0.0f);
  grads->wide_scale.assign(scaled ? kNumCatFeatures : 0, 0.0f);
  for (int i = 0; i < n; ++i) {
    const size_t row = static_cast<size_t>(i) * kNumCatFeatures;
    std::fill_n(grads->wide.begin() + row, kNumCatFeatures, dlogit[i]);
    if (scaled) {
      // d/dw_f = dlogit s_f, d/ds_f = sum_i dlogit_i w_if.
      for (int f = 0; f < kNumCatFeatures; ++f) {
        grads->wide[row + f] *= in.wide_scale[f];
        grads->wide_scale[f] += dlogit[i] * in.wide[row + f];
      }
    }
    for (int j = 0; j < kNumIntFeatures; ++j) {
      grads->linear[j] +=
          dlogit[i] * in.dense[static_cast<size_t>(i) * kNumIntFeatures + j];
    }
    grads->linear[kNumIntFeatures] += dlogit[i];
  }
  if (!shape.has_deep()) {
    grads->deep.clear();
    grads->mlp.clear();
    grads->part.clear();
    return loss;
  }
  // Sized per tensor; the parts' Backward overwrite them.
  auto spans = [](const std::vector<size_t>& sizes,
                  std::vector<std::vector<float>>* g) {
    g->resize(sizes.size());
    std::vector<absl::Span<float>> out;
    for (size_t t = 0; t < sizes.size(); ++t) {
      (*g)[t].resize(sizes[t]);
      out.push_back(absl::MakeSpan((*g)[t]));
    }
    return out;
  };
  std::vector<float> dx(x.size());
  shape.mlp.Backward(in.mlp, ws, dlogit, n,
                     spans(shape.mlp.TensorSizes(), &grads->mlp),
                     absl::MakeSpan(dx));
  if (cross) {
    shape.cross.Backward(in.part, cross_ws, dlogit, n,
                         spans(shape.cross.TensorSizes(), &grads->part),
                         absl::MakeSpan(dx));
  } else if (!fwfm) {
    grads->part.clear();
  }
  grads->deep.resize(static_cast<size_t>(n) * deep_width);
  for (int i = 0; i < n; ++i) {
    std::copy_n(dx.begin() + static_cast<size_t>(i) * mlp_in, deep_width,
                grads->deep.begin() + static_cast<size_t>(i) * deep_width);
  }
  if (fm) {
    FmBackward(in.deep, n, kNumCatFeatures, d, dlogit,
               absl::MakeSpan(grads->deep));
  }
  if (fwfm) {
    const std::vector<absl::Span<float>> dr =
        spans({static_cast<size_t>(FwFmPairs(kNumCatFeatures))}, &grads->part);
    FwFmBackward(in.deep, in.part[0], n, kNumCatFeatures, d, dlogit,
                 absl::MakeSpan(grads->deep), dr[0]);
  }
  return loss;
}

WideDeepModel::WideDeepModel(const WideDeepConfig& config,
                             ParameterClient* client,
                             EmbeddingSource* embeddings)
    : config_(config),
      shape_(ShapeOf(config)),
      client_(client),
      embeddings_(embeddings),
      linear_(kLinearTable, kLinearSize, config.block_dim) {
  if (shape_.has_deep()) {
    const std::vector<size_t> sizes = shape_.mlp.TensorSizes();
    for (size_t t = 0; t < sizes.size(); ++t) {
      mlp_tensors_.emplace_back(MlpTensorName(t), sizes[t], config.block_dim);
      mlp_values_.emplace_back(sizes[t]);
      push_mlp_.emplace_back(sizes[t]);
    }
  }
  if (config.kind == ModelKind::kDcn) {
    const std::vector<size_t> sizes = shape_.cross.TensorSizes();
    for (size_t t = 0; t < sizes.size(); ++t) {
      part_tensors_.emplace_back(CrossTensorName(shape_.cross, t), sizes[t],
                                 config.block_dim);
      part_values_.emplace_back(sizes[t]);
      push_part_.emplace_back(sizes[t]);
    }
  }
  if (config.kind == ModelKind::kDeepFwFm) {
    const size_t pairs = FwFmPairs(kNumCatFeatures);
    part_tensors_.emplace_back(kFwFmTable, pairs, config.block_dim);
    part_values_.emplace_back(pairs);
    push_part_.emplace_back(pairs);
  }
  if (config.wide_field_scale) {
    scale_tensors_.emplace_back(kScaleTable, kNumCatFeatures, config.block_dim);
    scale_values_.emplace_back(kNumCatFeatures);
    push_scale_.emplace_back(kNumCatFeatures);
  }
  linear_values_.resize(kLinearSize);
}

WideDeepModel::~WideDeepModel() { (void)WaitForPush(); }

absl::StatusOr<std::unique_ptr<WideDeepModel>> WideDeepModel::Create(
    const WideDeepConfig& config, ParameterClient* client,
    EmbeddingSource* embeddings) {
  if (config.deep_dim < 1 || config.block_dim < 1 || config.hidden.empty()) {
    return absl::InvalidArgumentError(
        "wide&deep: deep_dim, block_dim >= 1 and at least one hidden layer");
  }
  if (config.kind == ModelKind::kDcn &&
      (config.cross_layers < 1 || config.cross_layers > 16)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "dcn: cross_layers must be in [1, 16], not ", config.cross_layers));
  }
  if (config.deep_optimizer != optim::OptimizerKind::kLazyAdam &&
      config.deep_optimizer != optim::OptimizerKind::kAdagrad) {
    return absl::InvalidArgumentError(
        "wide&deep: the deep embeddings use lazy_adam or adagrad");
  }
  for (int h : config.hidden) {
    if (h < 1) return absl::InvalidArgumentError("wide&deep: hidden width < 1");
  }
  if (!(config.dropout >= 0 && config.dropout < 1)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "wide&deep: dropout must be in [0, 1) (got ", config.dropout, ")"));
  }
  if (config.dense_reducer != nullptr && config.async_push) {
    return absl::InvalidArgumentError(
        "wide&deep: dense AllReduce is a synchronous collective; it needs "
        "synchronous pushes (--mode sync)");
  }
  std::unique_ptr<WideDeepModel> model(
      new WideDeepModel(config, client, embeddings));
  PSDB_RETURN_IF_ERROR(model->CreateTables());
  if (config.dense_reducer != nullptr) {
    std::vector<const DenseTensor*> tensors = {&model->linear_};
    for (const DenseGroup& g : model->DenseGroups()) {
      for (const DenseTensor& t : *g.tensors) tensors.push_back(&t);
    }
    std::vector<TableSpec> specs;
    const std::vector<TableSpec> all = ModelTableSpecs(config);
    for (const DenseTensor* t : tensors) {
      for (const TableSpec& spec : all) {
        if (spec.name == t->table()) specs.push_back(spec);
      }
    }
    PSDB_ASSIGN_OR_RETURN(
        model->replicated_,
        ReplicatedDense::Load(tensors, specs, client, config.dense_reducer));
  }
  return model;
}

absl::Status WideDeepModel::CreateTables() {
  return CreateModelTables(config_, client_);
}

std::vector<TableSpec> ModelTableSpecs(const WideDeepConfig& config) {
  const uint64_t seed = config.seed;
  std::vector<TableSpec> specs;
  TableSpec wide;
  wide.name = kWideTable;
  wide.dim = 1;
  wide.initializer = {InitKind::kZeros, 0, 0};
  wide.optimizer = Ftrl(config);
  wide.seed = seed;
  specs.push_back(wide);

  const bool has_deep = config.kind != ModelKind::kLr;
  TableSpec deep;
  deep.name = kDeepTable;
  deep.dim = config.deep_dim;
  deep.initializer = {InitKind::kUniform, -config.deep_init, config.deep_init};
  deep.optimizer.kind = config.deep_optimizer;
  deep.optimizer.learning_rate = config.deep_lr;
  deep.optimizer.weight_decay = config.deep_l2;
  deep.seed = seed + 1;
  if (has_deep) specs.push_back(deep);

  DenseTensor linear(kLinearTable, kLinearSize, config.block_dim);
  specs.push_back(
      linear.Spec({InitKind::kZeros, 0, 0}, Ftrl(config), seed + 2));
  optim::OptimizerSpec adam;
  adam.kind = optim::OptimizerKind::kAdam;
  adam.learning_rate = config.dense_lr;
  if (config.wide_field_scale) {
    // Every field starts at scale 1 (the unscaled model); the seed is one
    // no other table uses.
    DenseTensor scale(kScaleTable, kNumCatFeatures, config.block_dim);
    optim::OptimizerSpec scale_adam = adam;
    scale_adam.learning_rate = config.wide_scale_lr;
    specs.push_back(
        scale.Spec({InitKind::kConstant, 1.0f, 0}, scale_adam, seed + 1000));
  }

  if (!has_deep) return specs;
  const WideDeepShape shape = ShapeOf(config);
  const std::vector<size_t> sizes = shape.mlp.TensorSizes();
  for (size_t t = 0; t < sizes.size(); ++t) {
    const int layer = static_cast<int>(t / 2);
    const float limit = shape.mlp.GlorotLimit(layer);
    const InitializerSpec init =
        t % 2 == 0 ? InitializerSpec{InitKind::kUniform, -limit, limit}
                   : InitializerSpec{InitKind::kZeros, 0, 0};
    DenseTensor tensor(MlpTensorName(t), sizes[t], config.block_dim);
    specs.push_back(tensor.Spec(init, adam, seed + 3 + t));
  }
  if (config.kind == ModelKind::kDeepFwFm) {
    // Every pair starts at pair_weight_init (header comment).
    DenseTensor pairs(kFwFmTable, FwFmPairs(kNumCatFeatures), config.block_dim);
    optim::OptimizerSpec pair_adam = adam;
    pair_adam.learning_rate = config.pair_lr;
    specs.push_back(
        pairs.Spec({InitKind::kConstant, config.pair_weight_init, 0}, pair_adam,
                   seed + 3 + sizes.size()));
  }
  if (config.kind != ModelKind::kDcn) return specs;
  // Cross weights and readout Glorot-uniform, biases zero (DCN-v2's
  // initialization); seeds after the MLP's.
  const std::vector<size_t> cross_sizes = shape.cross.TensorSizes();
  for (size_t t = 0; t < cross_sizes.size(); ++t) {
    const bool out = t == cross_sizes.size() - 1;
    const float limit =
        out ? shape.cross.OutGlorotLimit() : shape.cross.LayerGlorotLimit();
    const InitializerSpec init =
        out || t % 2 == 0 ? InitializerSpec{InitKind::kUniform, -limit, limit}
                          : InitializerSpec{InitKind::kZeros, 0, 0};
    DenseTensor tensor(CrossTensorName(shape.cross, t), cross_sizes[t],
                       config.block_dim);
    specs.push_back(tensor.Spec(init, adam, seed + 3 + sizes.size() + t));
  }
  return specs;
}

absl::Status CreateModelTables(const WideDeepConfig& config,
                               ParameterClient* client) {
  for (const TableSpec& spec : ModelTableSpecs(config)) {
    absl::Status s = client->CreateTable(spec);
    if (absl::IsAlreadyExists(s)) {
      return absl::AlreadyExistsError(absl::StrCat(
          "table ", spec.name,
          " already exists in the store with a different spec (another "
          "model configuration trained there; use a fresh store): ",
          s.message()));
    }
    PSDB_RETURN_IF_ERROR(s);
  }
  return absl::OkStatus();
}

std::vector<std::string> EmbeddingTables(const WideDeepConfig& config) {
  if (config.kind == ModelKind::kLr) return {kWideTable};
  return {kWideTable, kDeepTable};
}

std::vector<std::string> WideDeepModel::TableNames() const {
  std::vector<std::string> names;
  for (const TableSpec& spec : ModelTableSpecs(config_)) {
    names.push_back(spec.name);
  }
  return names;
}

void WideDeepModel::Dedup(const CriteoBatch& batch, std::vector<uint64_t>* uniq,
                          std::vector<int32_t>* inv) {
  uniq->clear();
  if (inv != nullptr) inv->resize(batch.cat_keys.size());
  absl::flat_hash_map<uint64_t, int32_t> index;
  index.reserve(batch.cat_keys.size());
  for (size_t i = 0; i < batch.cat_keys.size(); ++i) {
    auto [it, inserted] = index.try_emplace(batch.cat_keys[i],
                                            static_cast<int32_t>(uniq->size()));
    if (inserted) uniq->push_back(batch.cat_keys[i]);
    if (inv != nullptr) (*inv)[i] = it->second;
  }
}

std::vector<EmbeddingRequest> WideDeepModel::Requests(
    const std::vector<uint64_t>& ids) const {
  if (!shape_.has_deep()) return {EmbeddingRequest{kWideTable, 1, ids}};
  return {EmbeddingRequest{kWideTable, 1, ids},
          EmbeddingRequest{kDeepTable, config_.deep_dim, ids}};
}

void WideDeepModel::Begin(const CriteoBatch& first) {
  Dedup(first, &next_uniq_, nullptr);
  embeddings_->Announce(Requests(next_uniq_));
}

absl::Status WideDeepModel::PullAll(const CriteoBatch& batch,
                                    const CriteoBatch* next, bool serving) {
  const int d = config_.deep_dim;
  Dedup(batch, &uniq_, &inv_);
  if (serving) {
    PSDB_RETURN_IF_ERROR(
        embeddings_->LookupForServing(Requests(uniq_), &rows_));
  } else {
    PSDB_RETURN_IF_ERROR(embeddings_->Lookup(Requests(uniq_), &rows_));
  }
  if (next != nullptr) {
    // The next batch's rows are fetched while this one computes.
    Dedup(*next, &next_uniq_, nullptr);
    const std::vector<EmbeddingRequest> next_requests = Requests(next_uniq_);
    embeddings_->Announce(next_requests);
    PSDB_RETURN_IF_ERROR(embeddings_->Prefetch(next_requests));
  }
  const std::vector<float>& wide_rows = rows_[0];
  wide_pos_.resize(inv_.size());
  for (size_t i = 0; i < inv_.size(); ++i) wide_pos_[i] = wide_rows[inv_[i]];
  if (shape_.has_deep()) {
    const std::vector<float>& deep_rows = rows_[1];
    deep_pos_.resize(inv_.size() * d);
    for (size_t i = 0; i < inv_.size(); ++i) {
      std::copy_n(deep_rows.begin() + static_cast<size_t>(inv_[i]) * d, d,
                  deep_pos_.begin() + i * d);
    }
  }
  if (replicated_ != nullptr) {
    // Tensor 0 is the linear part, then the MLP's, then the extra
    // part's, then the wide scales (Create's order).
    size_t r = 0;
    absl::Span<const float> v = replicated_->values(r++);
    linear_values_.assign(v.begin(), v.end());
    for (const DenseGroup& g : DenseGroups()) {
      for (std::vector<float>& tensor : *g.values) {
        v = replicated_->values(r++);
        tensor.assign(v.begin(), v.end());
      }
    }
  } else {
    PSDB_RETURN_IF_ERROR(
        linear_.Pull(client_, absl::MakeSpan(linear_values_), serving));
    for (const DenseGroup& g : DenseGroups()) {
      for (size_t t = 0; t < g.tensors->size(); ++t) {
        PSDB_RETURN_IF_ERROR((*g.tensors)[t].Pull(
            client_, absl::MakeSpan((*g.values)[t]), serving));
      }
    }
  }
  NormalizeIntFeatures(batch, &dense_);
  return absl::OkStatus();
}

absl::Status WideDeepModel::WaitForPush() {
  if (!pending_push_.valid()) return absl::OkStatus();
  return pending_push_.get();
}

absl::Status WideDeepModel::PushEmbeddings(int64_t step) {
  const absl::Span<const float> grads[] = {push_wide_, push_deep_};
  return embeddings_->Update(
      Requests(push_keys_),
      absl::MakeConstSpan(grads, shape_.has_deep() ? 2 : 1), step);
}

absl::Status WideDeepModel::PushDense(int64_t step) {
  if (replicated_ != nullptr) {
    std::vector<absl::Span<const float>> grads = {push_linear_};
    for (const DenseGroup& g : DenseGroups()) {
      for (const std::vector<float>& push : *g.push) grads.push_back(push);
    }
    return replicated_->Apply(grads, step);
  }
  PSDB_RETURN_IF_ERROR(linear_.Push(client_, push_linear_, step));
  for (const DenseGroup& g : DenseGroups()) {
    for (size_t t = 0; t < g.tensors->size(); ++t) {
      PSDB_RETURN_IF_ERROR((*g.tensors)[t].Push(client_, (*g.push)[t], step));
    }
  }
  return absl::OkStatus();
}

absl::Status WideDeepModel::PublishDense() {
  if (replicated_ == nullptr || replicated_->reducer().rank() != 0) {
    return absl::OkStatus();
  }
  return replicated_->Publish();
}

std::optional<uint64_t> WideDeepModel::DenseFingerprint() const {
  if (replicated_ == nullptr) return std::nullopt;
  return replicated_->Fingerprint();
}

std::string WideDeepModel::DenseDescription() const {
  if (replicated_ == nullptr) return "ps";
  return absl::StrCat("allreduce (", replicated_->reducer().Describe(), ")");
}

WideDeepInputs WideDeepModel::Inputs(const CriteoBatch& batch) const {
  WideDeepInputs in;
  in.n = static_cast<int>(batch.size());
  in.wide = wide_pos_;
  if (shape_.has_deep()) in.deep = deep_pos_;
  in.dense = dense_;
  in.labels = batch.labels;
  in.linear = linear_values_;
  for (const auto& v : mlp_values_) in.mlp.push_back(v);
  for (const auto& v : part_values_) in.part.push_back(v);
  if (!scale_values_.empty()) in.wide_scale = scale_values_[0];
  return in;
}

absl::StatusOr<WideDeepLoss> WideDeepModel::TrainStep(
    const CriteoBatch& batch, const CriteoBatch* next, int64_t step,
    std::vector<float>* probs) {
  if (batch.size() == 0) return absl::InvalidArgumentError("empty batch");
  if (!config_.async_push) PSDB_RETURN_IF_ERROR(WaitForPush());
  PSDB_RETURN_IF_ERROR(PullAll(batch, next, /*serving=*/false));

  WideDeepInputs in = Inputs(batch);
  in.dropout = {config_.dropout,
                HashKey(static_cast<uint64_t>(step), config_.seed)};
  const WideDeepLoss loss = ForwardBackward(shape_, in, probs, &grads_);

  // The previous asynchronous push still owns the push buffers.
  PSDB_RETURN_IF_ERROR(WaitForPush());
  const int d = config_.deep_dim;
  push_keys_ = uniq_;
  push_wide_.assign(uniq_.size(), 0.0f);
  for (size_t i = 0; i < inv_.size(); ++i) {
    push_wide_[inv_[i]] += grads_.wide[i];
  }
  if (shape_.has_deep()) {
    push_deep_.assign(uniq_.size() * d, 0.0f);
    for (size_t i = 0; i < inv_.size(); ++i) {
      float* dst = push_deep_.data() + static_cast<size_t>(inv_[i]) * d;
      const float* src = grads_.deep.data() + i * d;
      for (int k = 0; k < d; ++k) dst[k] += src[k];
    }
  }
  push_linear_ = grads_.linear;
  for (size_t t = 0; t < push_mlp_.size(); ++t) push_mlp_[t] = grads_.mlp[t];
  for (size_t t = 0; t < push_part_.size(); ++t) {
    push_part_[t] = grads_.part[t];
  }
  if (!push_scale_.empty()) push_scale_[0] = grads_.wide_scale;
  if (config_.async_push) {
    // A cache is driven by this thread only: its update stays here.
    const bool embeddings_async = embeddings_->ConcurrentUpdate();
    if (!embeddings_async) PSDB_RETURN_IF_ERROR(PushEmbeddings(step));
    pending_push_ = std::async(
        std::launch::async, [this, step, embeddings_async]() -> absl::Status {
          if (embeddings_async) PSDB_RETURN_IF_ERROR(PushEmbeddings(step));
          return PushDense(step);
        });
    return loss;
  }
  PSDB_RETURN_IF_ERROR(PushEmbeddings(step));
  PSDB_RETURN_IF_ERROR(PushDense(step));
  return loss;
}

absl::Status WideDeepModel::Predict(const CriteoBatch& batch,
                                    std::vector<float>* probs) {
  if (batch.size() == 0) {
    probs->clear();
    return absl::OkStatus();
  }
  PSDB_RETURN_IF_ERROR(WaitForPush());
  PSDB_RETURN_IF_ERROR(PullAll(batch, nullptr, /*serving=*/true));
  ForwardBackward(shape_, Inputs(batch), probs, nullptr);
  return absl::OkStatus();
}

}  // namespace psdb::train
