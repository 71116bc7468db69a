// ps-bench: psdb's benchmarks, one scenario per run (`ps-bench help` lists
// them). The scenarios live in tools/bench/ (library psdb_bench).
#include <iostream>

#include "tools/bench/scenario.h"

int main(int argc, char** argv) {
  return psdb::bench::RunBench(argc, argv, std::cout, std::cerr);
}
