#include "util/file_io.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"

namespace psdb {
namespace {

namespace fs = std::filesystem;

absl::Status ErrnoStatus(absl::string_view what, absl::string_view path) {
  const int e = errno;
  const std::string msg = absl::StrCat(what, " ", path, ": ", std::strerror(e));
  if (e == ENOSPC) return absl::ResourceExhaustedError(msg);
  return absl::InternalError(msg);
}

absl::Status EcStatus(absl::string_view what, absl::string_view path,
                      const std::error_code& ec) {
  return absl::InternalError(absl::StrCat(what, " ", path, ": ", ec.message()));
}

absl::Status FsyncPath(const std::string& path, bool directory) {
  const int fd =
      ::open(path.c_str(), directory ? O_RDONLY | O_DIRECTORY : O_RDONLY);
  if (fd < 0) return ErrnoStatus("open", path);
  const int rc = ::fsync(fd);
  ::close(fd);
  if (rc != 0) return ErrnoStatus("fsync", path);
  return absl::OkStatus();
}

class PosixFileIo final : public FileIo {
 public:
  absl::StatusOr<std::string> ReadFile(const std::string& path) const override {
    std::error_code ec;
    if (!fs::exists(path, ec)) {
      return absl::NotFoundError(absl::StrCat("no such file: ", path));
    }
    std::ifstream in(path, std::ios::binary);
    std::stringstream buf;
    if (in) buf << in.rdbuf();
    if (!in || in.bad()) {
      return absl::InternalError(absl::StrCat("cannot read ", path));
    }
    return buf.str();
  }

  absl::Status WriteFileAtomically(const std::string& path,
                                   absl::string_view data) const override {
    const std::string tmp = absl::StrCat(path, ".tmp");
    const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0) return ErrnoStatus("create", tmp);
    size_t off = 0;
    while (off < data.size()) {
      const ssize_t n = ::write(fd, data.data() + off, data.size() - off);
      if (n < 0) {
        if (errno == EINTR) continue;
        absl::Status s = ErrnoStatus("write", tmp);
        ::close(fd);
        return s;
      }
      off += static_cast<size_t>(n);
    }
    if (::fsync(fd) != 0) {
      absl::Status s = ErrnoStatus("fsync", tmp);
      ::close(fd);
      return s;
    }
    if (::close(fd) != 0) return ErrnoStatus("close", tmp);
    if (::rename(tmp.c_str(), path.c_str()) != 0) {
      return ErrnoStatus("rename to", path);
    }
    return FsyncPath(ParentDir(path), /*directory=*/true);
  }

  bool Exists(const std::string& path) const override {
    std::error_code ec;
    return fs::exists(path, ec);
  }

  bool IsDirectory(const std::string& path) const override {
    std::error_code ec;
    return fs::is_directory(path, ec);
  }

  absl::StatusOr<std::vector<std::string>> ListChildren(
      const std::string& dir) const override {
    std::vector<std::string> out;
    std::error_code ec;
    for (const fs::directory_entry& e : fs::directory_iterator(dir, ec)) {
      out.push_back(e.path().filename().string());
    }
    if (ec) return EcStatus("cannot list", dir, ec);
    return out;
  }

  absl::Status CreateDir(const std::string& dir) const override {
    if (::mkdir(dir.c_str(), 0755) != 0) {
      if (errno == EEXIST) {
        return absl::AlreadyExistsError(absl::StrCat(dir, " already exists"));
      }
      return ErrnoStatus("create", dir);
    }
    return absl::OkStatus();
  }

  absl::Status CreateDirs(const std::string& dir) const override {
    std::error_code ec;
    fs::create_directories(dir, ec);
    if (ec) return EcStatus("create", dir, ec);
    return absl::OkStatus();
  }

  absl::Status DeleteFile(const std::string& path) const override {
    std::error_code ec;
    fs::remove(path, ec);
    if (ec) return EcStatus("remove", path, ec);
    return absl::OkStatus();
  }

  absl::Status DeleteRecursively(const std::string& path) const override {
    std::error_code ec;
    fs::remove_all(path, ec);
    if (ec) return EcStatus("remove", path, ec);
    return absl::OkStatus();
  }

  absl::Status Rename(const std::string& from,
                      const std::string& to) const override {
    std::error_code ec;
    fs::rename(from, to, ec);
    if (ec) return EcStatus(absl::StrCat("rename ", from, " to"), to, ec);
    return absl::OkStatus();
  }

  absl::Status LinkOrCopyFile(const std::string& from,
                              const std::string& to) const override {
    std::error_code ec;
    fs::create_hard_link(from, to, ec);
    if (!ec) return absl::OkStatus();
    return CopyFile(from, to);  // another device: copy instead
  }

  absl::Status CopyFile(const std::string& from,
                        const std::string& to) const override {
    std::error_code ec;
    fs::copy_file(from, to, fs::copy_options::overwrite_existing, ec);
    if (ec) return EcStatus(absl::StrCat("copy ", from, " to"), to, ec);
    return FsyncPath(to, /*directory=*/false);
  }

  absl::Status SyncDir(const std::string& dir) const override {
    return FsyncPath(dir, /*directory=*/true);
  }
};

}  // namespace

const FileIo& LocalFileIo() {
  static const PosixFileIo* const io = new PosixFileIo();
  return *io;
}

std::string ParentDir(absl::string_view path) {
  while (path.size() > 1 && path.back() == '/') path.remove_suffix(1);
  const size_t slash = path.rfind('/');
  if (slash == absl::string_view::npos) return ".";
  if (slash == 0) return "/";
  return std::string(path.substr(0, slash));
}

}  // namespace psdb
