#include "rpc/control/cluster_checkpoint.h"

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <map>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "grpcpp/grpcpp.h"
#include "manifest/manifest.h"
#include "rpc/wire/convert.h"
#include "rpc/wire/psdb.grpc.pb.h"
#include "util/status_macros.h"

namespace psdb::rpc {

absl::StatusOr<ClusterCheckpointInfo> WriteClusterCheckpoint(
    const ClusterMap& map, absl::string_view root, int64_t step,
    const ClientTlsOptions& tls, absl::Duration timeout) {
  if (map.servers().empty()) {
    return absl::FailedPreconditionError(
        "cluster checkpoint: the cluster map has no servers");
  }
  if (root.empty() || step < 0) {
    return absl::InvalidArgumentError(
        "cluster checkpoint: needs a root directory and a step >= 0");
  }
  uint64_t seq = 0;
  PSDB_ASSIGN_OR_RETURN(std::vector<CheckpointRef> complete,
                        ListCheckpoints(root));
  PSDB_ASSIGN_OR_RETURN(std::vector<CheckpointRef> incomplete,
                        ListIncompleteCheckpoints(root));
  for (const auto* list : {&complete, &incomplete}) {
    for (const CheckpointRef& ref : *list) seq = std::max(seq, ref.seq);
  }
  const std::string id = CheckpointId(step, seq + 1);
  const std::string dir = absl::StrCat(root, "/", id);
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) {
    return absl::InternalError(absl::StrCat(
        "cluster checkpoint: cannot create ", dir, ": ", ec.message()));
  }

  // Every shard in parallel.
  const int n = static_cast<int>(map.servers().size());
  std::vector<absl::Status> status(n);
  std::vector<v1::CheckpointResponse> resp(n);
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r) {
    threads.emplace_back([&, r] {
      const ServerInfo& server = map.servers()[r];
      absl::StatusOr<std::shared_ptr<grpc::Channel>> channel =
          MakeChannel(tls, server.address);
      if (!channel.ok()) {
        status[r] = channel.status();
        return;
      }
      auto stub = v1::ParameterService::NewStub(*channel);
      grpc::ClientContext ctx;
      ctx.set_deadline(std::chrono::system_clock::now() +
                       absl::ToChronoMilliseconds(timeout));
      v1::CheckpointRequest req;
      req.set_cluster_epoch(map.epoch());
      req.set_shard_dir(absl::StrCat(dir, "/", ShardDirName(server.id)));
      status[r] = FromGrpcStatus(stub->Checkpoint(&ctx, req, &resp[r]));
    });
  }
  for (std::thread& t : threads) t.join();
  for (int r = 0; r < n; ++r) {
    if (status[r].ok()) continue;
    std::filesystem::remove_all(dir, ec);
    const ServerInfo& server = map.servers()[r];
    return absl::Status(
        status[r].code(),
        absl::StrCat("cluster checkpoint ", id, " abandoned (no manifest): ",
                     "server rank ", server.id, " (node id:", server.node_id,
                     " addr:", server.address, "): ", status[r].message()));
  }

  // The manifest, last.
  v1::Manifest manifest;
  manifest.set_format_version(kManifestFormatVersion);
  manifest.set_checkpoint_id(id);
  manifest.set_created_unix_micros(absl::ToUnixMicros(absl::Now()));
  manifest.set_cluster_epoch(map.epoch());
  v1::RingManifest* ring = manifest.mutable_ring();
  ring->set_vnodes_per_server(map.spec().ring.vnodes_per_server);
  ring->set_hash_seed(map.spec().ring.hash_seed);
  int64_t max_step = 0;
  // Tables by name: spec, rows per shard.
  std::map<std::string, v1::TableManifest> tables;
  for (int r = 0; r < n; ++r) {
    const ServerInfo& server = map.servers()[r];
    ring->add_server_ids(server.id);
    ring->add_weights(server.weight);
    v1::ShardManifest* shard = manifest.add_shards();
    shard->set_shard_id(server.id);
    shard->set_dir(ShardDirName(server.id));
    shard->set_server(server.address);
    *shard->mutable_files() = resp[r].shard_files();
    max_step = std::max(max_step, resp[r].step());
    for (int t = 0; t < resp[r].shard_tables_size(); ++t) {
      v1::TableManifest& table = tables[resp[r].shard_tables(t).name()];
      if (!table.has_spec()) {
        *table.mutable_spec() = resp[r].shard_tables(t);
        table.mutable_shard_rows()->Resize(n, 0);
      }
      table.set_shard_rows(r, resp[r].shard_table_rows(t));
      table.set_rows(table.rows() + resp[r].shard_table_rows(t));
    }
  }
  manifest.set_step(max_step);
  // A server of an older build lists no files; the manifest is then the
  // format before file lists, which readers take unchecked.
  for (const v1::ShardManifest& shard : manifest.shards()) {
    if (shard.files().empty()) {
      manifest.set_format_version(kManifestShardFilesVersion - 1);
    }
  }
  uint64_t rows = 0;
  for (auto& [name, table] : tables) {
    table.set_step(max_step);
    rows += table.rows();
    *manifest.add_tables() = std::move(table);
  }
  if (absl::Status s = WriteManifestAtomic(dir, manifest); !s.ok()) {
    std::filesystem::remove_all(dir, ec);
    return s;
  }
  ClusterCheckpointInfo info;
  info.path = dir;
  info.id = id;
  info.step = max_step;
  info.rows = rows;
  return info;
}

}  // namespace psdb::rpc
