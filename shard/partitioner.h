// Partitioner: splits a batch of keys into one sub-batch per owning server
// and scatters the servers' answers back to the batch's positions. It runs
// for every remote pull and push, so it allocates only when a batch is
// larger than any before it: keep one Partitioner per thread (or per
// in-flight request) and reuse it.
//
// Usage, as RemoteClient::Pull runs it (rpc/client/remote_client.cc; rows
// of `dim` floats):
//
//   PSDB_RETURN_IF_ERROR(partitioner.Partition(map.ring(), keys));
//   // One request per part p (cut at the batch limit) asks server
//   // map.RingServer(p) for part_keys(p), which start at part_offset(p) in
//   // the sent order; answer row j of part p is sent row part_offset(p) + j.
//   for (size_t i = 0; i < keys.size(); ++i)
//     copy sent row inverse()[i] to out row i;
//
// (Scatter does that last loop when the answers sit in one sent-order
// buffer.) For Push, GatherSum(grads, dim, sent_grads) first sums the
// gradients of duplicate keys into the sent order.
//
// Layout: the "sent" order lists every part's keys contiguously, parts in
// ring index order (counting sort by owner), keys within a part in order of
// first appearance in the batch. With deduplication (the default) each
// distinct key is sent once and inverse() maps every batch position to its
// key's place in the sent order, so answers for duplicates reach every
// position that asked.
//
// Thread-safety: not thread-safe; a Partitioner is one thread's scratch
// space. Spans it returns stay valid until the next Partition call.
#ifndef PSDB_SHARD_PARTITIONER_H_
#define PSDB_SHARD_PARTITIONER_H_

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/types/span.h"
#include "shard/ring.h"
#include "util/key_dedup.h"

namespace psdb {

class Partitioner {
 public:
  Partitioner() = default;
  Partitioner(const Partitioner&) = delete;
  Partitioner& operator=(const Partitioner&) = delete;
  Partitioner(Partitioner&&) = default;
  Partitioner& operator=(Partitioner&&) = default;

  // Splits `keys` by owner on `ring`. With `deduplicate` each distinct key
  // is sent once; without, every position is sent (duplicates included).
  // FailedPrecondition if keys is non-empty and the ring is empty;
  // InvalidArgument if keys.size() >= 2^32.
  absl::Status Partition(const Ring& ring, absl::Span<const uint64_t> keys,
                         bool deduplicate = true);

  // Size of the last partitioned batch.
  size_t num_keys() const { return inverse_.size(); }
  // Keys to send over all parts (the distinct keys when deduplicating).
  size_t num_sent() const { return sent_.size(); }
  // One part per ring server (ring.num_servers()), most of them possibly
  // empty; part p belongs to server part_server(p) == ring.server_id(p).
  size_t num_parts() const { return part_servers_.size(); }
  ServerId part_server(size_t p) const { return part_servers_[p]; }
  // Parts with at least one key, ascending: the servers to contact.
  absl::Span<const uint32_t> nonempty_parts() const { return nonempty_; }
  // Part p's keys and where they start in the sent order.
  absl::Span<const uint64_t> part_keys(size_t p) const {
    return absl::MakeConstSpan(sent_).subspan(offsets_[p],
                                              offsets_[p + 1] - offsets_[p]);
  }
  size_t part_offset(size_t p) const { return offsets_[p]; }
  // All parts' keys, concatenated in part order.
  absl::Span<const uint64_t> sent_keys() const { return sent_; }
  // inverse()[i]: where batch position i's key is in the sent order.
  absl::Span<const uint32_t> inverse() const { return inverse_; }

  // Answers back to positions: out[i*width ..+width) =
  // sent_rows[inverse()[i]*width ..+width). InvalidArgument on sizes other
  // than num_sent()*width and num_keys()*width.
  template <typename T>
  absl::Status Scatter(absl::Span<const T> sent_rows, size_t width,
                       absl::Span<T> out) const;
  // Per-position values to the sent order, summing duplicates (gradients):
  // sent_rows[s*width ..) = sum of rows[i*width ..) over i with
  // inverse()[i] == s. The sum is the one Table::Push computes, so a remote
  // push is bit-identical to an embedded one: it starts from a copy of the
  // key's first position (not from 0, which would turn -0.0f into +0.0f)
  // and adds the later positions in batch order.
  template <typename T>
  absl::Status GatherSum(absl::Span<const T> rows, size_t width,
                         absl::Span<T> sent_rows) const;
  // Per-position values to the sent order without summing (whole rows,
  // assign semantics): for duplicates the last position wins.
  template <typename T>
  absl::Status Gather(absl::Span<const T> rows, size_t width,
                      absl::Span<T> sent_rows) const;

 private:
  absl::Status CheckSizes(size_t positions_size, size_t sent_size,
                          size_t width) const;

  // Results.
  std::vector<ServerId> part_servers_;
  std::vector<size_t> offsets_ = {0};  // num_parts() + 1 entries.
  std::vector<uint32_t> nonempty_;
  std::vector<uint64_t> sent_;
  std::vector<uint32_t> inverse_;
  // Scratch, kept for its capacity.
  KeyDedup dedup_;                     // Distinct keys in first-seen order.
  std::vector<uint32_t> distinct_of_;  // Position -> distinct index.
  std::vector<uint32_t> owner_;        // Distinct index -> ring index.
  // Distinct index -> sent index; also read by GatherSum.
  std::vector<uint32_t> sent_of_;
  std::vector<size_t> cursor_;
};

template <typename T>
absl::Status Partitioner::Scatter(absl::Span<const T> sent_rows, size_t width,
                                  absl::Span<T> out) const {
  if (absl::Status s = CheckSizes(out.size(), sent_rows.size(), width);
      !s.ok()) {
    return s;
  }
  for (size_t i = 0; i < inverse_.size(); ++i) {
    std::copy_n(sent_rows.data() + size_t{inverse_[i]} * width, width,
                out.data() + i * width);
  }
  return absl::OkStatus();
}

template <typename T>
absl::Status Partitioner::GatherSum(absl::Span<const T> rows, size_t width,
                                    absl::Span<T> sent_rows) const {
  if (absl::Status s = CheckSizes(rows.size(), sent_rows.size(), width);
      !s.ok()) {
    return s;
  }
  // Distinct indices are handed out in first-seen order, so position i is
  // the first occurrence of its key iff its key is distinct index
  // `num_seen`, i.e. iff inverse_[i] == sent_of_[num_seen]. (Without
  // deduplication sent_of_ == inverse_: every position is a first.)
  size_t num_seen = 0;
  for (size_t i = 0; i < inverse_.size(); ++i) {
    const size_t s = inverse_[i];
    const T* src = rows.data() + i * width;
    T* dst = sent_rows.data() + s * width;
    if (num_seen < sent_of_.size() && sent_of_[num_seen] == s) {
      ++num_seen;
      std::copy_n(src, width, dst);
    } else {
      for (size_t c = 0; c < width; ++c) dst[c] += src[c];
    }
  }
  return absl::OkStatus();
}

template <typename T>
absl::Status Partitioner::Gather(absl::Span<const T> rows, size_t width,
                                 absl::Span<T> sent_rows) const {
  if (absl::Status s = CheckSizes(rows.size(), sent_rows.size(), width);
      !s.ok()) {
    return s;
  }
  for (size_t i = 0; i < inverse_.size(); ++i) {
    std::copy_n(rows.data() + i * width, width,
                sent_rows.data() + size_t{inverse_[i]} * width);
  }
  return absl::OkStatus();
}

}  // namespace psdb

#endif  // PSDB_SHARD_PARTITIONER_H_
