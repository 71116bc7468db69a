#include "train/rare_ids.h"

#include "util/hash.h"

namespace psdb::train {
namespace {

// "rare-id" in ASCII: the seed of the fallback keys.
constexpr uint64_t kFallbackSeed = 0x726172652d6964ULL;

}  // namespace

uint64_t RareIdMapper::FallbackKey(int field) {
  return HashKey(static_cast<uint64_t>(field), kFallbackSeed);
}

void RareIdMapper::MapTraining(CriteoBatch* batch, int64_t step) {
  if (!enabled()) return;
  for (size_t i = 0; i < batch->cat_keys.size(); ++i) {
    Entry& e = counts_[batch->cat_keys[i]];
    if (e.count < min_count_) {
      ++e.count;
      if (e.count == min_count_) {
        e.admitted_at = step;
        ++admitted_;
      }
    }
    if (e.count < min_count_) {
      batch->cat_keys[i] = FallbackKey(static_cast<int>(i % kNumCatFeatures));
      ++mapped_;
    }
  }
}

void RareIdMapper::MapEval(CriteoBatch* batch, int64_t as_of_step) const {
  if (!enabled()) return;
  for (size_t i = 0; i < batch->cat_keys.size(); ++i) {
    auto it = counts_.find(batch->cat_keys[i]);
    if (it == counts_.end() || it->second.count < min_count_ ||
        it->second.admitted_at > as_of_step) {
      batch->cat_keys[i] = FallbackKey(static_cast<int>(i % kNumCatFeatures));
    }
  }
}

}  // namespace psdb::train
