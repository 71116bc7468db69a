// LocalClient: ParameterClient served by an in-process Store (embedded mode).
//
//   PSDB_ASSIGN_OR_RETURN(auto client, psdb::LocalClient::Open("./psdb-data"));
//
// Thread-safety: thread-safe (the Store is).
#ifndef PSDB_LOCAL_CLIENT_H_
#define PSDB_LOCAL_CLIENT_H_

#include <memory>

#include "absl/strings/string_view.h"
#include "psdb/parameter_client.h"
#include "psdb/store.h"

namespace psdb {

class LocalClient final : public ParameterClient {
 public:
  // Opens a Store under `path` and serves it.
  static absl::StatusOr<std::unique_ptr<LocalClient>> Open(
      absl::string_view path, const StoreOptions& options = {});
  // Serves shard 0 of the checkpoint `checkpoint_dir` (an embedded store's
  // checkpoint) read-only: Store::OpenCheckpoint.
  static absl::StatusOr<std::unique_ptr<LocalClient>> OpenCheckpoint(
      absl::string_view checkpoint_dir, const StoreOptions& options = {});
  // Serves an already open store; `store` must outlive the client.
  explicit LocalClient(Store* store);
  ~LocalClient() override;

  absl::Status CreateTable(const TableSpec& spec) override;
  absl::Status DropTable(absl::string_view name) override;
  absl::StatusOr<std::vector<TableSpec>> ListTables() override;
  absl::StatusOr<TableSpec> GetTable(absl::string_view name) override;
  absl::Status Pull(absl::string_view table, absl::Span<const uint64_t> keys,
                    absl::Span<float> out, const PullOptions& options) override;
  absl::Status Push(absl::string_view table, absl::Span<const uint64_t> keys,
                    absl::Span<const float> grads,
                    const PushOptions& options) override;
  absl::Status PullRows(absl::string_view table,
                        absl::Span<const uint64_t> keys,
                        RowBatch* out) override;
  absl::Status PutRows(absl::string_view table, absl::Span<const uint64_t> keys,
                       const RowBatch& rows) override;
  absl::StatusOr<CheckpointInfo> Checkpoint(
      absl::string_view root_dir, const CheckpointOptions& options) override;
  absl::StatusOr<StoreStats> Stats() override;

  Store* store() const { return store_; }

 private:
  std::unique_ptr<Store> owned_;
  Store* store_;
};

}  // namespace psdb

#endif  // PSDB_LOCAL_CLIENT_H_
