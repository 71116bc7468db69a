#include "rpc/server/delta_rows.h"

namespace psdb::rpc {

uint64_t FileRowsBytes(const ckpt::FileRows& file) {
  return file.keys.size() * sizeof(uint64_t) +
         file.rows.values.size() * sizeof(float) +
         file.rows.state.size() * sizeof(float) +
         file.rows.headers.size() * sizeof(RowHeader);
}

DeltaRows::DeltaRows(std::vector<std::shared_ptr<const ckpt::FileRows>> files)
    : files_(std::move(files)) {
  for (uint32_t f = 0; f < files_.size(); ++f) {
    const ckpt::FileRows& file = *files_[f];
    absl::flat_hash_map<uint64_t, Ref>& keys = index_[file.table];
    for (uint32_t r = 0; r < file.keys.size(); ++r) {
      keys.insert_or_assign(file.keys[r], Ref{f, r});
    }
    bytes_ += FileRowsBytes(file);
  }
  for (const auto& [table, keys] : index_) {
    rows_ += keys.size();
    // An entry of the index: key, Ref and a control byte, about.
    bytes_ += keys.capacity() * (sizeof(uint64_t) + sizeof(Ref) + 1);
  }
}

const ckpt::FileRows* DeltaRows::Find(absl::string_view table, uint64_t key,
                                      size_t* row) const {
  auto t = index_.find(table);
  if (t == index_.end()) return nullptr;
  auto it = t->second.find(key);
  if (it == t->second.end()) return nullptr;
  if (row != nullptr) *row = it->second.row;
  return files_[it->second.file].get();
}

}  // namespace psdb::rpc
