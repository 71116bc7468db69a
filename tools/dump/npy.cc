#include "tools/dump/npy.h"

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace psdb::dump {
namespace {

absl::Status IoError(absl::string_view what, const std::string& path) {
  return absl::InternalError(
      absl::StrCat(what, " ", path, ": ", std::strerror(errno)));
}

}  // namespace

std::string NpyPreamble(absl::string_view descr, uint64_t rows, uint64_t cols) {
  const std::string shape = cols == 0
                                ? absl::StrCat("(", rows, ",)")
                                : absl::StrCat("(", rows, ", ", cols, ")");
  std::string dict =
      absl::StrCat("{'descr': '", descr,
                   "', 'fortran_order': False, 'shape': ", shape, ", }");
  // 6 magic + 2 version + 2 length bytes, then the dict padded with spaces
  // and a final newline (numpy's own writer pads the same way).
  constexpr size_t kFixed = 10;
  const size_t header_len = kNpyPreambleBytes - kFixed;
  dict.resize(header_len - 1, ' ');
  dict.push_back('\n');
  std::string out("\x93NUMPY\x01\x00", 8);
  out.push_back(static_cast<char>(header_len & 0xff));
  out.push_back(static_cast<char>(header_len >> 8));
  out += dict;
  return out;
}

absl::StatusOr<std::unique_ptr<NpyWriter>> NpyWriter::Create(
    const std::string& path, absl::string_view descr, size_t elem_bytes,
    uint64_t cols) {
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (f == nullptr) return IoError("cannot create", path);
  const std::string preamble = NpyPreamble(descr, 0, cols);
  if (std::fwrite(preamble.data(), 1, preamble.size(), f) != preamble.size()) {
    std::fclose(f);
    return IoError("cannot write", path);
  }
  const size_t row_bytes = elem_bytes * (cols == 0 ? 1 : cols);
  return std::unique_ptr<NpyWriter>(
      new NpyWriter(path, f, std::string(descr), row_bytes, cols));
}

NpyWriter::NpyWriter(std::string path, std::FILE* file, std::string descr,
                     size_t row_bytes, uint64_t cols)
    : path_(std::move(path)),
      file_(file),
      descr_(std::move(descr)),
      row_bytes_(row_bytes),
      cols_(cols) {}

NpyWriter::~NpyWriter() {
  if (file_ != nullptr) std::fclose(file_);
}

absl::Status NpyWriter::AppendRow(const void* data) {
  if (file_ == nullptr) {
    return absl::FailedPreconditionError(
        absl::StrCat(path_, " is already finished"));
  }
  // psdb only runs on little-endian hosts (x86-64, aarch64), so the
  // in-memory bytes are already '<'.
  if (std::fwrite(data, 1, row_bytes_, file_) != row_bytes_) {
    return IoError("cannot write", path_);
  }
  ++rows_;
  return absl::OkStatus();
}

absl::Status NpyWriter::Finish() {
  if (file_ == nullptr) return absl::OkStatus();
  const std::string preamble = NpyPreamble(descr_, rows_, cols_);
  const bool ok = std::fseek(file_, 0, SEEK_SET) == 0 &&
                  std::fwrite(preamble.data(), 1, preamble.size(), file_) ==
                      preamble.size();
  const int close_rc = std::fclose(file_);
  file_ = nullptr;
  if (!ok || close_rc != 0) return IoError("cannot finish", path_);
  return absl::OkStatus();
}

}  // namespace psdb::dump
