// ps-train: synthetic Criteo data generator and Wide&Deep trainer. The logic
// lives in tools/train/ (library psdb_train_cli) over train/ (psdb_train);
// see tools/train/train_cli.h for the usage.
#include <iostream>

#include "tools/train/train_cli.h"

int main(int argc, char** argv) {
  return psdb::train::RunTrain(argc, argv, std::cout, std::cerr);
}
