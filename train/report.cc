#include "train/report.h"

#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "util/file_io.h"

namespace psdb::train {
namespace {

std::string Cell(const std::optional<double>& v) {
  return v.has_value() && std::isfinite(*v) ? absl::StrFormat("%.6f", *v) : "";
}

std::string Number(double v) {
  return std::isfinite(v) ? absl::StrFormat("%.6g", v) : "null";
}

}  // namespace

absl::Status WriteMetricsCsv(absl::string_view path,
                             const std::vector<MetricsRow>& rows) {
  std::string out =
      "step,epoch,samples,train_loss,train_auc,eval_auc,eval_logloss,"
      "wide_loss,deep_loss,valid_auc,valid_logloss\n";
  for (const MetricsRow& r : rows) {
    absl::StrAppend(&out, r.step, ",", r.epoch, ",", r.samples, ",",
                    Cell(r.train_loss), ",", Cell(r.train_auc), ",",
                    Cell(r.eval_auc), ",", Cell(r.eval_logloss), ",",
                    Cell(r.wide_loss), ",", Cell(r.deep_loss), ",",
                    Cell(r.valid_auc), ",", Cell(r.valid_logloss), "\n");
  }
  return LocalFileIo().WriteFileAtomically(std::string(path), out);
}

std::optional<std::string> FindOnPath(absl::string_view program) {
  const char* path = std::getenv("PATH");
  if (path == nullptr) return std::nullopt;
  for (absl::string_view dir : absl::StrSplit(path, ':')) {
    if (dir.empty()) continue;
    const std::string candidate = absl::StrCat(dir, "/", program);
    std::error_code ec;
    if (std::filesystem::is_regular_file(candidate, ec) &&
        access(candidate.c_str(), X_OK) == 0) {
      return candidate;
    }
  }
  return std::nullopt;
}

std::string MetricsPlotScript(absl::string_view csv, absl::string_view png,
                              std::optional<double> bayes_auc) {
  std::string script = absl::StrCat(
      "set terminal pngcairo size 1000,700 noenhanced\n"
      "set output '",
      png, "'\n",
      "set datafile separator ','\n"
      "set key autotitle columnhead\n"
      "set multiplot layout 2,1 title 'ps-train: Wide&Deep'\n"
      "set xlabel 'step'\n"
      "set ylabel 'loss'\n"
      "set grid\n"
      "plot '",
      csv,
      "' using 'step':'train_loss' with lines lw 2 "
      "title 'train loss (window)', "
      "'' using 'step':'wide_loss' with lines lw 2 dt 3 "
      "title 'wide part alone (window)', "
      "'' using 'step':'deep_loss' with lines lw 2 dt 4 "
      "title 'deep part alone (window)', "
      "'' using 'step':'valid_logloss' with linespoints pt 6 "
      "title 'validation log-loss', "
      "'' using 'step':'eval_logloss' with linespoints pt 7 "
      "title 'test log-loss'\n"
      "set ylabel 'AUC'\n"
      "plot '",
      csv,
      "' using 'step':'train_auc' with lines lw 2 title 'train AUC (window)', "
      "'' using 'step':'valid_auc' with linespoints pt 6 "
      "title 'validation AUC', "
      "'' using 'step':'eval_auc' with linespoints pt 7 title 'test AUC'");
  if (bayes_auc.has_value()) {
    absl::StrAppend(&script, ", ", Number(*bayes_auc),
                    " with lines dt 2 title 'Bayes-optimal AUC'");
  }
  absl::StrAppend(&script, "\nunset multiplot\n");
  return script;
}

absl::Status PlotMetrics(absl::string_view csv, absl::string_view png,
                         std::optional<double> bayes_auc) {
  const std::optional<std::string> gnuplot = FindOnPath("gnuplot");
  if (!gnuplot.has_value()) {
    return absl::UnavailableError(
        "gnuplot is not installed (apt-get install gnuplot-nox); "
        "skipping the PNG plot");
  }
  const std::string script = MetricsPlotScript(csv, png, bayes_auc);
  const std::string script_path = absl::StrCat(png, ".gp");
  absl::Status s = LocalFileIo().WriteFileAtomically(script_path, script);
  if (!s.ok()) return s;
  // pngcairo may be missing from a build of gnuplot; fall back to png.
  std::string cmd =
      absl::StrCat("'", *gnuplot, "' '", script_path, "' >/dev/null 2>&1");
  int rc = std::system(cmd.c_str());
  if (rc != 0) {
    std::string fallback = script;
    const std::string from = "set terminal pngcairo size 1000,700 noenhanced";
    fallback.replace(fallback.find(from), from.size(),
                     "set terminal png size 1000,700");
    s = LocalFileIo().WriteFileAtomically(script_path, fallback);
    if (!s.ok()) return s;
    rc = std::system(cmd.c_str());
  }
  std::error_code ec;
  std::filesystem::remove(script_path, ec);
  if (rc != 0) {
    return absl::InternalError(
        absl::StrCat("gnuplot failed (exit status ", rc, ") rendering ", png));
  }
  return absl::OkStatus();
}

std::string JsonEscape(absl::string_view s) {
  std::string out = "\"";
  for (char c : s) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\t':
        out += "\\t";
        break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          out += absl::StrFormat("\\u%04x", c);
        } else {
          out += c;
        }
    }
  }
  return out + "\"";
}

JsonObject& JsonObject::Add(absl::string_view key, double value) {
  fields_.emplace_back(std::string(key), Number(value));
  return *this;
}
JsonObject& JsonObject::Add(absl::string_view key, int64_t value) {
  fields_.emplace_back(std::string(key), absl::StrCat(value));
  return *this;
}
JsonObject& JsonObject::Add(absl::string_view key, uint64_t value) {
  fields_.emplace_back(std::string(key), absl::StrCat(value));
  return *this;
}
JsonObject& JsonObject::Add(absl::string_view key,
                            std::optional<double> value) {
  fields_.emplace_back(std::string(key),
                       value.has_value() ? Number(*value) : "null");
  return *this;
}
JsonObject& JsonObject::Add(absl::string_view key, absl::string_view value) {
  fields_.emplace_back(std::string(key), JsonEscape(value));
  return *this;
}
JsonObject& JsonObject::AddRaw(absl::string_view key, absl::string_view json) {
  fields_.emplace_back(std::string(key), std::string(json));
  return *this;
}

std::string JsonObject::ToString() const {
  std::string out = "{\n";
  for (size_t i = 0; i < fields_.size(); ++i) {
    absl::StrAppend(&out, "  ", JsonEscape(fields_[i].first), ": ",
                    fields_[i].second, i + 1 < fields_.size() ? ",\n" : "\n");
  }
  return out + "}\n";
}

}  // namespace psdb::train
