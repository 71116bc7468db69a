// Row-level types shared by the store, the wire and the worker cache:
// the per-row header and RowBatch, the whole-row (values + optimizer state)
// transfer unit of PullRows / PutRows.
//
// Thread-safety: plain values.
#ifndef PSDB_ROW_H_
#define PSDB_ROW_H_

#include <cstddef>
#include <cstdint>
#include <vector>

namespace psdb {

struct RowHeader {
  // Table step of the row's last applied update (0 = never updated).
  int64_t last_update_step = 0;
  // Number of optimizer applications to this row.
  uint64_t update_count = 0;
  // Number of times the key was seen (pulls and pushes), for LFU and admission.
  uint64_t frequency = 0;

  friend bool operator==(const RowHeader&, const RowHeader&) = default;
};

// n whole rows of one table. Row i is values[i*dim .. (i+1)*dim),
// state[i*state_size .. (i+1)*state_size) and headers[i].
struct RowBatch {
  int dim = 0;
  int state_size = 0;
  std::vector<float> values;
  std::vector<float> state;
  std::vector<RowHeader> headers;

  size_t size() const { return headers.size(); }
  // Sets dim/state_size and sizes the vectors for n rows (zero-filled).
  void Resize(int dim_, int state_size_, size_t n) {
    dim = dim_;
    state_size = state_size_;
    values.assign(n * static_cast<size_t>(dim_), 0.0f);
    state.assign(n * static_cast<size_t>(state_size_), 0.0f);
    headers.assign(n, RowHeader{});
  }
  // Appends row i of `other` (same dim and state_size).
  void AppendFrom(const RowBatch& other, size_t i) {
    const size_t d = static_cast<size_t>(dim);
    const size_t ss = static_cast<size_t>(state_size);
    values.insert(values.end(), other.values.begin() + i * d,
                  other.values.begin() + (i + 1) * d);
    state.insert(state.end(), other.state.begin() + i * ss,
                 other.state.begin() + (i + 1) * ss);
    headers.push_back(other.headers[i]);
  }
};

}  // namespace psdb

#endif  // PSDB_ROW_H_
