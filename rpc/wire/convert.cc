#include "rpc/wire/convert.h"

#include <bit>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace psdb::rpc {

static_assert(std::endian::native == std::endian::little,
              "psdb's wire format is little-endian float32; big-endian hosts "
              "would need a byte swap here");

grpc::Status ToGrpcStatus(const absl::Status& status) {
  if (status.ok()) return grpc::Status::OK;
  // absl and gRPC share the canonical code numbering.
  return grpc::Status(static_cast<grpc::StatusCode>(status.code()),
                      std::string(status.message()));
}

absl::Status FromGrpcStatus(const grpc::Status& status) {
  if (status.ok()) return absl::OkStatus();
  return absl::Status(static_cast<absl::StatusCode>(status.error_code()),
                      status.error_message());
}

void FloatsToBytes(absl::Span<const float> values, std::string* out) {
  out->resize(values.size() * sizeof(float));
  if (!values.empty()) {
    std::memcpy(out->data(), values.data(), out->size());
  }
}

absl::Status BytesToFloats(absl::string_view bytes, absl::Span<float> out,
                           absl::string_view what) {
  if (bytes.size() != out.size() * sizeof(float)) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": expected ", out.size() * sizeof(float),
                     " bytes (", out.size(), " float32), got ", bytes.size()));
  }
  if (!out.empty()) std::memcpy(out.data(), bytes.data(), bytes.size());
  return absl::OkStatus();
}

void ToProto(const RowBatch& rows, v1::RowBlock* out) {
  out->set_dim(rows.dim);
  out->set_state_size(rows.state_size);
  FloatsToBytes(rows.values, out->mutable_values());
  FloatsToBytes(rows.state, out->mutable_state());
  const size_t n = rows.headers.size();
  out->mutable_last_update_step()->Resize(static_cast<int>(n), 0);
  out->mutable_update_count()->Resize(static_cast<int>(n), 0);
  out->mutable_frequency()->Resize(static_cast<int>(n), 0);
  for (size_t i = 0; i < n; ++i) {
    out->set_last_update_step(static_cast<int>(i),
                              rows.headers[i].last_update_step);
    out->set_update_count(static_cast<int>(i), rows.headers[i].update_count);
    out->set_frequency(static_cast<int>(i), rows.headers[i].frequency);
  }
}

absl::Status FromProto(const v1::RowBlock& block, size_t n, RowBatch* out) {
  if (block.dim() < 0 || block.state_size() < 0) {
    return absl::InvalidArgumentError("rows: negative dim or state_size");
  }
  if (static_cast<size_t>(block.last_update_step_size()) != n ||
      static_cast<size_t>(block.update_count_size()) != n ||
      static_cast<size_t>(block.frequency_size()) != n) {
    return absl::InvalidArgumentError(absl::StrCat(
        "rows: expected ", n,
        " row headers, got last_update_step=", block.last_update_step_size(),
        " update_count=", block.update_count_size(),
        " frequency=", block.frequency_size()));
  }
  const uint64_t value_floats = static_cast<uint64_t>(block.dim()) * n;
  const uint64_t state_floats = static_cast<uint64_t>(block.state_size()) * n;
  if (block.values().size() != value_floats * sizeof(float)) {
    return absl::InvalidArgumentError(
        absl::StrCat("rows: values hold ", block.values().size(),
                     " bytes, expected ", value_floats * sizeof(float), " (", n,
                     " rows of dim ", block.dim(), ")"));
  }
  if (block.state().size() != state_floats * sizeof(float)) {
    return absl::InvalidArgumentError(
        absl::StrCat("rows: state holds ", block.state().size(),
                     " bytes, expected ", state_floats * sizeof(float), " (", n,
                     " rows of state_size ", block.state_size(), ")"));
  }
  out->Resize(block.dim(), block.state_size(), n);
  if (value_floats > 0) {
    std::memcpy(out->values.data(), block.values().data(),
                block.values().size());
  }
  if (state_floats > 0) {
    std::memcpy(out->state.data(), block.state().data(), block.state().size());
  }
  for (size_t i = 0; i < n; ++i) {
    const int j = static_cast<int>(i);
    out->headers[i].last_update_step = block.last_update_step(j);
    out->headers[i].update_count = block.update_count(j);
    out->headers[i].frequency = block.frequency(j);
  }
  return absl::OkStatus();
}

