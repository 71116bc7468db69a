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
#include "train/synthetic_random.h"

namespace psdb::train {

using synthetic_internal::Rng;

namespace {

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
  absl::StatusOr<SyntheticModel> model_or = SyntheticModel::Create(o);
  if (!model_or.ok()) return model_or.status();
  const SyntheticModel& model = *model_or;
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::create_directories(std::string(dir), ec);
  if (ec) {
    return absl::PermissionDeniedError(
        absl::StrCat("cannot create ", dir, ": ", ec.message()));
  }
  GeneratorResult result;
  result.vocab_sizes = model.vocab_sizes();
  result.field_weight_std = model.field_weight_std();
  const bool longtail = o.kind == GeneratorKind::kLongtail;

  Rng rng(o.seed);
  std::vector<float> test_probs, test_labels;
  test_probs.reserve(o.test_rows);
  test_labels.reserve(o.test_rows);
  double train_pos = 0, test_pos = 0;
  int64_t row = 0;  // over the train files, then the test file
  // longtail: the next singleton rank per field, after its vocabulary.
  std::vector<int64_t> next_singleton = model.vocab_sizes();
  // Writes `rows` examples to one file; test rows record their probability.
  // The draws per example (and their order) are psdb-synthetic-v1's, plus
  // one per present categorical value for longtail.
  auto write_rows = [&](const std::string& path, int64_t rows,
                        bool is_test) -> absl::Status {
    auto writer_or = FileWriter::Open(path);
    if (!writer_or.ok()) return writer_or.status();
    FileWriter& w = **writer_or;
    std::string* buf = w.buffer();
    SyntheticModel::Example e;
    for (int64_t i = 0; i < rows; ++i, ++row) {
      for (int j = 0; j < kNumIntFeatures; ++j) {
        e.int_set[j] = rng.Uniform() >= o.missing_rate;
        const double z = rng.Normal();
        e.ints[j] =
            e.int_set[j]
                ? static_cast<int64_t>(std::floor(std::exp(model.IntMu(j) + z)))
                : 0;
      }
      for (int f = 0; f < kNumCatFeatures; ++f) {
        e.cat_set[f] = rng.Uniform() >= o.missing_rate;
        const double u = rng.Uniform();
        if (!e.cat_set[f]) continue;
        if (longtail && rng.Uniform() < o.singleton_rate) {
          e.ranks[f] = next_singleton[f]++;
          ++result.singleton_values;
        } else {
          e.ranks[f] = model.SampleRank(f, u);
        }
      }
      const double p = 1.0 / (1.0 + std::exp(-model.Logit(e, row)));
      const bool label = rng.Uniform() < p;
      buf->push_back(label ? '1' : '0');
      for (int j = 0; j < kNumIntFeatures; ++j) {
        buf->push_back('\t');
        if (e.int_set[j]) absl::StrAppend(buf, e.ints[j]);
      }
      for (int f = 0; f < kNumCatFeatures; ++f) {
        buf->push_back('\t');
        if (e.cat_set[f]) AppendHex8(SyntheticModel::IdOf(f, e.ranks[f]), buf);
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
  absl::StrAppendFormat(
      (*meta_or)->buffer(),
      "{\n"
      "  \"format\": \"criteo\",\n"
      "  \"generator\": \"psdb-synthetic-v1\",\n"
      "  \"kind\": \"%s\",\n"
      "  \"seed\": %d,\n"
      "  \"train_rows\": %d,\n"
      "  \"test_rows\": %d,\n"
      "  \"train_files\": %d,\n"
      "  \"vocab_sizes\": [%s],\n"
      "  \"field_weight_std\": [%s],\n"
      "  \"zipf_s\": %.6g,\n"
      "  \"missing_rate\": %.6g,\n"
      "  \"train_ctr\": %.6f,\n"
      "  \"test_ctr\": %.6f,\n"
      "  \"bayes_auc\": %.6f,\n"
      "  \"bayes_auc_expected\": %.6f,\n"
      "  \"bayes_logloss\": %.6f,\n"
      "  \"singleton_values\": %d\n"
      "}\n",
      GeneratorKindName(o.kind), o.seed, o.train_rows, o.test_rows,
      o.train_files, absl::StrJoin(result.vocab_sizes, ", "),
      absl::StrJoin(result.field_weight_std, ", ",
                    [](std::string* out, double v) {
                      absl::StrAppendFormat(out, "%.9g", v);
                    }),
      o.zipf_s, o.missing_rate, result.train_ctr, result.test_ctr,
      result.bayes_auc, result.bayes_auc_expected, result.bayes_logloss,
      result.singleton_values);
  s = (*meta_or)->Close();
  if (!s.ok()) return s;
  result.files.push_back(meta_path);
  return result;
}

}  // namespace psdb::train
