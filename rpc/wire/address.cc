#include "rpc/wire/address.h"

#include <grpc/grpc.h>

#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace psdb::rpc {

std::string JoinHostPort(absl::string_view host, int port) {
  return absl::StrContains(host, ':') && !absl::StartsWith(host, "[")
             ? absl::StrCat("[", host, "]:", port)
             : absl::StrCat(host, ":", port);
}

void ListenExclusively(absl::string_view host, int port,
                       std::shared_ptr<grpc::ServerCredentials> credentials,
                       grpc::ServerBuilder* builder, int* selected_port) {
  builder->AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  builder->AddListeningPort(JoinHostPort(host, port), std::move(credentials),
                            selected_port);
}

}  // namespace psdb::rpc
