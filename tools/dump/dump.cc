#include "tools/dump/dump.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <memory>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "optim/optimizer.h"
#include "psdb/row.h"
#include "store/row_codec.h"
#include "tools/common/text.h"
#include "tools/dump/npy.h"
#include "util/status_macros.h"

namespace psdb::dump {
namespace {

std::string InitializerText(const InitializerSpec& init) {
  switch (init.kind) {
    case InitKind::kZeros:
      return "zeros";
    case InitKind::kConstant:
      return absl::StrCat("constant(", init.a, ")");
    case InitKind::kUniform:
      return absl::StrCat("uniform(", init.a, ",", init.b, ")");
    case InitKind::kNormal:
      return absl::StrCat("normal(", init.a, ",", init.b, ")");
    case InitKind::kTruncatedNormal:
      return absl::StrCat("truncated_normal(", init.a, ",", init.b, ")");
  }
  return "?";
}

std::string OptimizerText(const optim::OptimizerSpec& o) {
  return absl::StrCat(optim::KindName(o.kind), "(lr=", o.learning_rate, ")");
}

// Prints rows of cells as left-aligned columns separated by two spaces.
void PrintColumns(const std::vector<std::vector<std::string>>& rows,
                  std::ostream& out) {
  std::vector<size_t> width;
  for (const auto& row : rows) {
    if (width.size() < row.size()) width.resize(row.size(), 0);
    for (size_t i = 0; i < row.size(); ++i) {
      width[i] = std::max(width[i], row[i].size());
    }
  }
  for (const auto& row : rows) {
    std::string line;
    for (size_t i = 0; i < row.size(); ++i) {
      line += row[i];
      if (i + 1 < row.size()) line.append(width[i] - row[i].size() + 2, ' ');
    }
    out << line << "\n";
  }
}

// Receives exported rows.
class RowSink {
 public:
  virtual ~RowSink() = default;
  virtual absl::Status Add(const DecodedRow& row) = 0;
  virtual absl::Status Finish() = 0;
  virtual std::vector<std::string> files() const { return {}; }
};

// TSV and JSON lines, to a stream (a file or the caller's).
class TextSink : public RowSink {
 public:
  TextSink(std::ostream* out, std::unique_ptr<std::ofstream> file,
           std::string path, bool json, bool with_state, const TableInfo& t)
      : out_(out),
        file_(std::move(file)),
        path_(std::move(path)),
        json_(json),
        with_state_(with_state) {
    if (json_) return;
    std::string header = "key";
    for (int i = 0; i < t.spec.dim; ++i) absl::StrAppend(&header, "\tv", i);
    if (with_state_) {
      for (int i = 0; i < t.state_size; ++i) absl::StrAppend(&header, "\ts", i);
      header += "\tlast_update_step\tupdate_count\tfrequency";
    }
    *out_ << header << "\n";
  }

  absl::Status Add(const DecodedRow& row) override {
    line_.clear();
    if (json_) {
      line_ += "{\"key\":";
      tools::AppendUint(row.key, &line_);
      line_ += ",\"values\":";
      AppendJsonArray(row.values);
      if (with_state_) {
        line_ += ",\"state\":";
        AppendJsonArray(row.state);
        line_ += ",\"last_update_step\":";
        tools::AppendInt(row.header.last_update_step, &line_);
        line_ += ",\"update_count\":";
        tools::AppendUint(row.header.update_count, &line_);
        line_ += ",\"frequency\":";
        tools::AppendUint(row.header.frequency, &line_);
      }
      line_ += "}\n";
    } else {
      tools::AppendUint(row.key, &line_);
      for (float v : row.values) {
        line_.push_back('\t');
        tools::AppendFloat(v, false, &line_);
      }
      if (with_state_) {
        for (float v : row.state) {
          line_.push_back('\t');
          tools::AppendFloat(v, false, &line_);
        }
        line_.push_back('\t');
        tools::AppendInt(row.header.last_update_step, &line_);
        line_.push_back('\t');
        tools::AppendUint(row.header.update_count, &line_);
        line_.push_back('\t');
        tools::AppendUint(row.header.frequency, &line_);
      }
      line_.push_back('\n');
    }
    out_->write(line_.data(), static_cast<std::streamsize>(line_.size()));
    return absl::OkStatus();
  }

  absl::Status Finish() override {
    out_->flush();
    if (file_ != nullptr) file_->close();
    if (!*out_ || (file_ != nullptr && file_->fail())) {
      return absl::InternalError(absl::StrCat(
          "cannot write ", path_.empty() ? "the output stream" : path_));
    }
    return absl::OkStatus();
  }

  std::vector<std::string> files() const override {
    if (path_.empty()) return {};
    return {path_};
  }

 private:
  void AppendJsonArray(const std::vector<float>& v) {
    line_.push_back('[');
    for (size_t i = 0; i < v.size(); ++i) {
      if (i > 0) line_.push_back(',');
      tools::AppendFloat(v[i], true, &line_);
    }
    line_.push_back(']');
  }

