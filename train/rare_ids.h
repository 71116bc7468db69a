// RareIdMapper: frequency-based admission of categorical ids on the worker
// (ps-train --min_count). An id seen fewer than min_count times shares its
// field's fallback row: the trainer replaces it by FallbackKey(field) before
// the batch reaches the model, so every rare id trains, and is served by,
// one learned "rare id of field f" embedding (wide and deep) instead of a
// row of its own.
//
// Why the worker counts rather than the store's admission threshold
// (store/admission.h): a store-admitted table answers a not-yet-admitted
// key's pull with the table default and drops its pushes, so rare ids would
// keep a fixed, untrained vector; and a Pull does not say which keys were
// admitted, so the trainer could not substitute a shared row. Counting here
// knows, per id, before anything is pulled; rows of rare ids are never
// created in the store at all.
//
// Counting: MapTraining counts every occurrence, in batch order; the k-th
// sighting of an id is mapped to the fallback when k < min_count, so an id
// gets its own row from its min_count-th sighting on. MapEval maps ids with
// fewer than min_count sightings (unseen ones included) and counts nothing;
// given a step, it maps the ids admitted after that step too (the model of
// a checkpoint taken then has no trained row for them).
// Counts are this worker's (of its shard of the data), kept in memory for
// the run: one hash-map entry per distinct id seen (16 bytes plus the
// table's overhead), not saved in checkpoints.
//
// Thread-safety: thread-compatible (the training thread drives it).
#ifndef PSDB_TRAIN_RARE_IDS_H_
#define PSDB_TRAIN_RARE_IDS_H_

#include <cstdint>
#include <limits>

#include "absl/container/flat_hash_map.h"
#include "train/criteo_reader.h"

namespace psdb::train {

class RareIdMapper {
 public:
  // min_count <= 1 maps nothing.
  explicit RareIdMapper(uint32_t min_count) : min_count_(min_count) {}

  // The shared row of field `field`'s rare ids (0..25): a key no
  // CategoricalKey collides with but by a 64-bit hash accident.
  static uint64_t FallbackKey(int field);

  bool enabled() const { return min_count_ > 1; }
  uint32_t min_count() const { return min_count_; }

  // Counts the batch's ids and maps those still below min_count; `step` is
  // the training step the batch is for (ids admitted by it are admitted at
  // that step).
  void MapTraining(CriteoBatch* batch, int64_t step);
  // Maps ids not admitted by `as_of_step` (default: now); counts nothing.
  void MapEval(CriteoBatch* batch,
               int64_t as_of_step = std::numeric_limits<int64_t>::max()) const;

  // Distinct ids seen in training, and of those the ones admitted.
  uint64_t tracked() const { return counts_.size(); }
  uint64_t admitted() const { return admitted_; }
  // Positions mapped to a fallback by MapTraining so far.
  uint64_t mapped() const { return mapped_; }

 private:
  // Sightings while below min_count; once admitted, the admission step.
  struct Entry {
    uint32_t count = 0;
    int64_t admitted_at = 0;
  };
  const uint32_t min_count_;
  absl::flat_hash_map<uint64_t, Entry> counts_;
  uint64_t admitted_ = 0;
  uint64_t mapped_ = 0;
};

}  // namespace psdb::train

#endif  // PSDB_TRAIN_RARE_IDS_H_
