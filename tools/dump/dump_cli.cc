#include "tools/dump/dump_cli.h"

#include <cstdint>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "checkpoint/reshard.h"
#include "checkpoint/verify.h"
#include "tools/common/args.h"
#include "tools/dump/dump.h"

namespace psdb::dump {
namespace {

constexpr char kUsage[] =
    R"(usage: ps-dump <command> [flags] CHECKPOINT

CHECKPOINT is a checkpoint directory (it holds MANIFEST.json) or a root
directory whose newest complete checkpoint is used.

commands:
  info     tables, specs, rows and bytes; rows per shard if several shards
  export   one table's rows in key order (shards merged)
             --table=NAME          table to export (required)
             --format=tsv|jsonl|npy  default tsv
             --with-state          add optimizer state and row header
             --keys=K1,K2,...      only these keys (each must exist)
             --limit=N             at most N rows
             --out=PATH            tsv/jsonl: file (default stdout);
                                   npy (required): writes PATH_keys.npy
                                   ('<u8', (n,)) and PATH_values.npy
                                   ('<f4', (n, dim)); with --with-state also
                                   PATH_state.npy, PATH_last_update_step.npy,
                                   PATH_update_count.npy, PATH_frequency.npy
  verify   every row decodes with its table's dim and state size, values are
           finite, every shard holds exactly the manifest's tables, row
           counts match the manifest and (cluster checkpoints) every key is
           on the shard the manifest's ring places it on; exit 1 on any
           problem
  reshard  rewrite the checkpoint (after verifying it) as a cluster
           checkpoint of M shards under the ring of M servers (ids 0..M-1,
           the source ring's vnodes and seed), rows and optimizer state
           unchanged; a cluster of M ps-servers restores it with
           --restore_from=DIR (rank r loads shard-r)
             --servers=M           shards of the new checkpoint (required)
             --out=DIR             the new checkpoint directory; must not
                                   exist or be empty (required)
             --batch_rows=N        rows per write batch (default 65536)
)";

int Usage(std::ostream& err, absl::string_view problem) {
  if (!problem.empty()) err << "ps-dump: " << problem << "\n\n";
  err << kUsage;
  return tools::kUsageExitCode;
}

int Fail(std::ostream& err, const absl::Status& status) {
  err << "ps-dump: " << status.message() << "\n";
  return 1;
}

}  // namespace

int RunDump(int argc, const char* const* argv, std::ostream& out,
            std::ostream& err) {
  if (argc < 2) return Usage(err, "no command given");
  const std::string command = argv[1];
  if (command == "help" || command == "--help" || command == "-h") {
    out << kUsage;
    return 0;
  }
  absl::StatusOr<tools::Args> args =
      tools::Args::Parse(argc, argv, 2, {"with-state", "help"});
  if (!args.ok()) return Usage(err, args.status().message());

  std::vector<std::string> known = {"help"};
  if (command == "export") {
    known.insert(known.end(),
                 {"table", "format", "with-state", "keys", "limit", "out"});
  } else if (command == "reshard") {
    known.insert(known.end(), {"servers", "out", "batch_rows"});
  } else if (command != "info" && command != "verify") {
    return Usage(err, "unknown command '" + command + "'");
  }
  if (absl::Status st = args->CheckKnown(known); !st.ok()) {
    return Usage(err, st.message());
  }
  if (args->Has("help")) {
    out << kUsage;
    return 0;
  }
  if (args->positional().size() != 1) {
    return Usage(err, args->positional().empty()
                          ? "no CHECKPOINT directory given"
                          : "exactly one CHECKPOINT directory expected");
  }
  const std::string& path = args->positional()[0];

  // Validate every flag before touching the checkpoint.
  ExportOptions export_options;
  if (command == "export") {
    if (!args->Has("table")) return Usage(err, "export needs --table=NAME");
    export_options.table = args->GetString("table", "");
    absl::StatusOr<ExportFormat> format =
        ParseExportFormat(args->GetString("format", "tsv"));
    if (!format.ok()) return Usage(err, format.status().message());
    export_options.format = *format;
    absl::StatusOr<bool> with_state = args->GetBool("with-state");
    if (!with_state.ok()) return Usage(err, with_state.status().message());
    export_options.with_state = *with_state;
    if (args->Has("keys")) {
      absl::StatusOr<std::vector<uint64_t>> keys = args->GetUint64List("keys");
      if (!keys.ok()) return Usage(err, keys.status().message());
      export_options.keys = *std::move(keys);
    }
    absl::StatusOr<int64_t> limit = args->GetInt("limit", 0, 1, INT64_MAX);
    if (!limit.ok()) return Usage(err, limit.status().message());
    export_options.limit = static_cast<uint64_t>(*limit);
    export_options.out = args->GetString("out", "");
    if (export_options.format == ExportFormat::kNpy &&
        export_options.out.empty()) {
      return Usage(err, "--format=npy needs --out=PATH");
    }
  }

  ckpt::ReshardOptions reshard_options;
  if (command == "reshard") {
    if (!args->Has("servers")) return Usage(err, "reshard needs --servers=M");
    if (!args->Has("out")) return Usage(err, "reshard needs --out=DIR");
    absl::StatusOr<int64_t> servers =
        args->GetInt("servers", 0, 1, std::numeric_limits<int32_t>::max());
    if (!servers.ok()) return Usage(err, servers.status().message());
    reshard_options.servers = static_cast<int>(*servers);
    reshard_options.out = args->GetString("out", "");
    absl::StatusOr<int64_t> batch_rows = args->GetInt(
        "batch_rows", static_cast<int64_t>(reshard_options.batch_rows), 1,
        INT64_MAX);
    if (!batch_rows.ok()) return Usage(err, batch_rows.status().message());
    reshard_options.batch_rows = static_cast<size_t>(*batch_rows);
  }

  absl::StatusOr<std::unique_ptr<CheckpointReader>> reader =
      CheckpointReader::Open(path);
  if (!reader.ok()) return Fail(err, reader.status());

  if (command == "info") {
    PrintInfo(**reader, out);
    return 0;
  }
  if (command == "verify") {
    absl::StatusOr<ckpt::VerifyReport> report = ckpt::Verify(**reader);
    if (!report.ok()) return Fail(err, report.status());
    ckpt::PrintVerifyReport(**reader, *report, out);
    return report->ok() ? 0 : 1;
  }
  if (command == "reshard") {
    absl::StatusOr<ckpt::ReshardResult> result =
        ckpt::Reshard(**reader, reshard_options);
    if (!result.ok()) return Fail(err, result.status());
    out << "ps-dump: resharded " << result->rows << " rows of "
        << (*reader)->shards().size() << " shards into "
        << result->shard_rows.size() << " shards at " << result->path
        << "; rows per shard:";
    for (uint64_t rows : result->shard_rows) out << " " << rows;
    out << "\n";
    return 0;
  }
  absl::StatusOr<ExportResult> result = Export(**reader, export_options, out);
  if (!result.ok()) return Fail(err, result.status());
  err << "ps-dump: exported " << result->rows << " rows of table '"
      << export_options.table << "'";
  for (size_t i = 0; i < result->files.size(); ++i) {
    err << (i == 0 ? " to " : ", ") << result->files[i];
  }
  err << "\n";
  return 0;
}

}  // namespace psdb::dump
