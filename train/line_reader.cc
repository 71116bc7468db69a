#include "train/line_reader.h"

#include <zlib.h>
#include <zstd.h>

#include <cerrno>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"

namespace psdb::train {
namespace {

constexpr size_t kChunkBytes = 256 * 1024;

}  // namespace

absl::string_view CompressionName(Compression compression) {
  switch (compression) {
    case Compression::kGzip:
      return "gzip";
    case Compression::kZstd:
      return "zstd";
    case Compression::kNone:
      break;
  }
  return "plain";
}

Compression DetectCompression(absl::string_view b) {
  // RFC 1952 (gzip member header) and RFC 8878 (zstd frame magic 0xFD2FB528,
  // little-endian).
  if (b.size() >= 2 && static_cast<uint8_t>(b[0]) == 0x1f &&
      static_cast<uint8_t>(b[1]) == 0x8b) {
    return Compression::kGzip;
  }
  if (b.size() >= 4 && static_cast<uint8_t>(b[0]) == 0x28 &&
      static_cast<uint8_t>(b[1]) == 0xb5 &&
      static_cast<uint8_t>(b[2]) == 0x2f &&
      static_cast<uint8_t>(b[3]) == 0xfd) {
    return Compression::kZstd;
  }
  return Compression::kNone;
}

// Raw file bytes in in_[in_pos_, in_len_); Read() produces decoded bytes.
class LineReader::Decoder {
 public:
  virtual ~Decoder() {
    if (file_ != nullptr) std::fclose(file_);
  }
  // Up to `cap` (> 0) decoded bytes into `dst`; 0 only at the end of the data.
  virtual absl::StatusOr<size_t> Read(char* dst, size_t cap) = 0;

  // Takes `file`, whose first in_len bytes are already in `in`.
  void Init(std::FILE* file, std::string path, std::vector<char> in,
            size_t in_len) {
    file_ = file;
    path_ = std::move(path);
    in_ = std::move(in);
    in_len_ = in_len;
    file_offset_ = in_len;
    eof_ = in_len < in_.size() && std::feof(file);
  }
  // For error messages: the last complete line's number.
  void set_lines(const uint64_t* lines) { lines_ = lines; }

 protected:
  // Reads the next raw chunk into in_ (in_pos_ = 0). eof_ once none is left.
  absl::Status Refill() {
    in_pos_ = 0;
    in_len_ = std::fread(in_.data(), 1, in_.size(), file_);
    file_offset_ += in_len_;
    if (in_len_ < in_.size()) {
      if (std::ferror(file_)) {
        return absl::DataLossError(
            absl::StrCat("read error in data file ", path_, " at byte ",
                         file_offset_, ": ", std::strerror(errno)));
      }
      if (in_len_ == 0) eof_ = true;
    }
    return absl::OkStatus();
  }
  // The byte offset in the file of in_[in_pos_].
  uint64_t Offset() const { return file_offset_ - (in_len_ - in_pos_); }
  absl::Status Corrupt(absl::string_view format, absl::string_view what) const {
    return absl::DataLossError(absl::StrCat(
        format, " data file ", path_, " is ", what, " at compressed byte ",
        Offset(), " (after line ", *lines_, ")"));
  }

  std::FILE* file_ = nullptr;
  std::string path_;
  std::vector<char> in_;
  size_t in_pos_ = 0;
  size_t in_len_ = 0;
  uint64_t file_offset_ = 0;  // raw bytes read from the file so far
  bool eof_ = false;
  const uint64_t* lines_ = nullptr;
};

namespace {

class PlainDecoder final : public LineReader::Decoder {
 public:
  absl::StatusOr<size_t> Read(char* dst, size_t cap) override {
    if (in_pos_ == in_len_) {
      if (eof_) return 0;
      absl::Status s = Refill();
      if (!s.ok()) return s;
      if (in_len_ == 0) return 0;
    }
    const size_t n = std::min(cap, in_len_ - in_pos_);
    std::memcpy(dst, in_.data() + in_pos_, n);
    in_pos_ += n;
    return n;
  }
};

// zlib's inflate over gzip members, one after another (RFC 1952 section 2.2:
// a gzip file is a series of members). Bytes after a member that do not
// start another one are corruption, not ignored.
class GzipDecoder final : public LineReader::Decoder {
 public:
  GzipDecoder() {
    std::memset(&zs_, 0, sizeof(zs_));
    // 16 + MAX_WBITS: a gzip wrapper, no zlib or raw streams.
    ok_ = inflateInit2(&zs_, 16 + MAX_WBITS) == Z_OK;
  }
  ~GzipDecoder() override { inflateEnd(&zs_); }

  absl::StatusOr<size_t> Read(char* dst, size_t cap) override {
    if (!ok_) return absl::ResourceExhaustedError("cannot start zlib inflate");
    zs_.next_out = reinterpret_cast<Bytef*>(dst);
    zs_.avail_out = static_cast<uInt>(cap);
    while (zs_.avail_out == cap) {
      if (in_pos_ == in_len_ && !eof_) {
        absl::Status s = Refill();
        if (!s.ok()) return s;
      }
      if (in_pos_ == in_len_ && eof_ && !in_member_) return 0;
      in_member_ = true;
      zs_.next_in = reinterpret_cast<Bytef*>(in_.data() + in_pos_);
      zs_.avail_in = static_cast<uInt>(in_len_ - in_pos_);
      const int rc = inflate(&zs_, Z_NO_FLUSH);
      in_pos_ = in_len_ - zs_.avail_in;
      if (rc == Z_STREAM_END) {
        in_member_ = false;
        inflateReset(&zs_);
      } else if (rc == Z_BUF_ERROR) {
        // No progress without more input.
        if (in_pos_ == in_len_ && eof_) {
          return Corrupt("gzip", "truncated (ends inside a gzip member)");
        }
      } else if (rc != Z_OK) {
        return Corrupt("gzip",
                       absl::StrCat("corrupt (zlib: ",
                                    zs_.msg != nullptr ? zs_.msg : "", ")"));
      }
    }
    return cap - zs_.avail_out;
  }

