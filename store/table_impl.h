// What Table's source files (store/table.cc, store/table_*.cc) share and
// its users do not: the per-thread scratch buffers of the pull and push
// paths, the "no slot" marker and how an error message names a key.
// Internal to psdb_store.
//
// Thread-safety: ThreadScratch() returns the calling thread's own buffers;
// the rest are constants and pure functions.
#ifndef PSDB_STORE_TABLE_IMPL_H_
#define PSDB_STORE_TABLE_IMPL_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "store/stripe_groups.h"
#include "util/key_dedup.h"

namespace psdb::internal {

inline constexpr uint32_t kNoSlot = 0xffffffffu;

// Per-thread buffers of the hot path; they grow to the largest batch and
// are then reused, so a batch allocates nothing.
struct TableScratch {
  StripeGroups groups;
  KeyDedup dedup;
  std::vector<uint32_t> inverse;
  std::vector<uint32_t> occ;
  std::vector<uint32_t> miss_pos;
  std::vector<uint64_t> miss_keys;
  std::vector<uint32_t> miss_occ;
  std::vector<uint32_t> miss_unique;
  std::vector<float> ubuf;
  std::vector<float> gsum;
  std::vector<uint8_t> skip;
  std::vector<uint32_t> slots;
  std::vector<uint32_t> work;
  std::vector<float> undo;  // a row's values and state before its update
};
// The calling thread's buffers (one per thread, shared by Pull and Push:
// table_pull.cc, table_push.cc).
TableScratch& ThreadScratch();

inline std::string KeyString(uint64_t key) { return absl::StrCat(key); }

}  // namespace psdb::internal

#endif  // PSDB_STORE_TABLE_IMPL_H_
