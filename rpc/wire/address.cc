#include "rpc/wire/address.h"

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace psdb::rpc {

std::string JoinHostPort(absl::string_view host, int port) {
  return absl::StrContains(host, ':') && !absl::StartsWith(host, "[")
             ? absl::StrCat("[", host, "]:", port)
             : absl::StrCat(host, ":", port);
}

}  // namespace psdb::rpc
