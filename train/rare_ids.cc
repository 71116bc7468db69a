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

void RareIdMapper::MapTraining(CriteoBatch* batch) {
  if (!enabled()) return;
  for (size_t i = 0; i < batch->cat_keys.size(); ++i) {
    uint32_t& count = counts_[batch->cat_keys[i]];
    if (count < min_count_) {
      ++count;
      if (count == min_count_) ++admitted_;
    }
    if (count < min_count_) {
      batch->cat_keys[i] = FallbackKey(static_cast<int>(i % kNumCatFeatures));
      ++mapped_;
    }
  }
}

void RareIdMapper::MapEval(CriteoBatch* batch) const {
  if (!enabled()) return;
  for (size_t i = 0; i < batch->cat_keys.size(); ++i) {
    auto it = counts_.find(batch->cat_keys[i]);
    if (it == counts_.end() || it->second < min_count_) {
      batch->cat_keys[i] = FallbackKey(static_cast<int>(i % kNumCatFeatures));
    }
  }
}

}  // namespace psdb::train
