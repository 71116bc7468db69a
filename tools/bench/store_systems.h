// The four systems ps-bench's `store` scenario measures on one key stream,
// behind one small interface (pull = get-or-create, push = Adagrad with
// duplicate keys summed, as DESIGN.md "Operations" defines them):
//
//  - PsdbSystem: psdb's embedded Store (memory tier over RocksDB).
//  - RocksDbSystem: the peer a user would otherwise write: RocksDB used
//    directly with psdb's row encoding (store/row_codec.h), within a given
//    memory (RocksDbMemory), MultiGet for pulls, read-modify-write with the
//    same optim::Apply and one WriteBatch per push, missing rows initialized
//    with the same InitializeRow. Keys are de-duplicated before MultiGet (what
//    a careful user does; it only helps the peer). Writes skip the WAL, as
//    psdb's durability also comes from checkpoints.
//  - HashMapSystem: the memory limit: absl::flat_hash_map<uint64_t,
//    uint32_t> from key to row index plus one std::vector<float> of rows
//    (values then state), gathered and updated in place. No locks, no
//    persistence, no budget.
//
// Thread-safety: none of these is thread-safe (one benchmark thread each;
// the Store itself is thread-safe).
#ifndef PSDB_TOOLS_BENCH_STORE_SYSTEMS_H_
#define PSDB_TOOLS_BENCH_STORE_SYSTEMS_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "psdb/row.h"
#include "psdb/store.h"
#include "psdb/table_spec.h"
#include "rocksdb/db.h"
#include "rocksdb/write_batch.h"

namespace psdb::bench {

class KvSystem {
 public:
  virtual ~KvSystem() = default;
  // REQUIRES: out.size() == keys.size() * dim.
  virtual absl::Status Pull(absl::Span<const uint64_t> keys,
                            absl::Span<float> out) = 0;
  // REQUIRES: grads.size() == keys.size() * dim.
  virtual absl::Status Push(absl::Span<const uint64_t> keys,
                            absl::Span<const float> grads) = 0;
};

// Unique keys of a batch, the position -> unique index map, and summed
// gradients. Reuses its buffers across batches.
class Deduper {
 public:
  void Build(absl::Span<const uint64_t> keys);
  // Sums grads (keys.size() x dim) per unique key into summed().
  void SumGrads(absl::Span<const float> grads, int dim);
  const std::vector<uint64_t>& unique() const { return unique_; }
  const std::vector<uint32_t>& inverse() const { return inverse_; }
  const std::vector<float>& summed() const { return summed_; }

 private:
  absl::flat_hash_map<uint64_t, uint32_t> index_;
  std::vector<uint64_t> unique_;
  std::vector<uint32_t> inverse_;
  std::vector<float> summed_;
};

class PsdbSystem : public KvSystem {
 public:
  static absl::StatusOr<std::unique_ptr<PsdbSystem>> Open(
      const std::string& dir, const TableSpec& spec,
      const StoreOptions& options);
  absl::Status Pull(absl::Span<const uint64_t> keys,
                    absl::Span<float> out) override;
  absl::Status Push(absl::Span<const uint64_t> keys,
                    absl::Span<const float> grads) override;
  Store* store() { return store_.get(); }
  const std::string& table() const { return table_; }
  // Waits (up to `timeout_s`) until RocksDB has no compaction pending or
  // running, as RocksDbSystem::Settle does. Dirty rows stay dirty in
  // memory: writing them would hand psdb clean victims the peer has no
  // counterpart of.
  absl::Status Settle(double timeout_s);

 private:
  std::unique_ptr<Store> store_;
  std::string table_;
};

// What RocksDbSystem may use of memory.
struct RocksDbMemory {
  // The one LRU cache: data blocks, and with `charge_all` also the
  // memtables, index and filter blocks.
  uint64_t cache_bytes = 0;
  // true: everything RocksDB holds is charged to the cache, as psdb
  // charges its RocksDB share (a WriteBufferManager of memtable_bytes over
  // the cache; table readers and filter construction charged), so memtables
  // + blocks + index and filters stay within cache_bytes: the peer held to
  // the same memory as psdb. false: RocksDB's defaults around a block
  // cache of cache_bytes (64 MiB memtables and the index and filter blocks
  // outside it).
  bool charge_all = false;
  uint64_t memtable_bytes = 0;  // with charge_all
};

class RocksDbSystem : public KvSystem {
 public:
  static absl::StatusOr<std::unique_ptr<RocksDbSystem>> Open(
      const std::string& dir, const TableSpec& spec,
      const RocksDbMemory& memory);
  ~RocksDbSystem() override;
  absl::Status Pull(absl::Span<const uint64_t> keys,
                    absl::Span<float> out) override;
  absl::Status Push(absl::Span<const uint64_t> keys,
                    absl::Span<const float> grads) override;
  // Flushes memtables and waits (up to `timeout_s`) for pending compactions,
  // so measurement starts from a settled tree.
  absl::Status Settle(double timeout_s);

 private:
  RocksDbSystem(const TableSpec& spec);
  // MultiGet of dedup_.unique(): decodes found rows into values_/state_,
  // initializes missing ones (and queues them in batch_ if `write_new`).
  absl::Status ReadUnique(bool write_new);

  TableSpec spec_;
  int state_size_;
  std::unique_ptr<rocksdb::DB> db_;
  int64_t step_ = 0;
  Deduper dedup_;
  std::vector<char> key_bytes_;
  std::vector<rocksdb::Slice> key_slices_;
  std::vector<rocksdb::PinnableSlice> pinned_;
  std::vector<rocksdb::Status> statuses_;
  std::vector<float> values_;  // unique x dim
  std::vector<float> state_;   // unique x state_size
  std::vector<RowHeader> headers_;
  rocksdb::WriteBatch batch_;
  std::string encoded_;
};

class HashMapSystem : public KvSystem {
 public:
  // Reserves room for `expected_rows` rows (no rehash or copy below that).
  HashMapSystem(const TableSpec& spec, uint64_t expected_rows);
  absl::Status Pull(absl::Span<const uint64_t> keys,
                    absl::Span<float> out) override;
  absl::Status Push(absl::Span<const uint64_t> keys,
                    absl::Span<const float> grads) override;

 private:
  // Row index of `key`, creating the row if needed.
  uint32_t RowOf(uint64_t key);

  TableSpec spec_;
  int state_size_;
  size_t stride_;
  int64_t step_ = 0;
  absl::flat_hash_map<uint64_t, uint32_t> index_;
  std::vector<float> rows_;
  Deduper dedup_;
};

}  // namespace psdb::bench

#endif  // PSDB_TOOLS_BENCH_STORE_SYSTEMS_H_
