#include "store/memory_tier.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "absl/container/flat_hash_set.h"

namespace psdb::internal {
namespace {

// Slabs are about 1 MiB: large enough that allocation is rare, small enough
// that a small table does not reserve much.
constexpr size_t kSlabTargetBytes = 1 << 20;
// Slab directory size: 2^16 slabs of >= 1 MiB each bound one table at 64 GiB
// of resident rows (more than any one budget here).
constexpr uint32_t kMaxSlabs = 1 << 16;
// Sampled LRU looks at this many random slots per victim (Redis uses 5).
constexpr int kLruSamples = 8;

}  // namespace

MemoryTier::MemoryTier(int dim, int state_size, int stripes,
                       EvictionPolicy policy, bool lsn_slots)
    : dim_(dim),
      state_size_(state_size),
      num_stripes_(static_cast<uint64_t>(std::max(1, stripes))),
      policy_(policy),
      lsn_slots_(lsn_slots) {
  header_offset_ = 4 * (static_cast<size_t>(dim) + state_size);
  header_offset_ = (header_offset_ + 7) & ~size_t{7};
  meta_offset_ = header_offset_ + sizeof(RowHeader);
  slot_bytes_ = meta_offset_ + sizeof(SlotMeta) + (lsn_slots ? 8 : 0);
  size_t per_slab = 1;
  while (per_slab * 2 * slot_bytes_ <= kSlabTargetBytes) per_slab *= 2;
  slab_shift_ = 0;
  while ((size_t{1} << slab_shift_) < per_slab) ++slab_shift_;
  slab_mask_ = static_cast<uint32_t>(per_slab - 1);
  stripes_ = std::make_unique<Stripe[]>(num_stripes_);
  slabs_ = std::make_unique<std::atomic<char*>[]>(kMaxSlabs);
  for (uint32_t i = 0; i < kMaxSlabs; ++i) slabs_[i].store(nullptr);
}

MemoryTier::~MemoryTier() {
  for (uint32_t i = 0; i < kMaxSlabs; ++i) {
    char* s = slabs_[i].load();
    if (s == nullptr) break;
    std::free(s);
  }
}

void MemoryTier::AddSlabLocked() {
  const size_t bytes = (size_t{slab_mask_} + 1) * slot_bytes_;
  char* slab = static_cast<char*>(std::calloc(1, bytes));
  if (slab == nullptr || num_slabs_ >= kMaxSlabs) std::abort();  // OOM
  slabs_[num_slabs_].store(slab, std::memory_order_release);
  ++num_slabs_;
}

void MemoryTier::Allocate(size_t n, std::vector<uint32_t>* out) {
  absl::MutexLock l(&alloc_mu_);
  while (n > 0 && !free_.empty()) {
    out->push_back(free_.back());
    free_.pop_back();
    --n;
  }
  while (n > 0) {
    const uint32_t id = next_unused_;
    if ((id >> slab_shift_) >= num_slabs_) AddSlabLocked();
    ++next_unused_;
    out->push_back(id);
    --n;
  }
  capacity_.store(next_unused_, std::memory_order_release);
}

void MemoryTier::Free(const uint32_t* ids, size_t n) {
  if (n == 0) return;
  absl::MutexLock l(&alloc_mu_);
  free_.insert(free_.end(), ids, ids + n);
}

void MemoryTier::SelectVictims(size_t n, std::vector<uint32_t>* out) {
  absl::MutexLock l(&victim_mu_);
  const uint32_t cap = capacity();
  if (cap == 0 || n == 0) return;
  // Victims are distinct: the evictor writes each dirty victim once, and a
  // slot listed twice could have its older copy written after its newer
  // one (the sweep below passes a slot again whenever n exceeds the
  // occupied slots).
  const size_t start = out->size();
  absl::flat_hash_set<uint32_t> chosen;
  if (policy_ == EvictionPolicy::kClock) {
    // kRefMax + 1 full sweeps bring every counter to zero, so this finds n
    // victims whenever n slots are occupied.
    const uint64_t max_scan = (kRefMax + 1) * uint64_t{cap} + 1;
    for (uint64_t scanned = 0; scanned < max_scan && out->size() - start < n;
         ++scanned) {
      const uint32_t id = static_cast<uint32_t>(hand_++ % cap);
      if ((LoadFlags(id) & kOccupied) == 0) continue;
      if (DecrementRef(id) > 0) continue;
      if (!chosen.insert(id).second) continue;
      out->push_back(id);
    }
    return;
  }
  // Sampled LRU: the oldest of kLruSamples random occupied slots, n times.
  const size_t max_attempts = 4 * n + 16;
  for (size_t attempt = 0; attempt < max_attempts && out->size() - start < n;
       ++attempt) {
    uint32_t best = 0;
    uint32_t best_tick = 0;
    bool found = false;
    for (int s = 0; s < kLruSamples; ++s) {
      rng_ = rng_ * 6364136223846793005ULL + 1442695040888963407ULL;
      const uint32_t id = static_cast<uint32_t>((rng_ >> 33) % cap);
      if ((LoadFlags(id) & kOccupied) == 0) continue;
      const uint32_t t = std::atomic_ref<uint32_t>(meta(id)->tick)
                             .load(std::memory_order_relaxed);
      if (!found || t < best_tick) {
        best = id;
        best_tick = t;
        found = true;
      }
    }
    if (!found) continue;
    if (!chosen.insert(best).second) continue;
    out->push_back(best);
  }
}

}  // namespace psdb::internal
