#include "train/progress.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace psdb::train {

bool IsTerminal(FILE* stream) { return isatty(fileno(stream)) != 0; }

Progress::Progress(FILE* out, bool tty, uint64_t total, int plain_every)
    : out_(out),
      tty_(tty),
      total_(total),
      plain_every_(std::max(1, plain_every)),
      start_(absl::Now()) {}

std::string Progress::FormatEta(double seconds) {
  if (!std::isfinite(seconds) || seconds < 0) return "?";
  const int64_t s = static_cast<int64_t>(std::llround(seconds));
  if (s >= 3600) {
    return absl::StrFormat("%d:%02d:%02d", s / 3600, (s / 60) % 60, s % 60);
  }
  return absl::StrFormat("%d:%02d", s / 60, s % 60);
}

std::string Progress::Bar(double fraction, int width) {
  fraction = std::clamp(fraction, 0.0, 1.0);
  const int filled = static_cast<int>(fraction * width);
  std::string bar = "[";
  for (int i = 0; i < width; ++i) {
    bar += i < filled ? '=' : (i == filled ? '>' : ' ');
  }
  return bar + "]";
}

std::string Progress::Line(uint64_t done, const std::string& note) const {
  const double secs = absl::ToDoubleSeconds(absl::Now() - start_);
  const double rate = secs > 0 ? done / secs : 0;
  std::string line;
  if (total_ > 0) {
    const double fraction = std::min(1.0, static_cast<double>(done) / total_);
    const double eta =
        rate > 0 ? (static_cast<double>(total_) - done) / rate : -1;
    line =
        absl::StrFormat("%s %3.0f%%  %.0f samples/s  ETA %s",
                        tty_ ? Bar(fraction, 30) : "progress:", 100 * fraction,
                        rate, FormatEta(eta));
  } else {
    line = absl::StrFormat("progress: %d samples  %.0f samples/s", done, rate);
  }
  if (!note.empty()) absl::StrAppend(&line, "  ", note);
  return line;
}

void Progress::Update(uint64_t done, const std::string& note) {
  ++updates_;
  if (tty_) {
    std::fprintf(out_, "\r%s\033[K", Line(done, note).c_str());
    drawn_ = true;
  } else if (updates_ % plain_every_ == 0) {
    std::fprintf(out_, "%s\n", Line(done, note).c_str());
  }
  std::fflush(out_);
}

void Progress::Clear() {
  if (tty_ && drawn_) {
    std::fprintf(out_, "\r\033[K");
    std::fflush(out_);
    drawn_ = false;
  }
}

void Progress::Finish(uint64_t done) {
  if (tty_) {
    std::fprintf(out_, "\r%s\033[K\n", Line(done, "").c_str());
    drawn_ = false;
  }
  std::fflush(out_);
}

}  // namespace psdb::train
