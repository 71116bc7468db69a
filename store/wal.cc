#include "store/wal.h"

#include <xxhash.h>

#include <algorithm>
#include <cstring>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "rocksdb/file_system.h"

namespace psdb::internal {
namespace {

// A segment header's first 7 bytes; the 8th is the format version's digit.
constexpr absl::string_view kSegmentMagic = "PSDBWAL";
constexpr absl::string_view kSegmentSuffix = ".log";
// Records smaller than this are copied together into one write.
constexpr size_t kCoalesceBytes = 64 << 10;

void PutU32(char* p, uint32_t v) { std::memcpy(p, &v, 4); }
void PutU64(char* p, uint64_t v) { std::memcpy(p, &v, 8); }
uint32_t GetU32(const char* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}
uint64_t GetU64(const char* p) {
  uint64_t v;
  std::memcpy(&v, p, 8);
  return v;
}

absl::Status FromIo(const rocksdb::IOStatus& s, absl::string_view what) {
  if (s.ok()) return absl::OkStatus();
  const std::string msg =
      absl::StrCat("write-ahead log: ", what, ": ", s.ToString());
  if (s.IsNoSpace()) return absl::ResourceExhaustedError(msg);
  return absl::UnavailableError(msg);
}

// Seq of a segment file name, or 0 if `name` is not one.
uint64_t SegmentSeq(absl::string_view name) {
  if (name.size() != 16 + kSegmentSuffix.size() ||
      name.substr(16) != kSegmentSuffix) {
    return 0;
  }
  uint64_t seq = 0;
  if (!absl::SimpleAtoi(name.substr(0, 16), &seq)) return 0;
  return seq;
}

bool KnownRecordType(uint32_t type) {
  return type >= static_cast<uint32_t>(WalRecordType::kPush) &&
         type <= static_cast<uint32_t>(WalRecordType::kPushSums);
}

absl::StatusOr<std::vector<uint64_t>> ListSegments(rocksdb::FileSystem* fs,
                                                   const std::string& dir) {
  std::vector<std::string> names;
  rocksdb::IOStatus s =
      fs->GetChildren(dir, rocksdb::IOOptions(), &names, nullptr);
  if (s.IsNotFound() || s.IsPathNotFound()) return std::vector<uint64_t>{};
  if (!s.ok()) return FromIo(s, absl::StrCat("list ", dir));
  std::vector<uint64_t> seqs;
  for (const std::string& n : names) {
    if (const uint64_t seq = SegmentSeq(n); seq > 0) seqs.push_back(seq);
  }
  std::sort(seqs.begin(), seqs.end());
  return seqs;
}

// Reads exactly n bytes unless the file ends; returns how many were read.
absl::StatusOr<size_t> ReadFull(rocksdb::FSSequentialFile* f, size_t n,
                                char* buf, const std::string& path) {
  size_t got = 0;
  while (got < n) {
    rocksdb::Slice result;
    rocksdb::IOStatus s =
        f->Read(n - got, rocksdb::IOOptions(), &result, buf + got, nullptr);
    if (!s.ok()) return FromIo(s, absl::StrCat("read ", path));
    if (result.size() == 0) break;
    if (result.data() != buf + got) {
      std::memmove(buf + got, result.data(), result.size());
    }
    got += result.size();
  }
  return got;
}

void PutName(absl::string_view table, std::string* out) {
  const uint16_t len = static_cast<uint16_t>(table.size());
  out->append(reinterpret_cast<const char*>(&len), 2);
  out->append(table.data(), table.size());
}
template <typename T>
void PutRaw(const T& v, std::string* out) {
  out->append(reinterpret_cast<const char*>(&v), sizeof(T));
}

}  // namespace

void EncodePushRecord(absl::string_view table, int64_t step,
                      absl::Span<const uint64_t> keys,
                      absl::Span<const float> grads, int dim,
                      std::string* out) {
  out->assign(kWalRecordHeaderBytes, '\0');
  out->reserve(kWalRecordHeaderBytes + 2 + table.size() + 16 + 8 * keys.size() +
               4 * grads.size());
  PutName(table, out);
  PutRaw(step, out);
  PutRaw(static_cast<uint32_t>(keys.size()), out);
  PutRaw(static_cast<uint32_t>(dim), out);
  out->append(reinterpret_cast<const char*>(keys.data()), 8 * keys.size());
  out->append(reinterpret_cast<const char*>(grads.data()), 4 * grads.size());
}

void EncodePushSumsRecord(absl::string_view table, int64_t step,
                          absl::Span<const uint64_t> keys,
                          absl::Span<const uint32_t> occ,
                          absl::Span<const float> sums, int dim,
                          absl::Span<const uint8_t> skip, std::string* out) {
  const size_t d = static_cast<size_t>(dim);
  size_t n = keys.size();
  for (uint8_t s : skip) n -= s != 0;
  // One allocation, then every field copied once into place.
  const size_t head = WalPushStepOffset(table.size());
  out->resize(head + 16 + (12 + 4 * d) * n);
  char* p = out->data();
  std::memset(p, 0, kWalRecordHeaderBytes);
  const uint16_t len = static_cast<uint16_t>(table.size());
  std::memcpy(p + kWalRecordHeaderBytes, &len, 2);
  std::memcpy(p + kWalRecordHeaderBytes + 2, table.data(), table.size());
  std::memcpy(p + head, &step, 8);
  PutU32(p + head + 8, static_cast<uint32_t>(n));
  PutU32(p + head + 12, static_cast<uint32_t>(dim));
  char* k = p + head + 16;
  char* o = k + 8 * n;
  char* f = o + 4 * n;
  if (n == keys.size()) {
    std::memcpy(k, keys.data(), 8 * n);
    std::memcpy(o, occ.data(), 4 * n);
    std::memcpy(f, sums.data(), 4 * d * n);
    return;
  }
  for (size_t u = 0; u < keys.size(); ++u) {
    if (skip[u]) continue;
    std::memcpy(k, &keys[u], 8);
    std::memcpy(o, &occ[u], 4);
    std::memcpy(f, sums.data() + u * d, 4 * d);
    k += 8;
    o += 4;
    f += 4 * d;
  }
}

void EncodePutRowsRecord(absl::string_view table,
                         absl::Span<const uint64_t> keys, const RowBatch& rows,
                         std::string* out) {
  out->assign(kWalRecordHeaderBytes, '\0');
  PutName(table, out);
  PutRaw(static_cast<uint32_t>(keys.size()), out);
  PutRaw(static_cast<uint32_t>(rows.dim), out);
  PutRaw(static_cast<uint32_t>(rows.state_size), out);
  out->append(reinterpret_cast<const char*>(keys.data()), 8 * keys.size());
  out->append(reinterpret_cast<const char*>(rows.values.data()),
              4 * rows.values.size());
  out->append(reinterpret_cast<const char*>(rows.state.data()),
              4 * rows.state.size());
  for (const RowHeader& h : rows.headers) {
    PutRaw(h.last_update_step, out);
    PutRaw(h.update_count, out);
    PutRaw(h.frequency, out);
  }
}

void EncodeDeleteRowsRecord(absl::string_view table,
                            absl::Span<const uint64_t> keys, std::string* out) {
  out->assign(kWalRecordHeaderBytes, '\0');
  PutName(table, out);
  PutRaw(static_cast<uint32_t>(keys.size()), out);
  out->append(reinterpret_cast<const char*>(keys.data()), 8 * keys.size());
}

absl::StatusOr<WalRowsRecord> DecodeRowsRecord(WalRecordType type,
                                               absl::string_view payload) {
  WalRowsRecord r;
  const char* p = payload.data();
  size_t left = payload.size();
  auto bad = [&]() {
    return absl::DataLossError(
        absl::StrCat("write-ahead log: malformed record of type ",
                     static_cast<int>(type), " (", payload.size(), " bytes)"));
  };
  auto take = [&](size_t n) -> const char* {
    if (left < n) return nullptr;
    const char* q = p;
    p += n;
    left -= n;
    return q;
  };
  const char* q = take(2);
  if (q == nullptr) return bad();
  uint16_t len;
  std::memcpy(&len, q, 2);
  if ((q = take(len)) == nullptr) return bad();
  r.table = absl::string_view(q, len);
  const bool push =
      type == WalRecordType::kPush || type == WalRecordType::kPushSums;
  if (push) {
    if ((q = take(8)) == nullptr) return bad();
    r.step = static_cast<int64_t>(GetU64(q));
  }
  if ((q = take(4)) == nullptr) return bad();
  r.n = GetU32(q);
  if (type != WalRecordType::kDeleteRows) {
    if ((q = take(4)) == nullptr) return bad();
    r.dim = GetU32(q);
  }
  if (type == WalRecordType::kPutRows) {
    if ((q = take(4)) == nullptr) return bad();
    r.state_size = GetU32(q);
  }
  const uint64_t n = r.n;
  uint64_t need = 8 * n;
  if (push) need += 4 * n * r.dim;
  if (type == WalRecordType::kPushSums) need += 4 * n;
  if (type == WalRecordType::kPutRows) {
    need += 4 * n * (uint64_t{r.dim} + r.state_size) + 24 * n;
  }
  if (need != left) return bad();
  r.keys = p;
  r.floats = p + 8 * n;
  if (type == WalRecordType::kPushSums) {
    r.occ = r.floats;
    r.floats += 4 * n;
  }
  if (type == WalRecordType::kPutRows) {
    r.headers = r.floats + 4 * n * (uint64_t{r.dim} + r.state_size);
  }
  return r;
}

std::vector<uint64_t> WalKeys(const WalRowsRecord& r) {
  std::vector<uint64_t> keys(r.n);
  std::memcpy(keys.data(), r.keys, 8 * keys.size());
  return keys;
}

std::vector<float> WalFloats(const char* p, size_t n) {
  std::vector<float> v(n);
  std::memcpy(v.data(), p, 4 * n);
  return v;
}

std::vector<uint32_t> WalU32s(const char* p, size_t n) {
  std::vector<uint32_t> v(n);
  std::memcpy(v.data(), p, 4 * n);
  return v;
}

std::string WalSegmentName(uint64_t seq) {
  return absl::StrFormat("%016d%s", seq, kSegmentSuffix);
}

std::string WalSegmentHeader(uint32_t version, uint64_t wal_id) {
  std::string h(kWalSegmentHeaderBytes, '\0');
  std::memcpy(h.data(), kSegmentMagic.data(), kSegmentMagic.size());
  h[7] = static_cast<char>('0' + version);
  PutU64(h.data() + 8, wal_id);
  return h;
}

namespace {

void FillHeader(WalRecordType type, uint64_t lsn, absl::string_view payload,
                char* h) {
  PutU32(h + 4, static_cast<uint32_t>(payload.size()));
  PutU32(h + 8, static_cast<uint32_t>(type));
  PutU64(h + 12, lsn);
  PutU64(h + 20, XXH3_64bits(payload.data(), payload.size()));
  PutU32(h, static_cast<uint32_t>(XXH3_64bits(h + 4, 28)));
}

}  // namespace

void AppendWalRecord(WalRecordType type, uint64_t lsn,
                     absl::string_view payload, std::string* out) {
  char h[kWalRecordHeaderBytes];
  FillHeader(type, lsn, payload, h);
  out->append(h, sizeof(h));
  out->append(payload.data(), payload.size());
}

absl::StatusOr<WalReadStats> ReadWal(
    rocksdb::FileSystem* fs, const std::string& dir, uint64_t wal_id,
    absl::FunctionRef<absl::Status(const WalRecordView&)> fn) {
  WalReadStats stats;
  absl::StatusOr<std::vector<uint64_t>> seqs = ListSegments(fs, dir);
  if (!seqs.ok()) return seqs.status();
  std::string payload;
  for (uint64_t seq : *seqs) {
    stats.last_seq = std::max(stats.last_seq, seq);
    const std::string path = absl::StrCat(dir, "/", WalSegmentName(seq));
    std::unique_ptr<rocksdb::FSSequentialFile> f;
    rocksdb::IOStatus s =
        fs->NewSequentialFile(path, rocksdb::FileOptions(), &f, nullptr);
    if (!s.ok()) return FromIo(s, absl::StrCat("open ", path));
    uint64_t size = 0;
    (void)fs->GetFileSize(path, rocksdb::IOOptions(), &size, nullptr);
    char sh[kWalSegmentHeaderBytes];
    absl::StatusOr<size_t> got = ReadFull(f.get(), sizeof(sh), sh, path);
    if (!got.ok()) return got.status();
    const uint32_t version =
        *got < sizeof(sh) ? 0 : static_cast<uint32_t>(sh[7] - '0');
    if (*got < sizeof(sh) ||
        absl::string_view(sh, kSegmentMagic.size()) != kSegmentMagic ||
        version < 1 || version > 9) {
      // A segment cut before its header was written holds no record.
      stats.torn_bytes += *got;
      continue;
    }
    if (version > kWalFormatVersion) {
      return absl::FailedPreconditionError(absl::StrCat(
          "write-ahead log segment ", path, " has format version ", version,
          ", newer than this build reads (", kWalFormatVersion,
          "): open the store with the psdb that wrote it"));
    }
    if (GetU64(sh + 8) != wal_id) {
      ++stats.stale_segments;
      continue;
    }
    ++stats.segments;
    uint64_t offset = sizeof(sh);
    while (true) {
      char h[kWalRecordHeaderBytes];
      got = ReadFull(f.get(), sizeof(h), h, path);
      if (!got.ok()) return got.status();
      if (*got == 0) break;
      bool torn = *got < sizeof(h) ||
                  GetU32(h) != static_cast<uint32_t>(XXH3_64bits(h + 4, 28));
      const uint32_t len = torn ? 0 : GetU32(h + 4);
      if (!torn && len > size - std::min(size, offset + sizeof(h))) {
        torn = true;  // claims more bytes than the file has
      }
      if (!torn) {
        payload.resize(len);
        got = ReadFull(f.get(), len, payload.data(), path);
        if (!got.ok()) return got.status();
        torn = *got < len || XXH3_64bits(payload.data(), len) != GetU64(h + 20);
      }
      if (torn) {
        stats.torn_bytes += size > offset ? size - offset : 0;
        break;
      }
      offset += sizeof(h) + len;
      const uint64_t lsn = GetU64(h + 12);
      if (lsn <= stats.last_lsn) {
        ++stats.duplicates;
        continue;
      }
      const uint32_t type = GetU32(h + 8);
      if (!KnownRecordType(type)) {
        // Intact (both checksums match), so written by a newer psdb.
        return absl::FailedPreconditionError(absl::StrCat(
            "write-ahead log segment ", path, ": record ", lsn, " has type ",
            type, ", unknown to this build (log format version ",
            kWalFormatVersion,
            "): open the store with the psdb that wrote it"));
      }
      stats.last_lsn = lsn;
      ++stats.records;
      absl::Status st =
          fn(WalRecordView{static_cast<WalRecordType>(type), lsn, payload});
      if (!st.ok()) return st;
    }
  }
  return stats;
}

absl::Status RemoveWalSegments(rocksdb::FileSystem* fs, const std::string& dir,
                               uint64_t below_seq) {
  absl::StatusOr<std::vector<uint64_t>> seqs = ListSegments(fs, dir);
  if (!seqs.ok()) return seqs.status();
  for (uint64_t seq : *seqs) {
    if (seq >= below_seq) continue;
    const std::string path = absl::StrCat(dir, "/", WalSegmentName(seq));
    rocksdb::IOStatus s = fs->DeleteFile(path, rocksdb::IOOptions(), nullptr);
    if (!s.ok() && !s.IsNotFound() && !s.IsPathNotFound()) {
      return FromIo(s, absl::StrCat("delete ", path));
    }
  }
  return absl::OkStatus();
}

// ---------------------------------------------------------------------------
// Wal

Wal::Wal(Options options)
    : options_(std::move(options)),
      next_lsn_(options_.next_lsn),
      buffered_lsn_(options_.next_lsn - 1),
      written_lsn_(options_.next_lsn - 1),
      next_seq_(options_.next_seq) {}

Wal::~Wal() {
  if (file_ != nullptr) {
    (void)file_->Close(rocksdb::IOOptions(), nullptr);
  }
}

absl::StatusOr<std::unique_ptr<Wal>> Wal::Open(Options options) {
  if (options.fs == nullptr || options.dir.empty() || options.next_lsn == 0 ||
      options.next_seq == 0) {
    return absl::InvalidArgumentError("write-ahead log: bad options");
  }
  rocksdb::IOStatus s = options.fs->CreateDirIfMissing(
      options.dir, rocksdb::IOOptions(), nullptr);
  if (!s.ok()) return FromIo(s, absl::StrCat("create ", options.dir));
  return std::unique_ptr<Wal>(new Wal(std::move(options)));
}

uint64_t Wal::Append(WalRecordType type, absl::string_view payload) {
  std::string framed(kWalRecordHeaderBytes, '\0');
  framed.append(payload.data(), payload.size());
  return AppendFramed(type, &framed);
}

uint64_t Wal::AppendFramed(WalRecordType type, std::string* framed) {
  const absl::string_view payload =
      absl::string_view(*framed).substr(kWalRecordHeaderBytes);
  absl::MutexLock l(&mu_);
  const uint64_t lsn = next_lsn_++;
  FillHeader(type, lsn, payload, framed->data());
  buf_.push_back(std::move(*framed));
  framed->clear();
  buffered_lsn_ = lsn;
  return lsn;
}

absl::Status Wal::OpenSegment(uint64_t seq) {
  if (file_ != nullptr) {
    (void)file_->Close(rocksdb::IOOptions(), nullptr);
    file_.reset();
  }
  const std::string path = absl::StrCat(options_.dir, "/", WalSegmentName(seq));
  std::unique_ptr<rocksdb::FSWritableFile> f;
  rocksdb::IOStatus s =
      options_.fs->NewWritableFile(path, rocksdb::FileOptions(), &f, nullptr);
  if (!s.ok()) return FromIo(s, absl::StrCat("create ", path));
  const std::string h = WalSegmentHeader(kWalFormatVersion, options_.wal_id);
  s = f->Append(h, rocksdb::IOOptions(), nullptr);
  if (!s.ok()) return FromIo(s, absl::StrCat("write ", path));
  if (options_.sync) {
    // The new name must survive a power cut too.
    std::unique_ptr<rocksdb::FSDirectory> d;
    s = options_.fs->NewDirectory(options_.dir, rocksdb::IOOptions(), &d,
                                  nullptr);
    if (s.ok())
      s = d->FsyncWithDirOptions(rocksdb::IOOptions(), nullptr,
                                 rocksdb::DirFsyncOptions());
    if (!s.ok()) return FromIo(s, absl::StrCat("sync ", options_.dir));
  }
  file_ = std::move(f);
  return absl::OkStatus();
}

absl::Status Wal::WaitWritten(uint64_t lsn) {
  absl::MutexLock l(&mu_);
  while (written_lsn_ < lsn) {
    if (writing_) {
      mu_.Await(absl::Condition(
          +[](bool* w) { return !*w; }, &writing_));
      if (written_lsn_ < lsn && !last_error_.ok() && failed_lsn_ >= lsn) {
        return last_error_;
      }
      continue;
    }
    // Become the writer of everything buffered so far.
    writing_ = true;
    std::vector<std::string> data = std::move(buf_);
    buf_.clear();
    const uint64_t last = buffered_lsn_;
    const uint64_t n = data.size();
    const bool open = need_segment_;
    const uint64_t seq = next_seq_;
    if (open) {
      need_segment_ = false;
      ++next_seq_;
    }
    mu_.Unlock();
    absl::Status s;
    if (open) s = OpenSegment(seq);
    // Small records are copied together into one write; a large one (a
    // push usually is) goes as it is, without a copy.
    std::string small;
    for (size_t i = 0; s.ok() && i < data.size(); ++i) {
      if (data[i].size() < kCoalesceBytes) {
        small.append(data[i]);
        if (i + 1 < data.size() && small.size() < kCoalesceBytes) continue;
        s = FromIo(file_->Append(small, rocksdb::IOOptions(), nullptr),
                   "write");
        small.clear();
        continue;
      }
      if (!small.empty()) {
        s = FromIo(file_->Append(small, rocksdb::IOOptions(), nullptr),
                   "write");
        small.clear();
        if (!s.ok()) break;
      }
      s = FromIo(file_->Append(data[i], rocksdb::IOOptions(), nullptr),
                 "write");
    }
    if (s.ok())
      s = FromIo(file_->Flush(rocksdb::IOOptions(), nullptr), "flush");
    if (s.ok() && options_.sync) {
      s = FromIo(file_->Sync(rocksdb::IOOptions(), nullptr), "sync");
    }
    mu_.Lock();
    writing_ = false;
    if (s.ok()) {
      written_lsn_ = std::max(written_lsn_, last);
      ++groups_;
      records_ += n;
      last_error_ = absl::OkStatus();
    } else {
      // Keep the group (ahead of what was appended meanwhile) for the next
      // write, which goes to a new segment: nothing follows a torn record.
      for (std::string& r : buf_) data.push_back(std::move(r));
      buf_ = std::move(data);
      need_segment_ = true;
      last_error_ = s;
      failed_lsn_ = last;
      if (lsn <= last) return s;
    }
  }
  return absl::OkStatus();
}

Wal::Cut Wal::Rotate() {
  absl::WriterMutexLock a(&apply_mu_);
  absl::MutexLock l(&mu_);
  need_segment_ = true;
  // A write in progress has already taken its seq (below next_seq_).
  return Cut{next_lsn_ - 1, next_seq_};
}

uint64_t Wal::next_lsn() const {
  absl::MutexLock l(&mu_);
  return next_lsn_;
}
uint64_t Wal::written_lsn() const {
  absl::MutexLock l(&mu_);
  return written_lsn_;
}
uint64_t Wal::groups() const {
  absl::MutexLock l(&mu_);
  return groups_;
}
uint64_t Wal::records() const {
  absl::MutexLock l(&mu_);
  return records_;
}

}  // namespace psdb::internal
