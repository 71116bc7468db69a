// Progress reporting for long loops: on a terminal, a one-line bar redrawn in
// place (`[=====>    ] 42%  61234 samples/s  ETA 0:31`); otherwise plain
// lines, at most one per `plain_every` updates, so logs stay readable.
//
// Thread-safety: thread-compatible.
#ifndef PSDB_TRAIN_PROGRESS_H_
#define PSDB_TRAIN_PROGRESS_H_

#include <cstdint>
#include <cstdio>
#include <string>

#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace psdb::train {

class Progress {
 public:
  // `total` work units (samples); 0 = unknown (no percentage or ETA).
  // `tty`: draw a bar on `out`, else print plain lines every plain_every
  // calls to Update.
  Progress(FILE* out, bool tty, uint64_t total, int plain_every);

  // `done` units so far; `note` is appended (e.g. the current loss).
  void Update(uint64_t done, const std::string& note);
  // Erases the bar (TTY) before other output is printed.
  void Clear();
  // Final state; ends the bar's line.
  void Finish(uint64_t done);

  // "1:02:03" / "2:03" formatting of a duration in seconds.
  static std::string FormatEta(double seconds);
  // The bar text for a fraction in [0, 1] and a width.
  static std::string Bar(double fraction, int width);

 private:
  std::string Line(uint64_t done, const std::string& note) const;

  FILE* const out_;
  const bool tty_;
  const uint64_t total_;
  const int plain_every_;
  const absl::Time start_;
  int64_t updates_ = 0;
  bool drawn_ = false;
};

// isatty() of the stream's descriptor.
bool IsTerminal(FILE* stream);

}  // namespace psdb::train

#endif  // PSDB_TRAIN_PROGRESS_H_
