// `ps-train gen`: its flags, checked, into GeneratorOptions, then the
// synthetic data set written (train/synthetic.h).
#include "tools/train/train_gen.h"

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "tools/train/train_usage.h"
#include "train/criteo_reader.h"
#include "train/synthetic.h"
#include "util/status_macros.h"

namespace psdb::train::cli {

int RunGen(const tools::Args& args, std::ostream& out, std::ostream& err) {
  absl::Status known = args.CheckKnown(
      {"out", "kind", "seed", "train_rows", "test_rows", "train_files",
       "min_vocab", "max_vocab", "zipf", "missing_rate", "interaction_pairs",
       "factor_dim", "interaction_std", "singleton_rate", "weight_drift",
       "bias_drift"});
  if (!known.ok()) return Usage(err, known);
  const std::string dir = args.GetString("out", "");
  if (dir.empty())
    return Usage(err, absl::InvalidArgumentError("gen needs --out DIR"));
  GeneratorOptions o;
  auto parse = [&]() -> absl::Status {
    PSDB_ASSIGN_OR_RETURN(
        o.kind, ParseGeneratorKind(args.GetString("kind", "additive")));
    const bool pairs = o.kind == GeneratorKind::kPairs;
    const bool longtail = o.kind == GeneratorKind::kLongtail;
    for (const char* flag :
         {"interaction_pairs", "factor_dim", "interaction_std"}) {
      if (args.Has(flag) && !pairs) {
        return absl::InvalidArgumentError(
            absl::StrCat("--", flag, " is for --kind pairs"));
      }
    }
    for (const char* flag : {"singleton_rate", "weight_drift", "bias_drift"}) {
      if (args.Has(flag) && !longtail) {
        return absl::InvalidArgumentError(
            absl::StrCat("--", flag, " is for --kind longtail"));
      }
    }
    PSDB_ASSIGN_OR_RETURN(
        int64_t n, args.GetInt("interaction_pairs", o.interaction_pairs, 1,
                               kNumCatFeatures * (kNumCatFeatures - 1) / 2));
    o.interaction_pairs = static_cast<int>(n);
    PSDB_ASSIGN_OR_RETURN(n, args.GetInt("factor_dim", o.factor_dim, 1, 64));
    o.factor_dim = static_cast<int>(n);
    PSDB_ASSIGN_OR_RETURN(
        o.interaction_std,
        args.GetDouble("interaction_std", o.interaction_std, 0, 20));
    PSDB_ASSIGN_OR_RETURN(
        o.singleton_rate,
        args.GetDouble("singleton_rate", o.singleton_rate, 0, 0.99));
    PSDB_ASSIGN_OR_RETURN(
        o.weight_drift,
        args.GetDouble("weight_drift", o.weight_drift, -100, 100));
    PSDB_ASSIGN_OR_RETURN(
        o.bias_drift, args.GetDouble("bias_drift", o.bias_drift, -100, 100));
    PSDB_ASSIGN_OR_RETURN(int64_t seed, args.GetInt("seed", 1, 0, INT64_MAX));
    o.seed = static_cast<uint64_t>(seed);
    PSDB_ASSIGN_OR_RETURN(
        o.train_rows, args.GetInt("train_rows", o.train_rows, 1, 1LL << 40));
    PSDB_ASSIGN_OR_RETURN(o.test_rows,
                          args.GetInt("test_rows", o.test_rows, 2, 1LL << 40));
    PSDB_ASSIGN_OR_RETURN(int64_t files,
                          args.GetInt("train_files", o.train_files, 1, 100000));
    o.train_files = static_cast<int>(files);
    PSDB_ASSIGN_OR_RETURN(o.min_vocab,
                          args.GetInt("min_vocab", o.min_vocab, 1, 1LL << 31));
    PSDB_ASSIGN_OR_RETURN(o.max_vocab,
                          args.GetInt("max_vocab", o.max_vocab, 1, 1LL << 31));
    PSDB_ASSIGN_OR_RETURN(o.zipf_s, args.GetDouble("zipf", o.zipf_s, 0.01, 10));
    PSDB_ASSIGN_OR_RETURN(
        o.missing_rate,
        args.GetDouble("missing_rate", o.missing_rate, 0, 0.99));
    return absl::OkStatus();
  };
  absl::Status parsed = parse();
  if (!parsed.ok()) return Usage(err, parsed);
  absl::StatusOr<GeneratorResult> r = GenerateSynthetic(o, dir);
  if (!r.ok()) return Fail(err, r.status());
  out << absl::StrFormat(
      "ps-train gen: %s data: wrote %d train rows in %d files and %d test "
      "rows to %s\n"
      "ps-train gen: click rate %.3f (train), %.3f (test); Bayes-optimal test "
      "AUC %.4f (expected %.4f), log-loss %.4f -> %s/meta.json\n",
      GeneratorKindName(o.kind), o.train_rows, o.train_files, o.test_rows, dir,
      r->train_ctr, r->test_ctr, r->bayes_auc, r->bayes_auc_expected,
      r->bayes_logloss, dir);
  if (o.kind == GeneratorKind::kLongtail) {
    out << absl::StrFormat(
        "ps-train gen: %d categorical values are singletons (ids that occur "
        "once)\n",
        r->singleton_values);
  }
  return 0;
}

}  // namespace psdb::train::cli
