#include "train/criteo_reader.h"

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <utility>

#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
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

// A field for a message: quoted, at most 32 bytes of it, C-escaped.
std::string Quoted(absl::string_view field) {
  constexpr size_t kMax = 32;
  if (field.size() <= kMax)
    return absl::StrCat("'", absl::CHexEscape(field), "'");
  return absl::StrCat("'", absl::CHexEscape(field.substr(0, kMax)), "...' (",
                      field.size(), " bytes)");
}

// The Criteo Terabyte logs' names: day_<N>, day_<N>.gz, day_<N>.zst.
bool TerabyteDay(absl::string_view name, uint64_t* day) {
  if (!absl::ConsumePrefix(&name, "day_")) return false;
  if (!absl::ConsumeSuffix(&name, ".gz")) absl::ConsumeSuffix(&name, ".zst");
  if (name.empty() || name.size() > 9) return false;
  for (char c : name) {
    if (c < '0' || c > '9') return false;
  }
  return absl::SimpleAtoi(name, day);
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
        absl::StrCat("label ", Quoted(fields[0]), " is not 0 or 1"));
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
          "integer feature I", j + 1, " ", Quoted(f), " is not an integer"));
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
          "categorical feature C", j + 1, " ", Quoted(f), " is not a hex id"));
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

bool InValidSplit(absl::string_view line, double fraction) {
  if (fraction <= 0) return false;
  absl::ConsumeSuffix(&line, "\r");
  // 2^64 * fraction as a double, compared in double: exact enough (the
  // fraction itself is a double) and never overflows.
  constexpr double kTwo64 = 18446744073709551616.0;
  return static_cast<double>(Hash64(line, /*seed=*/0x76616c6964ULL)) <
         fraction * kTwo64;
}

absl::StatusOr<std::unique_ptr<CriteoReader>> CriteoReader::Open(
    std::vector<std::string> files, const ReaderOptions& options) {
  if (files.empty()) return absl::InvalidArgumentError("no input files");
  if (options.world < 1 || options.rank < 0 || options.rank >= options.world) {
    return absl::InvalidArgumentError(absl::StrCat(
        "rank ", options.rank, " is not in [0, world=", options.world, ")"));
  }
  if (!(options.valid_fraction >= 0 && options.valid_fraction < 1)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "valid_fraction must be in [0, 1) (got ", options.valid_fraction, ")"));
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

CriteoReader::~CriteoReader() = default;

void CriteoReader::Rewind() {
  file_.reset();
  file_index_ = 0;
  global_line_ = 0;
}

absl::Status CriteoReader::OpenNextFile() {
  current_path_ = files_[file_index_++];
  absl::StatusOr<std::unique_ptr<LineReader>> opened =
      LineReader::Open(current_path_);
  if (!opened.ok()) return opened.status();
  file_ = *std::move(opened);
  line_in_file_ = 0;
  examined_in_file_ = 0;
  valid_in_file_ = 0;
  return absl::OkStatus();
}

absl::Status CriteoReader::CloseFile() {
  file_.reset();
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
    Line line;
    absl::StatusOr<bool> more = file_->Next(&line);
    if (!more.ok()) return more.status();
    if (!*more) {
      absl::Status s = CloseFile();
      if (!s.ok()) return s;
      continue;
    }
    ++line_in_file_;
    const uint64_t g = global_line_++;
    if (options_.shard_by == ShardBy::kLine &&
        static_cast<int>(g % options_.world) != options_.rank) {
      continue;
    }
    if (options_.split != Split::kAll &&
        InValidSplit(line.text, options_.valid_fraction) !=
            (options_.split == Split::kValid)) {
      continue;
    }
    ++examined_in_file_;
    if (line.truncated()) {
      CountMalformed(absl::StrCat("longer than the ", kMaxLineBytes,
                                  " bytes a Criteo line may have"),
                     line);
      continue;
    }
    absl::Status s = ParseCriteoLine(line.text, batch);
    if (s.ok()) {
      ++valid_in_file_;
      ++valid_lines_;
    } else {
      CountMalformed(s.message(), line);
    }
  }
  return batch->size();
}

void CriteoReader::CountMalformed(absl::string_view problem, const Line& line) {
  const uint64_t n = malformed_lines_++;
  if (n == 0) {
    first_error_ =
        absl::StrCat(current_path_, ":", line_in_file_, ": ", problem);
  }
  if (options_.malformed_log == nullptr) return;
  if (n < options_.max_logged_malformed) {
    const std::string text = DescribeMalformedLine(
        current_path_, line_in_file_, problem, line.text, line.length);
    std::fprintf(options_.malformed_log, "malformed line %s\n", text.c_str());
  } else if (n == options_.max_logged_malformed) {
    std::fprintf(options_.malformed_log,
                 "malformed lines: %llu logged; further ones are counted, "
                 "not logged\n",
                 static_cast<unsigned long long>(n));
  }
}

std::string DescribeMalformedLine(absl::string_view path, uint64_t line,
                                  absl::string_view problem,
                                  absl::string_view text, uint64_t length) {
  const bool cut = length > kLoggedLineBytes;
  return absl::StrCat(
      path, ":", line, ": ", problem, " (", length, " bytes): ",
      absl::CHexEscape(
          text.substr(0, std::min<uint64_t>(kLoggedLineBytes, length))),
      cut ? absl::StrCat("[... ", length - kLoggedLineBytes, " more bytes]")
          : "");
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
  std::vector<std::pair<uint64_t, std::string>> days;
  for (const auto& entry : fs::directory_iterator(root, ec)) {
    if (!entry.is_regular_file()) continue;
    const std::string name = entry.path().filename().string();
    uint64_t day;
    if (absl::StartsWith(name, "train")) {
      out.train_files.push_back(entry.path().string());
    } else if (absl::StartsWith(name, "test")) {
      out.test_files.push_back(entry.path().string());
    } else if (TerabyteDay(name, &day)) {
      days.emplace_back(day, entry.path().string());
    }
  }
  if (ec) {
    return absl::InternalError(
        absl::StrCat("cannot list ", dir, ": ", ec.message()));
  }
  std::sort(out.train_files.begin(), out.train_files.end());
  std::sort(out.test_files.begin(), out.test_files.end());
  std::sort(days.begin(), days.end());
  if (out.test_files.empty() && days.size() >= 2) {
    out.test_files.push_back(days.back().second);
    days.pop_back();
  }
  for (auto& [day, path] : days) out.train_files.push_back(std::move(path));
  if (out.train_files.empty()) {
    return absl::NotFoundError(absl::StrCat(
        "data directory ", dir,
        " has no train file (train*, or the Terabyte logs' day_N[.gz|.zst])"));
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
