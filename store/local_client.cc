#include "psdb/local_client.h"

#include "absl/strings/str_cat.h"
#include "util/status_macros.h"

namespace psdb {

absl::StatusOr<std::unique_ptr<LocalClient>> LocalClient::Open(
    absl::string_view path, const StoreOptions& options) {
  PSDB_ASSIGN_OR_RETURN(std::unique_ptr<Store> store,
                        Store::Open(options, path));
  auto client = std::make_unique<LocalClient>(store.get());
  client->owned_ = std::move(store);
  return client;
}

absl::StatusOr<std::unique_ptr<LocalClient>> LocalClient::OpenCheckpoint(
    absl::string_view checkpoint_dir, const StoreOptions& options) {
  PSDB_ASSIGN_OR_RETURN(
      std::unique_ptr<Store> store,
      Store::OpenCheckpoint(options, checkpoint_dir, /*shard_id=*/0));
  auto client = std::make_unique<LocalClient>(store.get());
  client->owned_ = std::move(store);
  return client;
}

LocalClient::LocalClient(Store* store) : store_(store) {}
LocalClient::~LocalClient() = default;

absl::Status LocalClient::CreateTable(const TableSpec& spec) {
  return store_->CreateTable(spec);
}
absl::Status LocalClient::DropTable(absl::string_view name) {
  return store_->DropTable(name);
}
absl::StatusOr<std::vector<TableSpec>> LocalClient::ListTables() {
  return store_->ListTables();
}
absl::StatusOr<TableSpec> LocalClient::GetTable(absl::string_view name) {
  return store_->GetTable(name);
}
absl::Status LocalClient::Pull(absl::string_view table,
                               absl::Span<const uint64_t> keys,
                               absl::Span<float> out,
                               const PullOptions& options) {
  if (!options.version.empty()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "version ", options.version,
        " asked of an embedded store, which has no checkpoint versions"));
  }
  return store_->Pull(table, keys, out, options);
}
absl::Status LocalClient::Push(absl::string_view table,
                               absl::Span<const uint64_t> keys,
                               absl::Span<const float> grads,
                               const PushOptions& options) {
  return store_->Push(table, keys, grads, options);
}
absl::Status LocalClient::PullRows(absl::string_view table,
                                   absl::Span<const uint64_t> keys,
                                   RowBatch* out) {
  return store_->PullRows(table, keys, out);
}
absl::Status LocalClient::PutRows(absl::string_view table,
                                  absl::Span<const uint64_t> keys,
                                  const RowBatch& rows) {
  return store_->PutRows(table, keys, rows);
}
absl::StatusOr<CheckpointInfo> LocalClient::Checkpoint(
    absl::string_view root_dir, const CheckpointOptions& options) {
  return store_->Checkpoint(root_dir, options);
}
absl::StatusOr<StoreStats> LocalClient::Stats() { return store_->Stats(); }

}  // namespace psdb
