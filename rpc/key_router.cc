#include "rpc/key_router.h"

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "util/hash.h"

namespace psdb::rpc {

absl::StatusOr<std::vector<std::string>> ParseServerList(
    absl::string_view list) {
  std::vector<std::string> out;
  for (absl::string_view entry : absl::StrSplit(list, ',')) {
    const size_t colon = entry.rfind(':');
    int port = 0;
    if (entry.empty() || colon == absl::string_view::npos || colon == 0 ||
        !absl::SimpleAtoi(entry.substr(colon + 1), &port) || port <= 0 ||
        port > 65535) {
      return absl::InvalidArgumentError(absl::StrCat(
          "server list '", list, "': entry '", entry, "' is not host:port"));
    }
    out.emplace_back(entry);
  }
  return out;
}

// Jump consistent hash (Lamping & Veach 2014) over XXH3 of the key: a
// placeholder until shard::Ring is wired in; both sides use the same code.
struct KeyRouter::Impl {};

KeyRouter::KeyRouter(int num_servers, uint64_t epoch)
    : num_servers_(num_servers), epoch_(epoch) {}
KeyRouter::~KeyRouter() = default;

int KeyRouter::Owner(uint64_t key) const {
  uint64_t k = HashKey(key, 0x7073646272696e67ULL);
  int64_t b = -1, j = 0;
  while (j < num_servers_) {
    b = j;
    k = k * 2862933555777941757ULL + 1;
    j = static_cast<int64_t>((b + 1) *
                             (double(1LL << 31) / double((k >> 33) + 1)));
  }
  return static_cast<int>(b);
}

}  // namespace psdb::rpc
