// ps-scheduler: forms a psdb cluster and runs its admin commands. The logic
// lives in tools/scheduler/ (library psdb_scheduler_cli) over rpc/control/;
// see tools/scheduler/scheduler_cli.h for the usage.
#include <iostream>

#include "tools/scheduler/scheduler_cli.h"

int main(int argc, char** argv) {
  return psdb::tools::RunScheduler(argc, argv, std::cout, std::cerr);
}
