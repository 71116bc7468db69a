#include "rpc/client/consistent_read.h"

#include <algorithm>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "shard/partitioner.h"
#include "util/status_macros.h"

namespace psdb::rpc::internal {
namespace {

// A read's part of one request: sent_keys()[begin, end) of the read's
// partitioner.
struct Item {
  size_t read = 0;
  size_t begin = 0;
  size_t end = 0;
};

// One PullTables request, to one server (items[i] is req.reads(i)).
struct Request {
  size_t server = 0;
  std::vector<Item> items;
  v1::PullTablesRequest req;
  v1::PullTablesResponse resp;
};

bool Newer(const v1::Version& v, const ReadVersion& floor) {
  return floor.checkpoint_id.empty() || v.seq() >= floor.seq;
}

bool Holds(const v1::PullTablesResponse& resp, const std::string& id) {
  for (const v1::Version& v : resp.held_versions()) {
    if (v.checkpoint_id() == id) return true;
  }
  return false;
}

// "server h:p answered ckpt-a (holds ckpt-a, ckpt-b)".
std::string Describe(const RoutedMap& map, const Request& r) {
  std::vector<std::string> held;
  for (const v1::Version& v : r.resp.held_versions()) {
    held.push_back(v.checkpoint_id());
  }
  const ServerInfo& server = map.cluster.servers()[r.server];
  return absl::StrCat("server ", server.id, " (", server.address, ") answered ",
                      r.resp.version().checkpoint_id(), " (holds ",
                      absl::StrJoin(held, ", "), ")");
}

// The requests that carry every read's keys to their servers: one per
// server, more where its keys pass max_keys.
std::vector<std::unique_ptr<Request>> Plan(const RoutedMap& map,
                                           absl::Span<const Partitioner> parts,
                                           absl::Span<const TableRead> reads,
                                           size_t max_keys, bool serving) {
  std::vector<std::unique_ptr<Request>> out;
  std::vector<Request*> open(map.num_servers(), nullptr);
  std::vector<size_t> open_keys(map.num_servers(), 0);
  for (size_t r = 0; r < parts.size(); ++r) {
    for (const Chunk& c :
         ChunkParts(parts[r], map.cluster, max_keys, /*every_server=*/false)) {
      Request*& req = open[c.server];
      if (req == nullptr || open_keys[c.server] + c.size() > max_keys) {
        out.push_back(std::make_unique<Request>());
        req = out.back().get();
        req->server = c.server;
        req->req.set_cluster_epoch(map.cluster.epoch());
        req->req.set_serving(serving);
        open_keys[c.server] = 0;
      }
      open_keys[c.server] += c.size();
      req->items.push_back({r, c.begin, c.end});
      v1::TableRead* read = req->req.add_reads();
      read->set_table(reads[r].table);
      const absl::Span<const uint64_t> keys =
          parts[r].sent_keys().subspan(c.begin, c.size());
      read->mutable_keys()->Assign(keys.begin(), keys.end());
    }
  }
  return out;
}

// Sends `todo` in parallel (Run: retries on UNAVAILABLE, replica
// fail-over); `calls` are left for their statuses.
absl::Status Send(const FanOut& fan_out, const RoutedMap& map,
                  absl::Span<Request* const> todo, absl::Time deadline,
                  std::vector<Call>* calls) {
  calls->clear();
  for (Request* r : todo) {
    r->resp.Clear();
    calls->push_back(Call{
        r->server,
        [r](Stub* stub, grpc::ClientContext* ctx, DoneFn done) {
          stub->async()->PullTables(ctx, &r->req, &r->resp, std::move(done));
        },
        {}});
  }
  return fan_out.Run(map, *calls, /*idempotent=*/true, deadline);
}

// The first failed call's code.
grpc::StatusCode FailedCode(absl::Span<const Call> calls) {
  for (const Call& call : calls) {
    if (!call.status.ok()) return call.status.error_code();
  }
  return grpc::StatusCode::OK;
}

// The answers' rows scattered into the reads' outputs.
absl::Status Fill(absl::Span<const std::unique_ptr<Request>> requests,
                  absl::Span<const Partitioner> parts,
                  absl::Span<const TableRead> reads,
                  absl::Span<const int> dims) {
  std::vector<std::vector<float>> rows(reads.size());
  for (size_t r = 0; r < reads.size(); ++r) {
    rows[r].resize(parts[r].num_sent() * dims[r]);
  }
  for (const auto& req : requests) {
    if (req->resp.tables_size() != static_cast<int>(req->items.size())) {
      return absl::InternalError(
          absl::StrCat("PullTables answered ", req->resp.tables_size(),
                       " tables for ", req->items.size(), " reads"));
    }
    for (size_t i = 0; i < req->items.size(); ++i) {
      const Item& item = req->items[i];
      const v1::TableValues& t = req->resp.tables(i);
      const size_t dim = dims[item.read];
      const size_t bytes = (item.end - item.begin) * dim * sizeof(float);
      if (static_cast<size_t>(t.dim()) != dim || t.values().size() != bytes) {
        return absl::AbortedError(absl::StrCat(
            "table '", reads[item.read].table,
            "' changed on the server during the call (dim); retry"));
      }
      std::memcpy(rows[item.read].data() + item.begin * dim, t.values().data(),
                  bytes);
    }
  }
  for (size_t r = 0; r < reads.size(); ++r) {
    const size_t dim = dims[r];
    const absl::Span<const uint32_t> inverse = parts[r].inverse();
    for (size_t i = 0; i < inverse.size(); ++i) {
      std::memcpy(reads[r].out.data() + i * dim,
                  rows[r].data() + inverse[i] * dim, dim * sizeof(float));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<ReadVersion> PullConsistent(FanOut& fan_out,
                                           absl::Span<const TableRead> reads,
                                           absl::Span<const int> dims,
                                           const ConsistentReadOptions& options,
                                           absl::Time deadline,
                                           VersionFloor* floor) {
  for (size_t r = 0; r < reads.size(); ++r) {
    if (reads[r].out.size() != reads[r].keys.size() * dims[r]) {
      return absl::InvalidArgumentError(absl::StrCat(
          "table '", reads[r].table, "': out has ", reads[r].out.size(),
          " floats, expected ", reads[r].keys.size() * dims[r], " (",
          reads[r].keys.size(), " keys of dim ", dims[r], ")"));
    }
  }
  const RemoteClientOptions& client = fan_out.options();
  std::shared_ptr<const RoutedMap> map = fan_out.map();
  std::vector<Partitioner> parts(reads.size());
  std::vector<std::unique_ptr<Request>> requests;
  const auto plan = [&]() -> absl::Status {
    for (size_t r = 0; r < reads.size(); ++r) {
      PSDB_RETURN_IF_ERROR(
          parts[r].Partition(map->cluster.ring(), reads[r].keys));
    }
    requests = Plan(*map, parts, reads, client.max_batch_keys, options.serving);
    return absl::OkStatus();
  };
  PSDB_RETURN_IF_ERROR(plan());
  if (requests.empty()) return ReadVersion{};
  // A named version is the caller's to choose; otherwise never older than
  // what this client returned.
  const ReadVersion lowest =
      options.version.empty() ? floor->Get() : ReadVersion{};
  absl::Duration backoff = client.initial_backoff;
  std::string why;  // why the last round found no common version
  std::vector<Call> calls;
  for (int refreshes = 0;;) {
    std::vector<Request*> todo;
    for (auto& r : requests) {
      r->req.set_version(options.version);
      todo.push_back(r.get());
    }
    absl::Status status = Send(fan_out, *map, todo, deadline, &calls);
    bool agreed = false;
    bool reasked = false;  // `todo` was asked again at a chosen version
    while (true) {
      if (!status.ok()) {
        const grpc::StatusCode code = FailedCode(calls);
        if (code == grpc::StatusCode::NOT_FOUND && reasked) {
          // Asked again at a version that replica no longer holds (or
          // another replica of the shard answered): a new round.
          why = absl::StrCat("a server no longer held the version: ",
                             status.message());
          break;
        }
        if (code == grpc::StatusCode::FAILED_PRECONDITION && refreshes < 3) {
          // Routed with a stale map (training servers): route again.
          absl::StatusOr<std::shared_ptr<const RoutedMap>> fresh =
              fan_out.Refresh(
                  *map, std::min(deadline, absl::Now() + absl::Seconds(1)));
          if (!fresh.ok()) return status;
          map = *std::move(fresh);
          ++refreshes;
          PSDB_RETURN_IF_ERROR(plan());
          break;
        }
        return status;
      }
      const v1::Version& first = requests.front()->resp.version();
      agreed = Newer(first, lowest) || first.checkpoint_id().empty();
      for (const auto& r : requests) {
        agreed = agreed &&
                 r->resp.version().checkpoint_id() == first.checkpoint_id();
      }
      if (agreed) break;
      // The newest version every answer holds, not below the floor.
      const v1::Version* target = nullptr;
      for (const v1::Version& v : requests.front()->resp.held_versions()) {
        if (!Newer(v, lowest)) break;
        bool common = true;
        for (const auto& r : requests) {
          common = common && Holds(r->resp, v.checkpoint_id());
        }
        if (common) {
          target = &v;
          break;
        }
      }
      if (target == nullptr) {
        std::vector<std::string> answers;
        for (const auto& r : requests) answers.push_back(Describe(*map, *r));
        why = absl::StrJoin(answers, "; ");
        if (!lowest.checkpoint_id.empty()) {
          absl::StrAppend(&why, "; this client already returned ",
                          lowest.checkpoint_id);
        }
        break;
      }
      const std::string id = target->checkpoint_id();
      todo.clear();
      for (auto& r : requests) {
        if (r->resp.version().checkpoint_id() == id) continue;
        r->req.set_version(id);
        todo.push_back(r.get());
      }
      reasked = true;
      status = Send(fan_out, *map, todo, deadline, &calls);
    }
    if (agreed) break;
    if (absl::Now() + backoff >= deadline) {
      return absl::FailedPreconditionError(
          absl::StrCat("no version common to the ", requests.size(),
                       " shard requests before the deadline: ", why));
    }
    absl::SleepFor(backoff);  // replicas swap meanwhile
    backoff = std::min(backoff * 2, client.max_backoff);
  }
  PSDB_RETURN_IF_ERROR(Fill(requests, parts, reads, dims));
  const v1::Version& v = requests.front()->resp.version();
  ReadVersion out{v.checkpoint_id(), v.step(), v.seq()};
  floor->Raise(out);
  return out;
}

}  // namespace psdb::rpc::internal
