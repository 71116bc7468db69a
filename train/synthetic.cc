#include "train/synthetic.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <memory>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "train/criteo_reader.h"
#include "train/metrics.h"
#include "util/hash.h"

namespace psdb::train {
namespace {

constexpr double kTwoPi = 6.283185307179586;

// Counter-based uniform in [0, 1) from a 64-bit hash (53 bits).
double ToUnit(uint64_t h) { return static_cast<double>(h >> 11) * 0x1.0p-53; }

// A standard normal determined by `h` (Box-Muller on two derived draws).
double NormalOf(uint64_t h) {
  const double u1 = ToUnit(Mix64(h)) + 0x1.0p-54;  // (0, 1)
  const double u2 = ToUnit(Mix64(h ^ 0x5851f42d4c957f2dULL));
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(kTwoPi * u2);
}

// A sequential stream (SplitMix64), the same on every platform.
class Rng {
 public:
  explicit Rng(uint64_t seed) : state_(seed) {}
  uint64_t Next() { return Mix64(state_++ * 0x9e3779b97f4a7c15ULL); }
  double Uniform() { return ToUnit(Next()); }
  double Normal() { return NormalOf(Next()); }

 private:
  uint64_t state_;
};

// MurmurHash3's fmix32: a bijection on 32-bit values.
uint32_t Scramble32(uint32_t x) {
  x ^= x >> 16;
  x *= 0x85ebca6bu;
  x ^= x >> 13;
  x *= 0xc2b2ae35u;
  x ^= x >> 16;
  return x;
}

struct Field {
  int64_t vocab;
  double weight_std;
  std::vector<double> cdf;  // Zipf CDF over ranks
};

class FileWriter {
 public:
  static absl::StatusOr<std::unique_ptr<FileWriter>> Open(
      const std::string& path) {
    std::FILE* f = std::fopen(path.c_str(), "w");
    if (f == nullptr) {
      return absl::PermissionDeniedError(absl::StrCat("cannot write ", path));
    }
    return std::unique_ptr<FileWriter>(new FileWriter(f, path));
  }
  ~FileWriter() {
    if (f_ != nullptr) std::fclose(f_);
  }
  std::string* buffer() { return &buf_; }
  absl::Status MaybeFlush(bool force) {
    if (!force && buf_.size() < (1 << 20)) return absl::OkStatus();
    if (std::fwrite(buf_.data(), 1, buf_.size(), f_) != buf_.size()) {
      return absl::DataLossError(absl::StrCat("short write to ", path_));
    }
    buf_.clear();
    return absl::OkStatus();
  }
  absl::Status Close() {
    absl::Status s = MaybeFlush(true);
    if (std::fclose(f_) != 0 && s.ok()) {
      s = absl::DataLossError(absl::StrCat("cannot close ", path_));
    }
    f_ = nullptr;
    return s;
  }