void ToProto(const StoreStats& stats, v1::StatsResponse* out) {
  for (const TableStats& t : stats.tables) {
    v1::TableStats* p = out->add_tables();
    p->set_name(t.name);
    p->set_memory_rows(t.memory_rows);
    p->set_memory_bytes(t.memory_bytes);
    p->set_disk_rows(t.disk_rows);
    p->set_disk_bytes(t.disk_bytes);
    p->set_hits(t.hits);
    p->set_misses(t.misses);
    p->set_created(t.created);
    p->set_evictions(t.evictions);
    p->set_dirty_writes(t.dirty_writes);
    p->set_disk_write_errors(t.disk_write_errors);
    p->set_non_finite_updates(t.non_finite_updates);
    p->set_not_admitted(t.not_admitted);
    p->set_step(t.step);
    p->set_background_evictions(t.background_evictions);
    p->set_disk_compaction_pending(t.disk_compaction_pending);
  }
  out->set_memory_budget_bytes(stats.memory_budget_bytes);
  out->set_memory_used_bytes(stats.memory_used_bytes);
  out->set_memory_yielded_bytes(stats.memory_yielded_bytes);
  out->set_disk_running_compactions(stats.disk_running_compactions);
  out->set_checkpoints(stats.checkpoints);
  out->set_last_checkpoint_micros(
      absl::ToInt64Microseconds(stats.last_checkpoint_duration));
  out->set_total_checkpoint_micros(
      absl::ToInt64Microseconds(stats.total_checkpoint_duration));
}

StoreStats FromProto(const v1::StatsResponse& proto) {
  StoreStats stats;
  for (const v1::TableStats& p : proto.tables()) {
    TableStats t;
    t.name = p.name();
    t.memory_rows = p.memory_rows();
    t.memory_bytes = p.memory_bytes();
    t.disk_rows = p.disk_rows();
    t.disk_bytes = p.disk_bytes();
    t.hits = p.hits();
    t.misses = p.misses();
    t.created = p.created();
    t.evictions = p.evictions();
    t.dirty_writes = p.dirty_writes();
    t.disk_write_errors = p.disk_write_errors();
    t.non_finite_updates = p.non_finite_updates();
    t.not_admitted = p.not_admitted();
    t.step = p.step();
    t.background_evictions = p.background_evictions();
    t.disk_compaction_pending = p.disk_compaction_pending();
    stats.tables.push_back(std::move(t));
  }
  stats.memory_budget_bytes = proto.memory_budget_bytes();
  stats.memory_used_bytes = proto.memory_used_bytes();
  stats.memory_yielded_bytes = proto.memory_yielded_bytes();
  stats.disk_running_compactions = proto.disk_running_compactions();
  stats.checkpoints = proto.checkpoints();
  stats.last_checkpoint_duration =
      absl::Microseconds(proto.last_checkpoint_micros());
  stats.total_checkpoint_duration =
      absl::Microseconds(proto.total_checkpoint_micros());
  return stats;
}

void ToProto(const CheckpointInfo& info, v1::CheckpointResponse* out) {
  out->set_path(info.path);
  out->set_step(info.step);
  out->set_rows_flushed(info.rows_flushed);
  out->set_rows_expired(info.rows_expired);
  out->set_duration_micros(absl::ToInt64Microseconds(info.duration));
}

CheckpointInfo FromProto(const v1::CheckpointResponse& proto) {
  CheckpointInfo info;
  info.path = proto.path();
  info.step = proto.step();
  info.rows_flushed = proto.rows_flushed();
  info.rows_expired = proto.rows_expired();
  info.duration = absl::Microseconds(proto.duration_micros());
  return info;
}

}  // namespace psdb::rpc
