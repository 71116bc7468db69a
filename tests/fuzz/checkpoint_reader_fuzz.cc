// libFuzzer target: ps-dump's checkpoint reader (psdb/checkpoint_reader.h,
// checkpoint/verify.h, tools/dump/dump.h) on a mutated small
// checkpoint (tests/fuzz/small_checkpoint.h, written once per process).
//
// Input: up to 8 mutations of 7 bytes each: file (index into the
// checkpoint's files, sorted by path), operation (0: set a byte, 1: flip
// bits of a byte, 2: truncate the file there, 3: delete the file), a
// 4-byte little-endian offset (modulo the file's size) and the byte value.
// Each run rewrites the whole checkpoint from memory, then mutates it.
//
// Invariants: open, verify and export never crash (errors are Statuses);
// when verify passes, every row of every table decodes and re-encodes to
// the bytes stored, each table yields exactly the manifest's row count,
// and ps-dump's export writes one line per row plus its header.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "checkpoint/verify.h"
#include "psdb/checkpoint_reader.h"
#include "store/row_codec.h"
#include "tests/fuzz/fuzz_util.h"
#include "tests/fuzz/small_checkpoint.h"
#include "tools/dump/dump.h"

namespace {

namespace fs = std::filesystem;

struct Base {
  std::vector<std::pair<std::string, std::string>> files;
  std::string work;  // where each run writes its copy
};

const Base& TheBase() {
  static const Base* base = [] {
    auto* b = new Base;
    const std::string& scratch = psdb::fuzz::FuzzScratchDir();
    absl::StatusOr<std::string> ckpt =
        psdb::fuzz::WriteSmallCheckpoint(absl::StrCat(scratch, "/base"));
    if (!ckpt.ok()) {
      std::fprintf(stderr, "small checkpoint: %s\n",
                   ckpt.status().ToString().c_str());
      std::abort();
    }
    auto files = psdb::fuzz::ReadTree(*ckpt);
    if (!files.ok() || files->empty()) std::abort();
    b->files = *std::move(files);
    b->work = absl::StrCat(scratch, "/work/ckpt");
    return b;
  }();
  return *base;
}

void WriteCopy(const Base& base,
               const std::vector<std::pair<std::string, std::string>>& files) {
  std::error_code ec;
  fs::remove_all(base.work, ec);
  for (const auto& [rel, content] : files) {
    const fs::path path = fs::path(base.work) / rel;
    fs::create_directories(path.parent_path(), ec);
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out.write(content.data(), static_cast<std::streamsize>(content.size()));
  }
}

void CheckVerifiedRowsReencode(const psdb::ckpt::CheckpointReader& reader) {
  for (const psdb::ckpt::TableInfo& table : reader.tables()) {
    auto cursor = psdb::ckpt::TableCursor::Open(reader, table);
    PSDB_FUZZ_CHECK(cursor.ok(), cursor.status().ToString());
    uint64_t rows = 0;
    std::string again;
    for (; (*cursor)->Valid(); (*cursor)->Next()) {
      psdb::ckpt::DecodedRow row;
      const absl::Status s =
          reader.Decode((*cursor)->shard(), table, (*cursor)->key(),
                        (*cursor)->value(), &row);
      PSDB_FUZZ_CHECK(s.ok(), "a verified checkpoint's row: " + s.ToString());
      psdb::EncodeRow(row.header, row.values, row.state, &again);
      PSDB_FUZZ_CHECK(again == (*cursor)->value(),
                      "a verified row re-encodes to other bytes");
      PSDB_FUZZ_CHECK(psdb::EncodeKey(row.key) == (*cursor)->key(),
                      "a verified key re-encodes to other bytes");
      ++rows;
    }
    PSDB_FUZZ_CHECK((*cursor)->status().ok(), (*cursor)->status().ToString());
    PSDB_FUZZ_CHECK(rows == table.rows,
                    absl::StrCat("table ", table.spec.name, ": ", rows,
                                 " rows, manifest says ", table.rows));

    // ps-dump export of the same table: a header and one line per row.
    psdb::dump::ExportOptions options;
    options.table = table.spec.name;
    options.with_state = true;
    std::ostringstream out;
    auto exported = psdb::dump::Export(reader, options, out);
    PSDB_FUZZ_CHECK(exported.ok(), exported.status().ToString());
    PSDB_FUZZ_CHECK(exported->rows == rows, "export row count");
    const std::string text = out.str();
    PSDB_FUZZ_CHECK(static_cast<uint64_t>(
                        std::count(text.begin(), text.end(), '\n')) == rows + 1,
                    "export line count");
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const Base& base = TheBase();
  std::vector<std::pair<std::string, std::string>> files = base.files;
  constexpr size_t kRecord = 7;
  for (size_t i = 0; i + kRecord <= size && i < 8 * kRecord; i += kRecord) {
    const uint8_t* r = data + i;
    auto& [rel, content] = files[r[0] % files.size()];
    const uint32_t offset =
        static_cast<uint32_t>(r[2]) | static_cast<uint32_t>(r[3]) << 8 |
        static_cast<uint32_t>(r[4]) << 16 | static_cast<uint32_t>(r[5]) << 24;
    switch (r[1] % 4) {
      case 0:
        if (!content.empty()) content[offset % content.size()] = r[6];
        break;
      case 1:
        if (!content.empty()) {
          content[offset % content.size()] ^= static_cast<char>(r[6] | 1);
        }
        break;
      case 2:
        content.resize(offset % (content.size() + 1));
        break;
      case 3:
        rel.clear();  // deleted below
        break;
    }
  }
  std::vector<std::pair<std::string, std::string>> kept;
  for (auto& f : files) {
    if (!f.first.empty()) kept.push_back(std::move(f));
  }
  WriteCopy(base, kept);

  auto reader = psdb::ckpt::CheckpointReader::Open(base.work);
  if (!reader.ok()) return 0;
  auto report = psdb::ckpt::Verify(**reader);
  if (!report.ok() || !report->ok()) {
    // Exports of a checkpoint that does not verify may fail, never crash.
    for (const psdb::ckpt::TableInfo& table : (*reader)->tables()) {
      psdb::dump::ExportOptions options;
      options.table = table.spec.name;
      options.with_state = true;
      std::ostringstream out;
      (void)psdb::dump::Export(**reader, options, out);
    }
    return 0;
  }
  CheckVerifiedRowsReencode(**reader);
  return 0;
}
