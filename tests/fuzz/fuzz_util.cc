#include "tests/fuzz/fuzz_util.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <system_error>

#include "absl/strings/str_cat.h"

namespace psdb::fuzz {

namespace {

std::string* scratch = nullptr;

void RemoveScratch() {
  if (scratch == nullptr) return;
  std::error_code ec;
  std::filesystem::remove_all(*scratch, ec);
}

}  // namespace

const std::string& FuzzScratchDir() {
  if (scratch == nullptr) {
    const char* base = std::getenv("TMPDIR");
    std::string tmpl =
        absl::StrCat(base != nullptr ? base : "/tmp", "/psdb-fuzz-XXXXXX");
    if (mkdtemp(tmpl.data()) == nullptr) {
      std::fprintf(stderr, "psdb fuzz: mkdtemp %s failed\n", tmpl.c_str());
      std::abort();
    }
    scratch = new std::string(tmpl);
    std::atexit(RemoveScratch);
  }
  return *scratch;
}

void InvariantFailed(absl::string_view what) {
  std::fprintf(stderr, "psdb fuzz: invariant broken: %.*s\n",
               static_cast<int>(what.size()), what.data());
  std::abort();
}

std::vector<FramedRequest> SplitRequests(const uint8_t* data, size_t size,
                                         size_t max_requests) {
  std::vector<FramedRequest> out;
  size_t pos = 0;
  while (pos < size && out.size() < max_requests) {
    FramedRequest r;
    r.handler = data[pos++];
    size_t len = 0;
    if (pos < size) len |= data[pos++];
    if (pos < size) len |= static_cast<size_t>(data[pos++]) << 8;
    len = std::min(len, size - pos);
    r.bytes = absl::string_view(reinterpret_cast<const char*>(data + pos), len);
    pos += len;
    out.push_back(r);
  }
  return out;
}

void AppendRequest(uint8_t handler, absl::string_view bytes, std::string* out) {
  out->push_back(static_cast<char>(handler));
  const size_t len = std::min<size_t>(bytes.size(), 0xffff);
  out->push_back(static_cast<char>(len & 0xff));
  out->push_back(static_cast<char>(len >> 8));
  out->append(bytes.data(), len);
}

}  // namespace psdb::fuzz
