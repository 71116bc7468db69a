#include "manifest/manifest.h"

#include <algorithm>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "google/protobuf/descriptor.h"
#include "google/protobuf/message.h"
#include "google/protobuf/util/json_util.h"
#include "util/status_macros.h"

namespace psdb {
namespace {

constexpr absl::string_view kCkptPrefix = "ckpt-";

// Turns every -0.0 float or double of `m` (nested messages too) into +0.0:
// protobuf prints -0.0 as "-0", which its JSON parser reads back as the
// integer 0, so written JSON would not read back to the same text.
void PositiveZeros(google::protobuf::Message* m) {
  using google::protobuf::FieldDescriptor;
  const google::protobuf::Reflection* r = m->GetReflection();
  std::vector<const FieldDescriptor*> fields;
  r->ListFields(*m, &fields);
  for (const FieldDescriptor* f : fields) {
    const int n = f->is_repeated() ? r->FieldSize(*m, f) : 1;
    for (int i = 0; i < n; ++i) {
      switch (f->cpp_type()) {
        case FieldDescriptor::CPPTYPE_FLOAT:
          if (f->is_repeated()) {
            if (r->GetRepeatedFloat(*m, f, i) == 0.0f) {
              r->SetRepeatedFloat(m, f, i, 0.0f);
            }
          } else if (r->GetFloat(*m, f) == 0.0f) {
            r->SetFloat(m, f, 0.0f);
          }
          break;
        case FieldDescriptor::CPPTYPE_DOUBLE:
          if (f->is_repeated()) {
            if (r->GetRepeatedDouble(*m, f, i) == 0.0) {
              r->SetRepeatedDouble(m, f, i, 0.0);
            }
          } else if (r->GetDouble(*m, f) == 0.0) {
            r->SetDouble(m, f, 0.0);
          }
          break;
        case FieldDescriptor::CPPTYPE_MESSAGE:
          PositiveZeros(f->is_repeated() ? r->MutableRepeatedMessage(m, f, i)
                                         : r->MutableMessage(m, f));
          break;
        default:
          break;
      }
    }
  }
}

// The JSON psdb writes: every primitive field printed, zeros positive.
std::string PrintJson(google::protobuf::Message* m, bool whitespace) {
  PositiveZeros(m);
  google::protobuf::util::JsonPrintOptions opts;
  opts.always_print_primitive_fields = true;
  opts.add_whitespace = whitespace;
  std::string out;
  (void)google::protobuf::util::MessageToJsonString(*m, &out, opts);
  return out;
}

absl::string_view InitKindName(InitKind k) {
  switch (k) {
    case InitKind::kZeros:
      return "zeros";
    case InitKind::kConstant:
      return "constant";
    case InitKind::kUniform:
      return "uniform";
    case InitKind::kNormal:
      return "normal";
    case InitKind::kTruncatedNormal:
      return "truncated_normal";
  }
  return "unknown";
}

absl::StatusOr<InitKind> ParseInitKind(absl::string_view s) {
  for (InitKind k : {InitKind::kZeros, InitKind::kConstant, InitKind::kUniform,
                     InitKind::kNormal, InitKind::kTruncatedNormal}) {
    if (s == InitKindName(k)) return k;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("unknown initializer kind \"", s, "\""));
}

absl::StatusOr<std::vector<CheckpointRef>> ListDirs(absl::string_view root,
                                                    bool complete,
                                                    const FileIo& io) {
  std::vector<CheckpointRef> out;
  const std::string root_path(root);
  if (!io.Exists(root_path)) return out;
  PSDB_ASSIGN_OR_RETURN(std::vector<std::string> names,
                        io.ListChildren(root_path));
  for (std::string& name : names) {
    CheckpointRef ref;
    ref.id = std::move(name);
    if (!ParseCheckpointId(ref.id, &ref.step, &ref.seq)) continue;
    ref.path = absl::StrCat(root_path, "/", ref.id);
    if (!io.IsDirectory(ref.path)) continue;
    const bool has_manifest =
        io.Exists(absl::StrCat(ref.path, "/", kManifestFileName));
    if (has_manifest != complete) continue;
    out.push_back(std::move(ref));
  }
  std::sort(out.begin(), out.end(),
            [](const CheckpointRef& x, const CheckpointRef& y) {
              if (x.seq != y.seq) return x.seq > y.seq;
              return x.step > y.step;
            });
  return out;
}

}  // namespace

v1::TableSpec TableSpecToProto(const TableSpec& spec) {
  v1::TableSpec p;
  p.set_name(spec.name);
  p.set_dim(spec.dim);
  p.mutable_initializer()->set_kind(
      std::string(InitKindName(spec.initializer.kind)));
  p.mutable_initializer()->set_a(spec.initializer.a);
  p.mutable_initializer()->set_b(spec.initializer.b);
  const optim::OptimizerSpec& o = spec.optimizer;
  v1::OptimizerSpec* po = p.mutable_optimizer();
  po->set_kind(std::string(optim::KindName(o.kind)));
  po->set_learning_rate(o.learning_rate);
  po->set_momentum(o.momentum);
  po->set_nesterov(o.nesterov);
  po->set_initial_accumulator(o.initial_accumulator);
  po->set_beta1(o.beta1);
  po->set_beta2(o.beta2);
  po->set_epsilon(o.epsilon);
  po->set_l1(o.l1);
  po->set_l2(o.l2);
  po->set_lr_power(o.lr_power);
  po->set_weight_decay(o.weight_decay);
  po->set_accumulator_decay(o.accumulator_decay);
  p.set_seed(spec.seed);
  p.set_admission_threshold(spec.admission_threshold);
  p.set_ttl_steps(spec.ttl_steps);
  p.set_non_finite(spec.non_finite == NonFinitePolicy::kSkipRow ? "skip_row"
                                                                : "reject");
  p.set_serving_default(
      spec.serving_default == MissingRowValue::kZeros ? "zeros" : "init");
  return p;
}

absl::StatusOr<TableSpec> TableSpecFromProto(const v1::TableSpec& p) {
  // The one place where an unset field takes its default: every field
  // starts at the C++ struct's default and is overwritten only when the
  // message sets it (a string field set to "" counts as unset).
  TableSpec spec;
  spec.name = p.name();
  spec.dim = p.dim();
  const v1::InitializerSpec& pi = p.initializer();
  if (!pi.kind().empty()) {
    PSDB_ASSIGN_OR_RETURN(spec.initializer.kind, ParseInitKind(pi.kind()));
  }
  if (pi.has_a()) spec.initializer.a = pi.a();
  if (pi.has_b()) spec.initializer.b = pi.b();
  const v1::OptimizerSpec& po = p.optimizer();
  optim::OptimizerSpec& o = spec.optimizer;
  if (!po.kind().empty()) {
    absl::StatusOr<optim::OptimizerKind> kind = optim::ParseKind(po.kind());
    if (!kind.ok()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "table ", p.name(), ": unknown optimizer kind \"", po.kind(), "\""));
    }
    o.kind = *kind;
  }
  if (po.has_learning_rate()) o.learning_rate = po.learning_rate();
  if (po.has_momentum()) o.momentum = po.momentum();
  if (po.has_nesterov()) o.nesterov = po.nesterov();
  if (po.has_initial_accumulator()) {
    o.initial_accumulator = po.initial_accumulator();
  }
  if (po.has_beta1()) o.beta1 = po.beta1();
  if (po.has_beta2()) o.beta2 = po.beta2();
  if (po.has_epsilon()) o.epsilon = po.epsilon();
  if (po.has_l1()) o.l1 = po.l1();
  if (po.has_l2()) o.l2 = po.l2();
  if (po.has_lr_power()) o.lr_power = po.lr_power();
  if (po.has_weight_decay()) o.weight_decay = po.weight_decay();
  if (po.has_accumulator_decay()) {
    o.accumulator_decay = po.accumulator_decay();
  }
  if (p.has_seed()) spec.seed = p.seed();
  if (p.has_admission_threshold()) {
    spec.admission_threshold = p.admission_threshold();
  }
  if (p.has_ttl_steps()) spec.ttl_steps = p.ttl_steps();
  if (p.non_finite() == "reject") {
    spec.non_finite = NonFinitePolicy::kReject;
  } else if (p.non_finite() == "skip_row") {
    spec.non_finite = NonFinitePolicy::kSkipRow;
  } else if (!p.non_finite().empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "table ", p.name(), ": unknown non_finite \"", p.non_finite(), "\""));
  }
  if (p.serving_default() == "init") {
    spec.serving_default = MissingRowValue::kInit;
  } else if (p.serving_default() == "zeros") {
    spec.serving_default = MissingRowValue::kZeros;
  } else if (!p.serving_default().empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("table ", p.name(), ": unknown serving_default \"",
                     p.serving_default(), "\""));
  }
  return spec;
}

