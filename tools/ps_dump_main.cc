// ps-dump: inspect, export and verify psdb checkpoints. The logic lives in
// tools/dump/ (library psdb_dump); see tools/dump/dump_cli.h for the usage.
#include <iostream>

#include "tools/dump/dump_cli.h"

int main(int argc, char** argv) {
  return psdb::dump::RunDump(argc, argv, std::cout, std::cerr);
}
