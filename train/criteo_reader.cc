#include "train/criteo_reader.h"

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "util/hash.h"

namespace psdb::train {
namespace {

// Seeds that separate present and missing values of each field.
constexpr uint64_t kCatSeedBase = 0x70736462'63617400ULL;  // "psdbcat\0"

bool ParseHex(absl::string_view s, uint64_t* out) {
  if (s.empty() || s.size() > 16) return false;
  uint64_t v = 0;
  for (char c : s) {
    int d;
    if (c >= '0' && c <= '9') {
      d = c - '0';
    } else if (c >= 'a' && c <= 'f') {
      d = c - 'a' + 10;
    } else if (c >= 'A' && c <= 'F') {
      d = c - 'A' + 10;
    } else {
      return false;
    }
    v = (v << 4) | static_cast<uint64_t>(d);
  }
  *out = v;
  return true;
}

}  // namespace

uint64_t CategoricalKey(int field, uint64_t value, bool present) {
  const uint64_t seed =
      kCatSeedBase + 2 * static_cast<uint64_t>(field) + (present ? 0 : 1);
  return HashKey(present ? value : 0, seed);
}

void CriteoBatch::Clear() {
  labels.clear();
  ints.clear();
  int_present.clear();
  cat_keys.clear();
}

absl::Status ParseCriteoLine(absl::string_view line, CriteoBatch* batch) {
  if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
  absl::string_view fields[kNumCriteoFields];
  int n = 0;
  size_t start = 0;
  while (true) {
    const size_t tab = line.find('\t', start);
    if (n == kNumCriteoFields) {
      return absl::InvalidArgumentError(
          absl::StrCat("more than ", kNumCriteoFields, " fields"));
    }
    fields[n++] = line.substr(start, tab == absl::string_view::npos
                                         ? absl::string_view::npos
                                         : tab - start);
    if (tab == absl::string_view::npos) break;
    start = tab + 1;
  }
  if (n != kNumCriteoFields) {
    return absl::InvalidArgumentError(
        absl::StrCat(n, " fields, expected ", kNumCriteoFields));
  }
  float label;
  if (fields[0] == "0") {
    label = 0.0f;
  } else if (fields[0] == "1") {
    label = 1.0f;
  } else {
    return absl::InvalidArgumentError(
        absl::StrCat("label '", fields[0], "' is not 0 or 1"));
  }
  int64_t ints[kNumIntFeatures];
  uint8_t present[kNumIntFeatures];
  for (int j = 0; j < kNumIntFeatures; ++j) {
    const absl::string_view f = fields[1 + j];
    if (f.empty()) {
      ints[j] = 0;
      present[j] = 0;
      continue;
    }
    if (!absl::SimpleAtoi(f, &ints[j])) {
      return absl::InvalidArgumentError(absl::StrCat(
          "integer feature I", j + 1, " '", f, "' is not an integer"));
    }
    present[j] = 1;
  }
  uint64_t keys[kNumCatFeatures];
  for (int j = 0; j < kNumCatFeatures; ++j) {
    const absl::string_view f = fields[1 + kNumIntFeatures + j];
    if (f.empty()) {
      keys[j] = CategoricalKey(j, 0, /*present=*/false);
      continue;
    }
    uint64_t v;
    if (!ParseHex(f, &v)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "categorical feature C", j + 1, " '", f, "' is not a hex id"));
    }
    keys[j] = CategoricalKey(j, v);
  }
  batch->labels.push_back(label);
  batch->ints.insert(batch->ints.end(), ints, ints + kNumIntFeatures);
  batch->int_present.insert(batch->int_present.end(), present,
                            present + kNumIntFeatures);
  batch->cat_keys.insert(batch->cat_keys.end(), keys, keys + kNumCatFeatures);
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<CriteoReader>> CriteoReader::Open(
    std::vector<std::string> files, const ReaderOptions& options) {
  if (files.empty()) return absl::InvalidArgumentError("no input files");
  if (options.world < 1 || options.rank < 0 || options.rank >= options.world) {
    return absl::InvalidArgumentError(absl::StrCat(
        "rank ", options.rank, " is not in [0, world=", options.world, ")"));
  }
  std::vector<std::string> mine;
  if (options.shard_by == ShardBy::kFile) {
    for (size_t i = 0; i < files.size(); ++i) {
      if (static_cast<int>(i % options.world) == options.rank) {
        mine.push_back(files[i]);
      }
    }
    if (mine.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("sharding ", files.size(), " files by file leaves rank ",
                       options.rank, " of ", options.world,
                       " with none; shard by line instead"));
    }
  } else {
    mine = std::move(files);
  }
  return std::unique_ptr<CriteoReader>(
      new CriteoReader(std::move(mine), options));
}

CriteoReader::CriteoReader(std::vector<std::string> files,
                           const ReaderOptions& options)
    : files_(std::move(files)), options_(options) {}

CriteoReader::~CriteoReader() {
  if (file_ != nullptr) std::fclose(file_);
  std::free(line_buf_);
}