std::string TableSpecToJson(const TableSpec& spec) {
  v1::TableSpec p = TableSpecToProto(spec);
  return PrintJson(&p, /*whitespace=*/false);
}

absl::StatusOr<TableSpec> TableSpecFromJson(absl::string_view json) {
  v1::TableSpec p;
  google::protobuf::util::JsonParseOptions opts;
  opts.ignore_unknown_fields = true;
  auto st =
      google::protobuf::util::JsonStringToMessage(std::string(json), &p, opts);
  if (!st.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("unparsable table spec JSON: ", st.ToString()));
  }
  return TableSpecFromProto(p);
}

std::string ManifestToJson(const v1::Manifest& manifest) {
  v1::Manifest copy = manifest;
  return PrintJson(&copy, /*whitespace=*/true);
}

absl::StatusOr<v1::Manifest> ManifestFromJson(absl::string_view json,
                                              absl::string_view source) {
  v1::Manifest m;
  google::protobuf::util::JsonParseOptions opts;
  opts.ignore_unknown_fields = true;
  auto st =
      google::protobuf::util::JsonStringToMessage(std::string(json), &m, opts);
  if (!st.ok()) {
    return absl::DataLossError(
        absl::StrCat(source, ": unparsable manifest: ", st.ToString()));
  }
  if (m.format_version() > kManifestFormatVersion) {
    return absl::FailedPreconditionError(absl::StrCat(
        source, ": manifest format version ", m.format_version(),
        " is newer than this build supports (", kManifestFormatVersion, ")"));
  }
  return m;
}

