// Lines of one data file, plain or compressed, read as a stream in bounded
// memory: what CriteoReader reads its files through.
//
// The format is chosen by the file's first bytes, never by its name:
//   1f 8b        gzip (zlib's inflate; concatenated members, as the Criteo
//                Terabyte logs' day_N.gz are, read as one stream)
//   28 b5 2f fd  zstd (libzstd's streaming decoder; concatenated frames too)
//   anything else: plain text
// so `day_0.gz`, `train.txt.zst` and a gzip file named `train.txt` all read
// the same way. A line ends at '\n' (a last line without one counts); the
// caller strips a trailing '\r'.
//
// Memory: one 256 KiB input and one 256 KiB output buffer, plus at most
// kMaxLineBytes of a line that spans two buffers, plus the decoder's window:
// 32 KiB for gzip, the frame's window for zstd (8 MiB at `zstd -19`; libzstd
// refuses frames that ask for more than 128 MiB, e.g. `zstd --long=28`:
// DataLoss quoting its reason). The file size does not matter. A longer line
// (no valid Criteo line comes near it: 40 fields of at most 20 bytes) is not
// kept: Next() gives its first kMaxLineBytes and its full length, and the
// caller counts it as malformed.
//
// Errors: a corrupt or truncated gzip/zstd stream, or a read error, is
// DataLoss naming the file, the byte offset in the (compressed) file and the
// last complete line; lines before it were returned as usual.
//
// Thread-safety: thread-compatible (one thread reads a LineReader).
#ifndef PSDB_TRAIN_LINE_READER_H_
#define PSDB_TRAIN_LINE_READER_H_

#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace psdb::train {

enum class Compression : int { kNone = 0, kGzip = 1, kZstd = 2 };

// "plain", "gzip" or "zstd".
absl::string_view CompressionName(Compression compression);

// The compression the first bytes of a file announce (at least 4 bytes
// give a definite answer; fewer are plain).
Compression DetectCompression(absl::string_view first_bytes);

// The longest line a LineReader keeps whole.
inline constexpr size_t kMaxLineBytes = 64 * 1024;

// One line, valid until the next call to Next() or the reader's end.
struct Line {
  // The line without its '\n'; only the first kMaxLineBytes of a longer one.
  absl::string_view text;
  // The full length of the line in bytes, without its '\n'.
  uint64_t length = 0;
  bool truncated() const { return length > text.size(); }
};

class LineReader {
 public:
  // NotFound if `path` cannot be opened; DataLoss if it cannot be read.
  static absl::StatusOr<std::unique_ptr<LineReader>> Open(
      const std::string& path);
  ~LineReader();
  LineReader(const LineReader&) = delete;
  LineReader& operator=(const LineReader&) = delete;

  // The next line in *line: true, or false at the end of the file. DataLoss
  // as described above; after an error the reader returns only errors.
  absl::StatusOr<bool> Next(Line* line);

  const std::string& path() const { return path_; }
  Compression compression() const { return compression_; }
  // Lines returned so far.
  uint64_t lines() const { return lines_; }

  // The decompressor behind the reader (internal, in line_reader.cc).
  class Decoder;

 private:
  LineReader(std::string path, std::unique_ptr<Decoder> decoder,
             Compression compression);
  // Refills out_ from the decoder; false at the end of the data.
  absl::StatusOr<bool> Fill();

  const std::string path_;
  const std::unique_ptr<Decoder> decoder_;
  const Compression compression_;
  std::vector<char> out_;  // decoded bytes, out_[pos_, end_) not yet returned
  size_t pos_ = 0;
  size_t end_ = 0;
  bool done_ = false;
  std::string line_;  // a line that spans decoded chunks (<= kMaxLineBytes)
  uint64_t lines_ = 0;
  absl::Status error_;
};

}  // namespace psdb::train

#endif  // PSDB_TRAIN_LINE_READER_H_