  std::ostream* out_;
  std::unique_ptr<std::ofstream> file_;
  std::string path_;
  bool json_;
  bool with_state_;
  std::string line_;
};

class NpySink : public RowSink {
 public:
  static absl::StatusOr<std::unique_ptr<NpySink>> Create(std::string prefix,
                                                         bool with_state,
                                                         const TableInfo& t) {
    if (absl::EndsWith(prefix, ".npy")) prefix.resize(prefix.size() - 4);
    auto sink = std::unique_ptr<NpySink>(new NpySink());
    sink->with_state_ = with_state;
    auto make =
        [&](absl::string_view suffix, absl::string_view descr, size_t elem,
            uint64_t cols) -> absl::StatusOr<std::unique_ptr<NpyWriter>> {
      return NpyWriter::Create(absl::StrCat(prefix, "_", suffix, ".npy"), descr,
                               elem, cols);
    };
    PSDB_ASSIGN_OR_RETURN(sink->keys_, make("keys", "<u8", 8, 0));
    PSDB_ASSIGN_OR_RETURN(sink->values_, make("values", "<f4", 4, t.spec.dim));
    if (with_state) {
      PSDB_ASSIGN_OR_RETURN(sink->state_,
                            make("state", "<f4", 4, t.state_size));
      PSDB_ASSIGN_OR_RETURN(sink->last_update_step_,
                            make("last_update_step", "<i8", 8, 0));
      PSDB_ASSIGN_OR_RETURN(sink->update_count_,
                            make("update_count", "<u8", 8, 0));
      PSDB_ASSIGN_OR_RETURN(sink->frequency_, make("frequency", "<u8", 8, 0));
    }
    return sink;
  }

  absl::Status Add(const DecodedRow& row) override {
    PSDB_RETURN_IF_ERROR(keys_->AppendRow(&row.key));
    PSDB_RETURN_IF_ERROR(values_->AppendRow(row.values.data()));
    if (with_state_) {
      PSDB_RETURN_IF_ERROR(state_->AppendRow(row.state.data()));
      PSDB_RETURN_IF_ERROR(
          last_update_step_->AppendRow(&row.header.last_update_step));
      PSDB_RETURN_IF_ERROR(update_count_->AppendRow(&row.header.update_count));
      PSDB_RETURN_IF_ERROR(frequency_->AppendRow(&row.header.frequency));
    }
    return absl::OkStatus();
  }

  absl::Status Finish() override {
    for (NpyWriter* w : writers()) PSDB_RETURN_IF_ERROR(w->Finish());
    return absl::OkStatus();
  }

  std::vector<std::string> files() const override {
    std::vector<std::string> out;
    for (NpyWriter* w : writers()) out.push_back(w->path());
    return out;
  }

 private:
  NpySink() = default;
  std::vector<NpyWriter*> writers() const {
    std::vector<NpyWriter*> out;
    for (const auto* w : {&keys_, &values_, &state_, &last_update_step_,
                          &update_count_, &frequency_}) {
      if (*w != nullptr) out.push_back(w->get());
    }
    return out;
  }