absl::StatusOr<v1::Manifest> ReadManifest(absl::string_view checkpoint_dir,
                                          const FileIo& io) {
  const std::string file = absl::StrCat(checkpoint_dir, "/", kManifestFileName);
  if (!io.Exists(file)) {
    return absl::NotFoundError(absl::StrCat("no manifest: ", file));
  }
  absl::StatusOr<std::string> json = io.ReadFile(file);
  if (!json.ok()) {
    return absl::DataLossError(
        absl::StrCat("cannot read ", file, ": ", json.status().message()));
  }
  return ManifestFromJson(*json, file);
}

absl::Status WriteManifestAtomic(absl::string_view checkpoint_dir,
                                 const v1::Manifest& manifest,
                                 const FileIo& io) {
  v1::Manifest m = manifest;
  if (m.format_version() == 0) m.set_format_version(kManifestFormatVersion);
  return io.WriteFileAtomically(
      absl::StrCat(checkpoint_dir, "/", kManifestFileName), ManifestToJson(m));
}

absl::Status SyncDir(absl::string_view dir) {
  return LocalFileIo().SyncDir(std::string(dir));
}

std::vector<std::string> ShardTableMismatches(
    const v1::Manifest& manifest,
    const std::vector<std::string>& column_families) {
  // RocksDB's kDefaultColumnFamilyName; this target links no RocksDB.
  constexpr absl::string_view kMetadataFamily = "default";
  std::set<std::string> listed;
  for (const v1::TableManifest& t : manifest.tables()) {
    listed.insert(t.spec().name());
  }
  std::set<std::string> held;
  for (const std::string& cf : column_families) {
    if (cf != kMetadataFamily) held.insert(cf);
  }
  std::vector<std::string> out;
  for (const std::string& name : listed) {
    if (!held.contains(name)) {
      out.push_back(
          absl::StrCat("table '", name,
                       "' is in the manifest but not in the shard's files"));
    }
  }
  for (const std::string& name : held) {
    if (!listed.contains(name)) {
      out.push_back(
          absl::StrCat("table '", name,
                       "' is in the shard's files but not in the manifest"));
    }
  }
  return out;
}