 private:
  z_stream zs_;
  bool ok_ = false;
  bool in_member_ = false;  // inside a member: its end has not been read
};

// libzstd's streaming decoder; ZSTD_decompressStream returns 0 exactly when
// a frame is complete and flushed, so a non-zero hint at the end of the
// input is a truncated frame.
class ZstdDecoder final : public LineReader::Decoder {
 public:
  ZstdDecoder() : ds_(ZSTD_createDStream()) {
    if (ds_ != nullptr) ZSTD_initDStream(ds_);
  }
  ~ZstdDecoder() override { ZSTD_freeDStream(ds_); }

  absl::StatusOr<size_t> Read(char* dst, size_t cap) override {
    if (ds_ == nullptr) {
      return absl::ResourceExhaustedError("cannot start zstd decoder");
    }
    ZSTD_outBuffer out{dst, cap, 0};
    while (out.pos == 0) {
      if (in_pos_ == in_len_ && !eof_) {
        absl::Status s = Refill();
        if (!s.ok()) return s;
      }
      const bool input_left = in_pos_ < in_len_;
      if (!input_left && eof_ && hint_ == 0) return 0;
      ZSTD_inBuffer in{in_.data(), in_len_, in_pos_};
      const size_t r = ZSTD_decompressStream(ds_, &out, &in);
      in_pos_ = in.pos;
      if (ZSTD_isError(r)) {
        return Corrupt(
            "zstd", absl::StrCat("corrupt (zstd: ", ZSTD_getErrorName(r), ")"));
      }
      hint_ = r;
      if (out.pos == 0 && !input_left && eof_) {
        // Nothing left to read and nothing came out: the frame is cut.
        return Corrupt("zstd", "truncated (ends inside a zstd frame)");
      }
    }
    return out.pos;
  }

 private:
  ZSTD_DStream* const ds_;
  size_t hint_ = 0;  // ZSTD_decompressStream's last return: 0 = frame done
};

}  // namespace

absl::StatusOr<std::unique_ptr<LineReader>> LineReader::Open(
    const std::string& path) {
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (f == nullptr) {
    return absl::NotFoundError(absl::StrCat("cannot open data file ", path,
                                            ": ", std::strerror(errno)));
  }
  std::vector<char> in(kChunkBytes);
  const size_t n = std::fread(in.data(), 1, in.size(), f);
  if (n < in.size() && std::ferror(f)) {
    const int e = errno;
    std::fclose(f);
    return absl::DataLossError(
        absl::StrCat("cannot read data file ", path, ": ", std::strerror(e)));
  }
  const Compression c = DetectCompression(absl::string_view(in.data(), n));
  std::unique_ptr<Decoder> decoder;
  switch (c) {
    case Compression::kGzip:
      decoder = std::make_unique<GzipDecoder>();
      break;
    case Compression::kZstd:
      decoder = std::make_unique<ZstdDecoder>();
      break;
    case Compression::kNone:
      decoder = std::make_unique<PlainDecoder>();
      break;
  }
  decoder->Init(f, path, std::move(in), n);
  return std::unique_ptr<LineReader>(
      new LineReader(path, std::move(decoder), c));
}

LineReader::LineReader(std::string path, std::unique_ptr<Decoder> decoder,
                       Compression compression)
    : path_(std::move(path)),
      decoder_(std::move(decoder)),
      compression_(compression),
      out_(kChunkBytes) {
  decoder_->set_lines(&lines_);
}

LineReader::~LineReader() = default;

absl::StatusOr<bool> LineReader::Fill() {
  absl::StatusOr<size_t> n = decoder_->Read(out_.data(), out_.size());
  if (!n.ok()) return n.status();
  pos_ = 0;
  end_ = *n;
  return *n > 0;
}

absl::StatusOr<bool> LineReader::Next(Line* line) {
  if (!error_.ok()) return error_;
  line_.clear();
  uint64_t length = 0;  // of the line being assembled in line_
  bool spanning = false;
  while (true) {
    if (pos_ == end_) {
      if (done_) break;
      absl::StatusOr<bool> more = Fill();
      if (!more.ok()) {
        error_ = more.status();
        return error_;
      }
      if (!*more) {
        done_ = true;
        break;
      }
    }
    const char* begin = out_.data() + pos_;
    const size_t avail = end_ - pos_;
    const char* nl = static_cast<const char*>(std::memchr(begin, '\n', avail));
    const size_t take = nl != nullptr ? static_cast<size_t>(nl - begin) : avail;
    pos_ += take + (nl != nullptr ? 1 : 0);
    if (nl != nullptr && !spanning) {
      // The common case: the whole line is in out_, no copy.
      ++lines_;
      line->text = absl::string_view(begin, std::min(take, kMaxLineBytes));
      line->length = take;
      return true;
    }
    spanning = true;
    if (line_.size() < kMaxLineBytes) {
      line_.append(begin, std::min(take, kMaxLineBytes - line_.size()));
    }
    length += take;
    if (nl != nullptr) break;
  }
  if (!spanning) return false;  // the end, right after a '\n'
  ++lines_;
  line->text = line_;
  line->length = length;
  return true;
}

}  // namespace psdb::train
