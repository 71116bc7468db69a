// ps-train's usage text and the two ways its commands end on an error
// (the files of ps-train's command line share them: tools/train/train_cli.h
// is the entry point). Internal to psdb_train_cli.
//
// Thread-safety: constants and stateless functions.
#ifndef PSDB_TOOLS_TRAIN_TRAIN_USAGE_H_
#define PSDB_TOOLS_TRAIN_TRAIN_USAGE_H_

#include <ostream>

#include "absl/status/status.h"

namespace psdb::train::cli {

// What `ps-train --help` prints, and what follows a usage error.
extern const char kUsage[];

// A usage error: "ps-train: <message>" and kUsage on `err`; returns
// tools::kUsageExitCode (2).
int Usage(std::ostream& err, const absl::Status& status);

// A failure: "ps-train: <status>" on `err`; returns 1.
int Fail(std::ostream& err, const absl::Status& status);

}  // namespace psdb::train::cli

#endif  // PSDB_TOOLS_TRAIN_TRAIN_USAGE_H_
