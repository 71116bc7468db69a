// libFuzzer target: the Criteo line parser (train/criteo_reader.h).
//
// Input: one line (without its newline).
//
// Invariants:
//  - a line that fails leaves the batch exactly as it was (the parser
//    appends nothing on error), and its log text (DescribeMalformedLine)
//    is one line of bounded length whatever the input (a hostile 1 MiB
//    field never reaches a log whole);
//  - a line that parses re-formats (label and integers in canonical
//    decimal, categorical fields as written) to a line that parses to the
//    same record, and a trailing '\r' changes nothing.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "tests/fuzz/fuzz_util.h"
#include "train/criteo_reader.h"

namespace {

using psdb::train::CriteoBatch;

bool SameBatch(const CriteoBatch& a, const CriteoBatch& b) {
  return a.labels == b.labels && a.ints == b.ints &&
         a.int_present == b.int_present && a.cat_keys == b.cat_keys;
}

// A batch holding one known record, so "unchanged" is not "empty".
CriteoBatch Prefilled() {
  CriteoBatch batch;
  batch.labels = {1.0f};
  batch.ints.assign(psdb::train::kNumIntFeatures, 7);
  batch.int_present.assign(psdb::train::kNumIntFeatures, 1);
  batch.cat_keys.assign(psdb::train::kNumCatFeatures, 42);
  return batch;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const absl::string_view line(reinterpret_cast<const char*>(data), size);
  CriteoBatch batch = Prefilled();
  const absl::Status status = psdb::train::ParseCriteoLine(line, &batch);
  if (!status.ok()) {
    PSDB_FUZZ_CHECK(SameBatch(batch, Prefilled()),
                    "a malformed line changed the batch");
    // Quoted fields are capped at 32 bytes (C-escaped: up to 4 bytes each).
    PSDB_FUZZ_CHECK(
        status.message().size() <= 256,
        absl::StrCat("problem text of ", status.message().size(), " bytes"));
    const std::string logged = psdb::train::DescribeMalformedLine(
        "f", 1, status.message(), line, line.size());
    PSDB_FUZZ_CHECK(logged.find('\n') == std::string::npos &&
                        logged.find('\r') == std::string::npos,
                    "a log line with a line break: " + logged);
    PSDB_FUZZ_CHECK(logged.size() <= 4 * psdb::train::kLoggedLineBytes + 512,
                    absl::StrCat("log line of ", logged.size(), " bytes"));
    return 0;
  }
  PSDB_FUZZ_CHECK(batch.size() == 2, "a parsed line appends one record");

  // Re-format: the line as its fields, label and integers canonical.
  absl::string_view body = line;
  if (!body.empty() && body.back() == '\r') body.remove_suffix(1);
  std::vector<std::string> fields = absl::StrSplit(body, '\t');
  PSDB_FUZZ_CHECK(fields.size() == psdb::train::kNumCriteoFields,
                  "field count");
  fields[0] = batch.labels[1] == 1.0f ? "1" : "0";
  for (int j = 0; j < psdb::train::kNumIntFeatures; ++j) {
    const size_t at = psdb::train::kNumIntFeatures + j;
    fields[1 + j] =
        batch.int_present[at] ? absl::StrCat(batch.ints[at]) : std::string();
  }
  const std::string canonical = absl::StrJoin(fields, "\t");
  CriteoBatch again = Prefilled();
  const absl::Status s2 = psdb::train::ParseCriteoLine(canonical, &again);
  PSDB_FUZZ_CHECK(s2.ok(), s2.ToString() + " on " + canonical);
  PSDB_FUZZ_CHECK(SameBatch(again, batch),
                  "re-formatted line parses differently");
  CriteoBatch with_cr = Prefilled();
  PSDB_FUZZ_CHECK(
      psdb::train::ParseCriteoLine(canonical + "\r", &with_cr).ok() &&
          SameBatch(with_cr, batch),
      "a trailing CR changed the record");
  return 0;
}
