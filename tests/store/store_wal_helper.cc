// Helper process for store_wal_test: runs the operations of wal_workload.h
// on a Durability::kWal store, printing "READY" once its tables exist and
// appending "ACK <i>" to <ack_file> (one write() each, so a SIGKILL keeps
// every line written) after op i returned OK, forever, until the test kills
// it.
//
//   store_wal_helper <store_dir> <budget_bytes> <ack_file>
#include <fcntl.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "absl/strings/str_cat.h"
#include "psdb/store.h"
#include "tests/store/wal_workload.h"

int main(int argc, char** argv) {
  if (argc < 4) {
    std::fprintf(stderr, "usage: %s store_dir budget_bytes ack_file\n",
                 argv[0]);
    return 2;
  }
  const int ack = open(argv[3], O_WRONLY | O_CREAT | O_APPEND, 0644);
  if (ack < 0) {
    std::perror(argv[3]);
    return 1;
  }
  psdb::StoreOptions options =
      psdb::testing::SmallOptions(std::strtoull(argv[2], nullptr, 10));
  options.durability = psdb::Durability::kWal;
  auto store = psdb::Store::Open(options, argv[1]);
  if (!store.ok()) {
    std::fprintf(stderr, "helper: %s\n", store.status().ToString().c_str());
    return 1;
  }
  if (absl::Status s = psdb::testing::WalSetup(**store); !s.ok()) {
    std::fprintf(stderr, "helper: %s\n", s.ToString().c_str());
    return 1;
  }
  std::printf("READY\n");
  std::fflush(stdout);
  for (int i = 0;; ++i) {
    if (absl::Status s = psdb::testing::WalOp(**store, i); !s.ok()) {
      std::fprintf(stderr, "helper: op %d: %s\n", i, s.ToString().c_str());
      return 1;
    }
    const std::string line = absl::StrCat("ACK ", i, "\n");
    (void)!write(ack, line.data(), line.size());
  }
}
