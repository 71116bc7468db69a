// Reader for the Criteo display-advertising format, as in the Kaggle / Criteo
// Labs logs and the seeds' trainers: one example per line, tab-separated,
//   <label> <I1>..<I13> <C1>..<C26>
// label 0 or 1; I* integers (may be negative); C* hexadecimal ids (Criteo
// uses 8 hex digits; up to 16 are accepted). Any I* or C* may be empty
// (missing). A line with another field count, a bad label, a bad integer or
// a bad hex id is malformed: it is counted and skipped, never fatal, unless
// a whole file yields no valid line (then Next() fails naming the file).
// Files may be plain, gzip or zstd, told apart by their first bytes
// (train/line_reader.h); all three read the same, in bounded memory.
//
// Malformed lines are logged rate-limited: the first max_logged_malformed
// of a reader, one log line each, saying file:line, the problem, the line's
// length and its first 200 bytes (C-escaped, so binary data stays one
// printable line); after them one line says the rest are counted only.
// Every message quotes at most 32 bytes of a bad field, so a hostile 1 MiB
// field never reaches a log whole.
//
// Categorical values become psdb keys with CategoricalKey(field, value): the
// field is folded into the 64-bit hash, so one embedding table serves all 26
// fields without cross-field collisions (DESIGN.md: no modulo tables).
//
// Sharding (`rank` of `world` workers), the way the seeds' trainers split
// train.txt-0000N by trainer id:
//   kFile: this reader reads files[i] for i % world == rank.
//   kLine: it reads every file and keeps line g (0-based, counted over all
//          files in order, malformed lines included) when g % world == rank.
// Either way the ranks of one world partition the input exactly.
//
// Validation split (ReaderOptions::valid_fraction, `split`): a line is held
// out for validation when InValidSplit(line, fraction): the XXH3 hash of its
// bytes (a trailing '\r' ignored) falls in the lowest `fraction` of the
// 64-bit range. It depends on the line alone, so every worker, every epoch
// and every run agrees on it, whatever the sharding; identical lines fall
// on the same side (no leak from train to validation). The split is applied
// after the sharding filter; a validation reader is usually opened with
// world = 1 so every rank evaluates the whole validation set.
//
// Thread-safety: thread-compatible (one thread drives a reader).
#ifndef PSDB_TRAIN_CRITEO_READER_H_
#define PSDB_TRAIN_CRITEO_READER_H_

#include <cstdint>
#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "train/line_reader.h"

namespace psdb::train {

inline constexpr int kNumIntFeatures = 13;
inline constexpr int kNumCatFeatures = 26;
inline constexpr int kNumCriteoFields = 1 + kNumIntFeatures + kNumCatFeatures;

// The psdb key of categorical field `field` (0..25) with hex value `value`;
// `present` = false gives the field's "missing" key.
uint64_t CategoricalKey(int field, uint64_t value, bool present = true);

// A batch of parsed examples, column blocks per example (row-major).
struct CriteoBatch {
  std::vector<float> labels;         // n, 0 or 1
  std::vector<int64_t> ints;         // n * 13 raw integers (0 when missing)
  std::vector<uint8_t> int_present;  // n * 13, 1 when the field was set
  std::vector<uint64_t> cat_keys;    // n * 26 CategoricalKey()s