  bool with_state_ = false;
  std::unique_ptr<NpyWriter> keys_, values_, state_, last_update_step_,
      update_count_, frequency_;
};

absl::StatusOr<std::unique_ptr<RowSink>> MakeSink(const ExportOptions& options,
                                                  const TableInfo& table,
                                                  std::ostream& stream) {
  if (options.format == ExportFormat::kNpy) {
    if (options.out.empty()) {
      return absl::InvalidArgumentError(
          "--format=npy needs --out=PATH (writes PATH_keys.npy and "
          "PATH_values.npy)");
    }
    PSDB_ASSIGN_OR_RETURN(
        auto sink, NpySink::Create(options.out, options.with_state, table));
    return std::unique_ptr<RowSink>(std::move(sink));
  }
  const bool json = options.format == ExportFormat::kJsonl;
  if (options.out.empty()) {
    return std::unique_ptr<RowSink>(
        new TextSink(&stream, nullptr, "", json, options.with_state, table));
  }
  auto file = std::make_unique<std::ofstream>(
      options.out, std::ios::binary | std::ios::trunc);
  if (!file->is_open()) {
    return absl::InternalError(absl::StrCat("cannot create ", options.out));
  }
  std::ostream* out = file.get();
  return std::unique_ptr<RowSink>(new TextSink(
      out, std::move(file), options.out, json, options.with_state, table));
}

}  // namespace

void PrintInfo(const CheckpointReader& reader, std::ostream& out) {
  const v1::Manifest& m = reader.manifest();
  std::vector<std::string> shard_names;
  for (const ShardInfo& s : reader.shards()) {
    shard_names.push_back(
        s.server.empty() ? absl::StrCat("shard-", s.shard_id)
                         : absl::StrCat("shard-", s.shard_id, "@", s.server));
  }
  PrintColumns({{"checkpoint", reader.dir()},
                {"format", absl::StrCat(m.format_version())},
                {"step", absl::StrCat(m.step())},
                {"created",
                 absl::FormatTime("%Y-%m-%d %H:%M:%S UTC",
                                  absl::FromUnixMicros(m.created_unix_micros()),
                                  absl::UTCTimeZone())},
                {"shards", absl::StrCat(reader.shards().size(), " (",
                                        absl::StrJoin(shard_names, ", "), ")")},
                {"tables", absl::StrCat(reader.tables().size())}},
               out);
  if (reader.tables().empty()) return;
  out << "\n";
  std::vector<std::vector<std::string>> rows = {{"table", "dim", "optimizer",
                                                 "state", "initializer", "seed",
                                                 "step", "rows", "bytes"}};
  for (const TableInfo& t : reader.tables()) {
    uint64_t bytes = 0;
    for (size_t s = 0; s < reader.shards().size(); ++s) {
      bytes += reader.SstBytes(s, t.spec.name);
    }
    rows.push_back({t.spec.name, absl::StrCat(t.spec.dim),
                    OptimizerText(t.spec.optimizer), absl::StrCat(t.state_size),
                    InitializerText(t.spec.initializer),
                    absl::StrCat(t.spec.seed), absl::StrCat(t.step),
                    absl::StrCat(t.rows), absl::StrCat(bytes)});
  }
  PrintColumns(rows, out);
  out << "(bytes: size of the table's RocksDB SST files)\n";

  if (reader.shards().size() < 2) return;
  out << "\nrows per shard\n";
  std::vector<std::vector<std::string>> balance;
  std::vector<std::string> head = {"table"};
  for (const std::string& n : shard_names) head.push_back(n);
  head.push_back("max/mean");
  balance.push_back(head);
  for (const TableInfo& t : reader.tables()) {
    std::vector<std::string> row = {t.spec.name};
    uint64_t max_rows = 0;
    for (uint64_t r : t.shard_rows) {
      row.push_back(absl::StrCat(r));
      max_rows = std::max(max_rows, r);
    }
    const double mean = static_cast<double>(t.rows) / t.shard_rows.size();
    row.push_back(mean > 0 ? absl::StrFormat("%.3f", max_rows / mean) : "-");
    balance.push_back(row);
  }
  PrintColumns(balance, out);
}

absl::StatusOr<ExportFormat> ParseExportFormat(absl::string_view name) {
  if (name == "tsv") return ExportFormat::kTsv;
  if (name == "jsonl") return ExportFormat::kJsonl;
  if (name == "npy") return ExportFormat::kNpy;
  return absl::InvalidArgumentError(
      absl::StrCat("unknown format '", name, "' (tsv, jsonl or npy)"));
}

absl::StatusOr<ExportResult> Export(const CheckpointReader& reader,
                                    const ExportOptions& options,
                                    std::ostream& stream) {
  if (options.table.empty()) {
    return absl::InvalidArgumentError("no table given (--table=NAME)");
  }
  PSDB_ASSIGN_OR_RETURN(const TableInfo* table,
                        reader.FindTable(options.table));
  const uint64_t limit = options.limit == 0 ? ~uint64_t{0} : options.limit;

  // Selected keys: find every one before writing anything.
  std::vector<DecodedRow> selected;
  if (options.keys.has_value()) {
    std::vector<uint64_t> keys = *options.keys;
    std::sort(keys.begin(), keys.end());
    keys.erase(std::unique(keys.begin(), keys.end()), keys.end());
    if (keys.size() > limit) keys.resize(limit);
    for (uint64_t key : keys) {
      std::string value;
      absl::Status found = absl::NotFoundError("");
      size_t shard = 0;
      for (; shard < reader.shards().size(); ++shard) {
        found = reader.Get(shard, table->spec.name, key, &value);
        if (!absl::IsNotFound(found)) break;
      }
      if (absl::IsNotFound(found)) {
        return absl::NotFoundError(absl::StrCat(
            reader.dir(), ": table '", table->spec.name, "' has no key ", key));
      }
      PSDB_RETURN_IF_ERROR(found);
      DecodedRow row;
      PSDB_RETURN_IF_ERROR(
          reader.Decode(shard, *table, EncodeKey(key), value, &row));
      selected.push_back(std::move(row));
    }
  }

  PSDB_ASSIGN_OR_RETURN(std::unique_ptr<RowSink> sink,
                        MakeSink(options, *table, stream));
  ExportResult result;
  if (options.keys.has_value()) {
    for (const DecodedRow& row : selected) PSDB_RETURN_IF_ERROR(sink->Add(row));
    result.rows = selected.size();
  } else {
    PSDB_ASSIGN_OR_RETURN(auto cursor, TableCursor::Open(reader, *table));
    DecodedRow row;
    for (; cursor->Valid() && result.rows < limit; cursor->Next()) {
      PSDB_RETURN_IF_ERROR(reader.Decode(cursor->shard(), *table, cursor->key(),
                                         cursor->value(), &row));
      PSDB_RETURN_IF_ERROR(sink->Add(row));
      ++result.rows;
    }
    if (!cursor->status().ok()) {
      return Annotate(cursor->status(), absl::StrCat(reader.dir(), ": table '",
                                                     table->spec.name, "'"));
    }
  }
  PSDB_RETURN_IF_ERROR(sink->Finish());
  result.files = sink->files();
  return result;
}

}  // namespace psdb::dump
