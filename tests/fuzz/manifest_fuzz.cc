// libFuzzer target: the checkpoint manifest reader (manifest/manifest.h).
//
// Input: the text of a MANIFEST.json.
//
// Invariants: ReadManifest on a file with these bytes agrees with
// ManifestFromJson; a manifest that parses re-serializes (ManifestToJson)
// to text that parses to an equal message and serializes to the same text
// again; every table spec the manifest holds that converts to a TableSpec
// converts back (proto and JSON) to an equal TableSpec. Otherwise the
// reader fails with a Status, never a crash.
#include <cstddef>
#include <cstdint>
#include <fstream>
#include <string>

#include "google/protobuf/util/field_comparator.h"
#include "google/protobuf/util/message_differencer.h"
#include "manifest/manifest.h"
#include "tests/fuzz/fuzz_util.h"

namespace {

// Message equality with NaN equal to NaN (JSON may spell a float "NaN").
bool Same(const google::protobuf::Message& a,
          const google::protobuf::Message& b) {
  google::protobuf::util::DefaultFieldComparator comparator;
  comparator.set_treat_nan_as_equal(true);
  google::protobuf::util::MessageDifferencer differencer;
  differencer.set_field_comparator(&comparator);
  return differencer.Compare(a, b);
}

// Specs that pass validation (finite parameters, so == is meaningful).
void CheckSpecRoundTrip(const psdb::v1::TableSpec& proto) {
  absl::StatusOr<psdb::TableSpec> spec = psdb::TableSpecFromProto(proto);
  if (!spec.ok() || !psdb::ValidateTableSpec(*spec).ok()) return;
  absl::StatusOr<psdb::TableSpec> again =
      psdb::TableSpecFromProto(psdb::TableSpecToProto(*spec));
  PSDB_FUZZ_CHECK(again.ok(), again.status().ToString());
  PSDB_FUZZ_CHECK(*again == *spec, "TableSpec proto round trip");
  absl::StatusOr<psdb::TableSpec> from_json =
      psdb::TableSpecFromJson(psdb::TableSpecToJson(*spec));
  PSDB_FUZZ_CHECK(from_json.ok(), from_json.status().ToString());
  PSDB_FUZZ_CHECK(*from_json == *spec, "TableSpec JSON round trip");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const absl::string_view text(reinterpret_cast<const char*>(data), size);
  absl::StatusOr<psdb::v1::Manifest> parsed =
      psdb::ManifestFromJson(text, "fuzz");

  // The file reader gives the same answer.
  static const std::string dir = psdb::fuzz::FuzzScratchDir();
  {
    std::ofstream out(dir + "/" + psdb::kManifestFileName,
                      std::ios::binary | std::ios::trunc);
    out.write(text.data(), static_cast<std::streamsize>(text.size()));
  }
  absl::StatusOr<psdb::v1::Manifest> read = psdb::ReadManifest(dir);
  PSDB_FUZZ_CHECK(
      read.status().code() == parsed.status().code(),
      read.status().ToString() + " vs " + parsed.status().ToString());
  if (!parsed.ok()) return 0;
  PSDB_FUZZ_CHECK(Same(*read, *parsed),
                  "ReadManifest and ManifestFromJson disagree");

  const std::string json = psdb::ManifestToJson(*parsed);
  absl::StatusOr<psdb::v1::Manifest> again =
      psdb::ManifestFromJson(json, "re-serialized");
  PSDB_FUZZ_CHECK(again.ok(), again.status().ToString() + "\n" + json);
  PSDB_FUZZ_CHECK(Same(*again, *parsed),
                  "manifest changed in a JSON round trip:\n" + json);
  const std::string json_again = psdb::ManifestToJson(*again);
  PSDB_FUZZ_CHECK(json_again == json, "ManifestToJson is not stable:\n" + json +
                                          "\nthen\n" + json_again);
  for (const auto& table : parsed->tables()) CheckSpecRoundTrip(table.spec());
  return 0;
}