  size_t size() const { return labels.size(); }
  void Clear();
};

// Parses one line (without its newline; a trailing '\r' is ignored) and
// appends it to *batch. InvalidArgument describing the problem if it is
// malformed; *batch is then unchanged.
absl::Status ParseCriteoLine(absl::string_view line, CriteoBatch* batch);

enum class ShardBy : int { kFile = 0, kLine = 1 };

// Which side of the validation split a reader yields.
enum class Split : int {
  kAll = 0,    // every line (valid_fraction ignored)
  kTrain = 1,  // lines not held out
  kValid = 2,  // the held-out lines
};

// True when `line` belongs to the validation split of `fraction` (in
// [0, 1]): Hash64(line without a trailing '\r') < fraction * 2^64.
bool InValidSplit(absl::string_view line, double fraction);

struct ReaderOptions {
  // This worker's rank in [0, world). Default: 0
  int rank = 0;
  // Number of workers sharing the input. Default: 1
  int world = 1;
  // Default: kFile
  ShardBy shard_by = ShardBy::kFile;
  // Where malformed lines are logged; nullptr logs nothing (they are still
  // counted). Default: stderr
  std::FILE* malformed_log = stderr;
  // How many malformed lines one reader logs before it only counts them.
  // Default: 20
  uint64_t max_logged_malformed = 20;
  // Fraction of lines held out for validation, in [0, 1). Default: 0
  double valid_fraction = 0;
  // Which side of that split this reader yields. Default: kAll
  Split split = Split::kAll;
};

// How much of a malformed line a log line shows.
inline constexpr size_t kLoggedLineBytes = 200;

// The log text for malformed line `line` (1-based) of `path`: "path:line:
// problem (N bytes): first kLoggedLineBytes bytes, C-escaped[...]".
std::string DescribeMalformedLine(absl::string_view path, uint64_t line,
                                  absl::string_view problem,
                                  absl::string_view text, uint64_t length);

class CriteoReader {
 public:
  // InvalidArgument if files is empty, rank/world are out of range,
  // valid_fraction is not in [0, 1), or sharding by file leaves this rank
  // with no file.
  static absl::StatusOr<std::unique_ptr<CriteoReader>> Open(
      std::vector<std::string> files, const ReaderOptions& options = {});
  ~CriteoReader();
  CriteoReader(const CriteoReader&) = delete;
  CriteoReader& operator=(const CriteoReader&) = delete;

  // Appends up to `max_examples` valid examples of this shard to *batch
  // (cleared first); returns how many, 0 at the end of the input. NotFound
  // if a file cannot be opened, DataLoss if a file (of this shard) has no
  // valid line or its gzip/zstd stream is corrupt or truncated (the message
  // names the file, the compressed byte offset and the last line read).
  absl::StatusOr<size_t> Next(size_t max_examples, CriteoBatch* batch);

  // Starts over from the first file (next epoch). Counters keep counting.
  void Rewind();

  // The files this reader reads, in order.
  const std::vector<std::string>& files() const { return files_; }
  uint64_t valid_lines() const { return valid_lines_; }
  uint64_t malformed_lines() const { return malformed_lines_; }
  // The first malformed line's file, line number and problem ("" if none);
  // bounded: a bad field is quoted to at most 32 bytes.
  const std::string& first_error() const { return first_error_; }

 private:
  CriteoReader(std::vector<std::string> files, const ReaderOptions& options);
  absl::Status OpenNextFile();
  absl::Status CloseFile();
  void CountMalformed(absl::string_view problem, const Line& line);

  const std::vector<std::string> files_;
  const ReaderOptions options_;
  size_t file_index_ = 0;  // next file to open
  std::unique_ptr<LineReader> file_;
  std::string current_path_;
  uint64_t line_in_file_ = 0;
  uint64_t examined_in_file_ = 0;
  uint64_t valid_in_file_ = 0;
  uint64_t global_line_ = 0;  // lines seen over all files (kLine sharding)
  uint64_t valid_lines_ = 0;
  uint64_t malformed_lines_ = 0;
  std::string first_error_;
};

// A data directory's Criteo files (plain, .gz or .zst alike: the format
// comes from the bytes, see line_reader.h) and meta.json's bayes_auc if
// present. Which regular files count:
//   train files: every name starting with "train" (train.txt,
//     train.txt-00000, train.txt.gz, train_1.zst, ...), sorted by name, then
//     the Criteo Terabyte logs' day_<N>, day_<N>.gz, day_<N>.zst in day
//     order (day_2 before day_10);
//   test files: every name starting with "test" (test.txt, test.txt.gz,
//     ...), sorted by name. With none and two or more day files, the last
//     day is the test file (day_23 of the Terabyte logs: the MLPerf DLRM
//     split, days 0-22 train, 23 test).
// Anything else (meta.json, README, checksums) is ignored.
struct DataDir {
  std::vector<std::string> train_files;
  std::vector<std::string> test_files;
  std::optional<double> bayes_auc;
};

// NotFound if `dir` does not exist or holds no train file.
absl::StatusOr<DataDir> LoadDataDir(absl::string_view dir);

// The number value of top-level key `key` in a flat JSON object, if there.
std::optional<double> JsonNumber(absl::string_view json, absl::string_view key);

}  // namespace psdb::train

#endif  // PSDB_TRAIN_CRITEO_READER_H_