absl::Status CheckShardTables(const v1::Manifest& manifest,
                              const std::vector<std::string>& column_families,
                              absl::string_view where) {
  const std::vector<std::string> mismatches =
      ShardTableMismatches(manifest, column_families);
  if (mismatches.empty()) return absl::OkStatus();
  return absl::DataLossError(absl::StrCat(where, ": ", mismatches.front()));
}

std::string CheckpointId(int64_t step, uint64_t seq) {
  return absl::StrFormat("ckpt-%012d-%06d", step, seq);
}

bool ParseCheckpointId(absl::string_view name, int64_t* step, uint64_t* seq) {
  if (name.substr(0, kCkptPrefix.size()) != kCkptPrefix) return false;
  name.remove_prefix(kCkptPrefix.size());
  const size_t dash = name.find('-');
  if (dash == absl::string_view::npos || dash == 0 || dash + 1 == name.size()) {
    return false;
  }
  for (char c : name) {
    if (c != '-' && (c < '0' || c > '9')) return false;
  }
  int64_t st;
  uint64_t sq;
  if (!absl::SimpleAtoi(name.substr(0, dash), &st) ||
      !absl::SimpleAtoi(name.substr(dash + 1), &sq)) {
    return false;
  }
  *step = st;
  *seq = sq;
  return true;
}

std::string ShardDirName(int shard_id) {
  return absl::StrCat("shard-", shard_id);
}

absl::StatusOr<std::vector<CheckpointRef>> ListCheckpoints(
    absl::string_view root, const FileIo& io) {
  return ListDirs(root, /*complete=*/true, io);
}

absl::StatusOr<std::vector<CheckpointRef>> ListIncompleteCheckpoints(
    absl::string_view root, const FileIo& io) {
  return ListDirs(root, /*complete=*/false, io);
}

absl::StatusOr<CheckpointRef> LatestCheckpoint(absl::string_view root,
                                               const FileIo& io) {
  PSDB_ASSIGN_OR_RETURN(std::vector<CheckpointRef> all,
                        ListCheckpoints(root, io));
  if (all.empty()) {
    return absl::NotFoundError(
        absl::StrCat("no complete checkpoint under ", root));
  }
  return all.front();
}

absl::StatusOr<uint64_t> NextCheckpointSeq(absl::string_view root,
                                           const FileIo& io) {
  PSDB_ASSIGN_OR_RETURN(std::vector<CheckpointRef> done,
                        ListCheckpoints(root, io));
  PSDB_ASSIGN_OR_RETURN(std::vector<CheckpointRef> partial,
                        ListIncompleteCheckpoints(root, io));
  uint64_t max_seq = 0;
  for (const auto& r : done) max_seq = std::max(max_seq, r.seq);
  for (const auto& r : partial) max_seq = std::max(max_seq, r.seq);
  return max_seq + 1;
}

absl::StatusOr<std::string> ResolveCheckpointDir(absl::string_view path,
                                                 const FileIo& io) {
  if (io.Exists(absl::StrCat(path, "/", kManifestFileName))) {
    return std::string(path);
  }
  absl::StatusOr<CheckpointRef> latest = LatestCheckpoint(path, io);
  if (!latest.ok()) {
    return absl::NotFoundError(absl::StrCat(
        "no checkpoint at ", path, " (neither a ", kManifestFileName,
        " there nor a complete checkpoint under it)"));
  }
  return latest->path;
}

}  // namespace psdb