void CriteoReader::Rewind() {
  if (file_ != nullptr) std::fclose(file_);
  file_ = nullptr;
  file_index_ = 0;
  global_line_ = 0;
}

absl::Status CriteoReader::OpenNextFile() {
  current_path_ = files_[file_index_++];
  file_ = std::fopen(current_path_.c_str(), "r");
  if (file_ == nullptr) {
    return absl::NotFoundError(
        absl::StrCat("cannot open data file ", current_path_));
  }
  line_in_file_ = 0;
  examined_in_file_ = 0;
  valid_in_file_ = 0;
  return absl::OkStatus();
}

absl::Status CriteoReader::CloseFile() {
  std::fclose(file_);
  file_ = nullptr;
  // A line-sharded rank may legitimately get no line of a short file; an
  // empty file, or one whose examined lines are all bad, is an error.
  if (line_in_file_ == 0 || (examined_in_file_ > 0 && valid_in_file_ == 0)) {
    return absl::DataLossError(absl::StrCat(
        "data file ", current_path_, " has no valid Criteo line (",
        line_in_file_, " lines",
        first_error_.empty() ? "" : "; first error: ", first_error_, ")"));
  }
  return absl::OkStatus();
}

absl::StatusOr<size_t> CriteoReader::Next(size_t max_examples,
                                          CriteoBatch* batch) {
  batch->Clear();
  while (batch->size() < max_examples) {
    if (file_ == nullptr) {
      if (file_index_ >= files_.size()) break;
      absl::Status s = OpenNextFile();
      if (!s.ok()) return s;
    }
    const ssize_t len = getline(&line_buf_, &line_cap_, file_);
    if (len < 0) {
      absl::Status s = CloseFile();
      if (!s.ok()) return s;
      continue;
    }
    absl::string_view line(line_buf_, static_cast<size_t>(len));
    if (!line.empty() && line.back() == '\n') line.remove_suffix(1);
    ++line_in_file_;
    const uint64_t g = global_line_++;
    if (options_.shard_by == ShardBy::kLine &&
        static_cast<int>(g % options_.world) != options_.rank) {
      continue;
    }
    ++examined_in_file_;
    absl::Status s = ParseCriteoLine(line, batch);
    if (s.ok()) {
      ++valid_in_file_;
      ++valid_lines_;
    } else {
      if (malformed_lines_++ == 0) {
        first_error_ =
            absl::StrCat(current_path_, ":", line_in_file_, ": ", s.message());
      }
    }
  }
  return batch->size();
}

std::optional<double> JsonNumber(absl::string_view json,
                                 absl::string_view key) {
  const std::string quoted = absl::StrCat("\"", key, "\"");
  size_t pos = json.find(quoted);
  if (pos == absl::string_view::npos) return std::nullopt;
  pos = json.find(':', pos + quoted.size());
  if (pos == absl::string_view::npos) return std::nullopt;
  ++pos;
  while (pos < json.size() && (json[pos] == ' ' || json[pos] == '\n' ||
                               json[pos] == '\t' || json[pos] == '\r')) {
    ++pos;
  }
  size_t end = pos;
  while (end < json.size() &&
         (std::isdigit(static_cast<unsigned char>(json[end])) ||
          json[end] == '-' || json[end] == '+' || json[end] == '.' ||
          json[end] == 'e' || json[end] == 'E')) {
    ++end;
  }
  double v;
  if (!absl::SimpleAtod(json.substr(pos, end - pos), &v)) return std::nullopt;
  return v;
}

absl::StatusOr<DataDir> LoadDataDir(absl::string_view dir) {
  namespace fs = std::filesystem;
  const fs::path root{std::string(dir)};
  std::error_code ec;
  if (!fs::is_directory(root, ec)) {
    return absl::NotFoundError(
        absl::StrCat("data directory ", dir, " does not exist"));
  }
  DataDir out;
  for (const auto& entry : fs::directory_iterator(root, ec)) {
    if (!entry.is_regular_file()) continue;
    const std::string name = entry.path().filename().string();
    if (name.rfind("train", 0) == 0) {
      out.train_files.push_back(entry.path().string());
    } else if (name.rfind("test", 0) == 0) {
      out.test_files.push_back(entry.path().string());
    }
  }
  if (ec) {
    return absl::InternalError(
        absl::StrCat("cannot list ", dir, ": ", ec.message()));
  }
  std::sort(out.train_files.begin(), out.train_files.end());
  std::sort(out.test_files.begin(), out.test_files.end());
  if (out.train_files.empty()) {
    return absl::NotFoundError(
        absl::StrCat("data directory ", dir, " has no train* file"));
  }
  std::ifstream meta(root / "meta.json");
  if (meta) {
    std::stringstream ss;
    ss << meta.rdbuf();
    out.bayes_auc = JsonNumber(ss.str(), "bayes_auc");
  }
  return out;
}

}  // namespace psdb::train
