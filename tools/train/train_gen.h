// `ps-train gen`: writes a synthetic Criteo-format data set
// (train/synthetic.h) from its flags (tools/train/train_cli.h has the
// usage). Internal to psdb_train_cli.
//
// Thread-safety: RunGen is a blocking call.
#ifndef PSDB_TOOLS_TRAIN_TRAIN_GEN_H_
#define PSDB_TOOLS_TRAIN_TRAIN_GEN_H_

#include <ostream>

#include "tools/common/args.h"

namespace psdb::train::cli {

// Checks gen's flags (a usage error, 2, names the first bad one), writes
// the data set and its meta.json and prints what it wrote to `out`;
// returns the exit code (0, 1 on failure, 2).
int RunGen(const tools::Args& args, std::ostream& out, std::ostream& err);

}  // namespace psdb::train::cli

#endif  // PSDB_TOOLS_TRAIN_TRAIN_GEN_H_
