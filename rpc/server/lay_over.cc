#include "rpc/server/lay_over.h"

#include <algorithm>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "rocksdb/db.h"
#include "util/status_macros.h"

namespace psdb::rpc {

absl::StatusOr<std::vector<TableFile>> TableFiles(
    const v1::Manifest& m, int shard, const std::string& dir,
    const ckpt::VerifiedFiles& verified) {
  std::vector<TableFile> out;
  const std::string path = ckpt::ShardPath(dir, m.shards(shard));
  for (const v1::ShardFile& f : m.shards(shard).files()) {
    ckpt::FileFacts facts = ckpt::ListedFacts(f);
    if (!facts.sst) continue;
    PSDB_ASSIGN_OR_RETURN(
        ckpt::FileId id,
        ckpt::IdentifyFile(absl::StrCat(path, "/", f.name()), f));
    if (facts.column_family.empty()) {
      const ckpt::FileFacts* read = verified.Find(id);
      if (read != nullptr) facts.column_family = read->column_family;
    }
    if (facts.column_family == rocksdb::kDefaultColumnFamilyName) continue;
    out.push_back({std::move(id), std::move(facts)});
  }
  return out;
}

ServingSnapshot::Base BaseOf(const std::string& checkpoint_id,
                             const std::vector<TableFile>& files) {
  ServingSnapshot::Base base;
  base.checkpoint_id = checkpoint_id;
  uint64_t seen_max = 0;
  bool known = true;
  for (const TableFile& f : files) {
    base.files.insert(f.id);
    if (!f.facts.seqnos.has_value()) {
      known = false;
    } else {
      seen_max = std::max(seen_max, f.facts.seqnos->max);
    }
  }
  if (known) base.seen_max = seen_max;
  return base;
}

absl::StatusOr<LayPlan> PlanLayOver(const ServingSnapshot::Base& base,
                                    const std::vector<TableFile>& files) {
  auto refuse = [](std::string why) {
    return absl::FailedPreconditionError(std::move(why));
  };
  if (!base.seen_max.has_value()) {
    return refuse("the manifest lists no sequence numbers for the base");
  }
  LayPlan plan;
  plan.seen_max = *base.seen_max;
  for (const TableFile& f : files) {
    if (base.files.contains(f.id)) {
      // Accounted for: verified (then not read again), or skipped before.
      plan.skip.insert(f.facts.name);
      continue;
    }
    if (!f.facts.seqnos.has_value()) {
      return refuse(absl::StrCat("the manifest lists no sequence numbers for ",
                                 f.facts.name));
    }
    if (f.facts.seqnos->min > *base.seen_max) {
      plan.fresh.push_back(&f);
    } else if (f.facts.seqnos->max <= *base.seen_max &&
               f.facts.seqnos->min > 0) {
      plan.skip.insert(f.facts.name);
    } else if (f.facts.seqnos->min == 0) {
      // RocksDB zeroes the sequence numbers of rows it compacts into the
      // last level: how new they are is not known.
      return refuse(absl::StrCat(f.facts.name,
                                 " holds rows compacted into the last level"));
    } else {
      return refuse(absl::StrCat(f.facts.name,
                                 " holds rows older and newer than those "
                                 "served (a compaction of unseen rows)"));
    }
  }
  std::sort(plan.fresh.begin(), plan.fresh.end(),
            [](const TableFile* a, const TableFile* b) {
              return a->facts.seqnos->min < b->facts.seqnos->min;
            });
  for (size_t i = 0; i < plan.fresh.size(); ++i) {
    if (i > 0 && plan.fresh[i]->facts.seqnos->min <=
                     plan.fresh[i - 1]->facts.seqnos->max) {
      return refuse("added files' rows interleave");
    }
    plan.seen_max = std::max(plan.seen_max, plan.fresh[i]->facts.seqnos->max);
  }
  return plan;
}

absl::StatusOr<std::shared_ptr<const DeltaRows>> LayOver(
    const LayPlan& plan, const ckpt::FileVerifyReport& checked,
    const ckpt::VerifiedFiles& verified, const DeltaRows* old_delta,
    uint64_t max_bytes) {
  const std::string too_many =
      "the rows held over the base pass max_delta_bytes";
  if (!checked.rows_complete) return absl::FailedPreconditionError(too_many);
  absl::flat_hash_map<ckpt::FileId, std::shared_ptr<const ckpt::FileRows>> rows;
  for (const auto& file : checked.rows) rows[file->id] = file;
  std::vector<std::shared_ptr<const ckpt::FileRows>> ordered;
  if (old_delta != nullptr) ordered = old_delta->files();
  for (const TableFile* f : plan.fresh) {
    const ckpt::FileFacts* facts = verified.Find(f->id);
    if (facts == nullptr || !facts->deletions.has_value()) {
      return absl::InternalError(
          absl::StrCat(f->facts.name, " was not verified"));
    }
    if (*facts->deletions > 0) {
      return absl::FailedPreconditionError(
          absl::StrCat(f->facts.name, " deletes rows"));
    }
    auto it = rows.find(f->id);
    if (it == rows.end()) continue;  // no rows (an empty file)
    ordered.push_back(it->second);
  }
  auto delta = std::make_shared<const DeltaRows>(std::move(ordered));
  if (delta->bytes() > max_bytes) {
    return absl::FailedPreconditionError(too_many);
  }
  return delta;
}

}  // namespace psdb::rpc
