#include "rpc/key_router.h"

#include <cstdlib>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "shard/ring.h"

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

// shard::Ring over members {id = rank, weight 1} with the default options
// (256 vnodes, kDefaultRingSeed): members are sorted by id, so a key's
// owner index is its owner's rank.
struct KeyRouter::Impl {
  Ring ring;
};

KeyRouter::KeyRouter(int num_servers, uint64_t epoch)
    : num_servers_(num_servers),
      epoch_(epoch),
      impl_(std::make_unique<Impl>()) {
  std::vector<RingMember> members(num_servers);
  for (int i = 0; i < num_servers; ++i) members[i].id = i;
  absl::StatusOr<Ring> ring = Ring::Create(RingOptions{}, members);
  // Ids 0..n-1 with weight 1 and default options are always valid.
  if (!ring.ok()) std::abort();
  impl_->ring = *std::move(ring);
}
KeyRouter::~KeyRouter() = default;

int KeyRouter::Owner(uint64_t key) const {
  return static_cast<int>(impl_->ring.OwnerIndex(key));
}

}  // namespace psdb::rpc
