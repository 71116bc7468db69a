// ps-server: hosts one Store shard behind gRPC, a read-only serving
// replica, or the cluster checkpoint admin call. The logic lives in
// tools/server/ (library psdb_server_cli) over rpc/server/ and rpc/control/;
// see tools/server/server_cli.h for the usage.
#include <iostream>

#include "tools/server/server_cli.h"

int main(int argc, char** argv) {
  return psdb::tools::RunServer(argc, argv, std::cout, std::cerr);
}