 private:
  FileWriter(std::FILE* f, std::string path) : f_(f), path_(std::move(path)) {}
  std::FILE* f_;
  std::string path_;
  std::string buf_;
};

void AppendHex8(uint32_t v, std::string* out) {
  static const char kDigits[] = "0123456789abcdef";
  char buf[8];
  for (int i = 7; i >= 0; --i) {
    buf[i] = kDigits[v & 15];
    v >>= 4;
  }
  out->append(buf, 8);
}

}  // namespace

absl::StatusOr<GeneratorResult> GenerateSynthetic(const GeneratorOptions& o,
                                                  absl::string_view dir) {
  if (o.train_rows < 1 || o.test_rows < 2 || o.train_files < 1 ||
      o.min_vocab < 1 || o.max_vocab < o.min_vocab ||
      o.max_vocab > (int64_t{1} << 31) || o.zipf_s <= 0 || o.missing_rate < 0 ||
      o.missing_rate >= 1) {
    return absl::InvalidArgumentError(
        "generator: need train_rows >= 1, test_rows >= 2, train_files >= 1, "
        "1 <= min_vocab <= max_vocab <= 2^31, zipf_s > 0, "
        "missing_rate in [0, 1)");
  }
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::create_directories(std::string(dir), ec);
  if (ec) {
    return absl::PermissionDeniedError(
        absl::StrCat("cannot create ", dir, ": ", ec.message()));
  }
  const uint64_t seed = o.seed;

  // The hidden model.
  std::vector<Field> fields(kNumCatFeatures);
  GeneratorResult result;
  for (int f = 0; f < kNumCatFeatures; ++f) {
    Field& field = fields[f];
    const double t = static_cast<double>(f) / (kNumCatFeatures - 1);
    field.vocab = std::max<int64_t>(
        1, std::llround(
               o.min_vocab *
               std::pow(static_cast<double>(o.max_vocab) / o.min_vocab, t)));
    field.weight_std =
        o.cat_weight_std * ToUnit(HashKey(f, seed ^ 0x6669656c64ULL));
    field.cdf.resize(field.vocab);
    double sum = 0;
    for (int64_t r = 0; r < field.vocab; ++r) {
      sum += std::pow(static_cast<double>(r + 1), -o.zipf_s);
      field.cdf[r] = sum;
    }
    for (double& c : field.cdf) c /= sum;
    result.vocab_sizes.push_back(field.vocab);
  }
  double int_weight[kNumIntFeatures], int_mu[kNumIntFeatures];
  for (int j = 0; j < kNumIntFeatures; ++j) {
    int_weight[j] = o.int_weight_std * NormalOf(HashKey(j, seed ^ 0x696e74ULL));
    int_mu[j] = 4.0 * ToUnit(HashKey(j, seed ^ 0x6d75ULL));
  }
  auto id_weight = [&](int f, int64_t r) {
    return fields[f].weight_std *
           NormalOf(
               HashKey(static_cast<uint64_t>(r),
                       seed * 0x100000001b3ULL + static_cast<uint64_t>(f)));
  };

  Rng rng(seed);
  std::vector<float> test_probs, test_labels;
  test_probs.reserve(o.test_rows);
  test_labels.reserve(o.test_rows);
  double train_pos = 0, test_pos = 0;
  // Writes `rows` examples to one file; test rows record their probability.
  auto write_rows = [&](const std::string& path, int64_t rows,
                        bool is_test) -> absl::Status {
    auto writer_or = FileWriter::Open(path);
    if (!writer_or.ok()) return writer_or.status();
    FileWriter& w = **writer_or;
    std::string* buf = w.buffer();
    std::string line;
    for (int64_t i = 0; i < rows; ++i) {
      line.clear();
      double logit = o.bias;
      int64_t ints[kNumIntFeatures];
      bool int_set[kNumIntFeatures];
      for (int j = 0; j < kNumIntFeatures; ++j) {
        int_set[j] = rng.Uniform() >= o.missing_rate;
        const double z = rng.Normal();
        ints[j] =
            int_set[j]
                ? static_cast<int64_t>(std::floor(std::exp(int_mu[j] + z)))
                : 0;
        if (int_set[j]) {
          logit += int_weight[j] * std::log1p(static_cast<double>(ints[j]));
        }
      }
      uint32_t hex[kNumCatFeatures];
      bool cat_set[kNumCatFeatures];
      for (int f = 0; f < kNumCatFeatures; ++f) {
        cat_set[f] = rng.Uniform() >= o.missing_rate;
        const double u = rng.Uniform();
        if (!cat_set[f]) continue;
        const auto& cdf = fields[f].cdf;
        const int64_t r = std::min<int64_t>(
            std::upper_bound(cdf.begin(), cdf.end(), u) - cdf.begin(),
            fields[f].vocab - 1);
        hex[f] = Scramble32(static_cast<uint32_t>(r) ^
                            (0x9e3779b9u * static_cast<uint32_t>(f + 1)));
        logit += id_weight(f, r);
      }
      const double p = 1.0 / (1.0 + std::exp(-logit));
      const bool label = rng.Uniform() < p;
      buf->push_back(label ? '1' : '0');
      for (int j = 0; j < kNumIntFeatures; ++j) {
        buf->push_back('\t');
        if (int_set[j]) absl::StrAppend(buf, ints[j]);
      }
      for (int f = 0; f < kNumCatFeatures; ++f) {
        buf->push_back('\t');
        if (cat_set[f]) AppendHex8(hex[f], buf);
      }
      buf->push_back('\n');
      if (is_test) {
        test_probs.push_back(static_cast<float>(p));
        test_labels.push_back(label ? 1.0f : 0.0f);
        test_pos += label;
      } else {
        train_pos += label;
      }
      absl::Status s = w.MaybeFlush(false);
      if (!s.ok()) return s;
    }
    return w.Close();
  };

  const fs::path root{std::string(dir)};
  for (int k = 0; k < o.train_files; ++k) {
    const int64_t begin = o.train_rows * k / o.train_files;
    const int64_t end = o.train_rows * (k + 1) / o.train_files;
    const std::string path =
        (root / absl::StrFormat("train.txt-%05d", k)).string();
    absl::Status s = write_rows(path, end - begin, /*is_test=*/false);
    if (!s.ok()) return s;
    result.files.push_back(path);
  }
  const std::string test_path = (root / "test.txt").string();
  absl::Status s = write_rows(test_path, o.test_rows, /*is_test=*/true);
  if (!s.ok()) return s;
  result.files.push_back(test_path);

  result.train_ctr = train_pos / o.train_rows;
  result.test_ctr = test_pos / o.test_rows;
  auto auc = Auc(test_probs, test_labels);
  if (!auc.ok()) return auc.status();
  result.bayes_auc = *auc;
  auto expected = ExpectedAuc(test_probs);
  if (!expected.ok()) return expected.status();
  result.bayes_auc_expected = *expected;
  auto logloss = LogLoss(test_probs, test_labels);
  if (!logloss.ok()) return logloss.status();
  result.bayes_logloss = *logloss;

  const std::string meta_path = (root / "meta.json").string();
  auto meta_or = FileWriter::Open(meta_path);
  if (!meta_or.ok()) return meta_or.status();
  absl::StrAppendFormat((*meta_or)->buffer(),
                        "{\n"
                        "  \"format\": \"criteo\",\n"
                        "  \"generator\": \"psdb-synthetic-v1\",\n"
                        "  \"seed\": %d,\n"
                        "  \"train_rows\": %d,\n"
                        "  \"test_rows\": %d,\n"
                        "  \"train_files\": %d,\n"
                        "  \"vocab_sizes\": [%s],\n"
                        "  \"zipf_s\": %.6g,\n"
                        "  \"missing_rate\": %.6g,\n"
                        "  \"train_ctr\": %.6f,\n"
                        "  \"test_ctr\": %.6f,\n"
                        "  \"bayes_auc\": %.6f,\n"
                        "  \"bayes_auc_expected\": %.6f,\n"
                        "  \"bayes_logloss\": %.6f\n"
                        "}\n",
                        o.seed, o.train_rows, o.test_rows, o.train_files,
                        absl::StrJoin(result.vocab_sizes, ", "), o.zipf_s,
                        o.missing_rate, result.train_ctr, result.test_ctr,
                        result.bayes_auc, result.bayes_auc_expected,
                        result.bayes_logloss);
  s = (*meta_or)->Close();
  if (!s.ok()) return s;
  result.files.push_back(meta_path);
  return result;
}

}  // namespace psdb::train
