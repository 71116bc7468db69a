#include "rpc/server/checkpoint_follower.h"

#include <pthread.h>
#include <sched.h>

#include <algorithm>
#include <cstdio>
#include <optional>
#include <thread>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/mutex.h"
#include "checkpoint/verify.h"
#include "manifest/manifest.h"
#include "optim/optimizer.h"
#include "psdb/checkpoint_reader.h"
#include "rpc/server/root_watcher.h"
#include "shard/partitioner.h"
#include "util/status_macros.h"

namespace psdb::rpc {
namespace {

// Keys per warming pull.
constexpr size_t kWarmBatch = 4096;

// Runs fn() on a thread of its own under SCHED_IDLE (Linux: it runs only
// on CPU no other thread wants, and any waking thread preempts it at once)
// and returns its result. Verifying and warming a large
// checkpoint take seconds of CPU, which must not come out of the requests'
// share: on a busy machine the swap takes longer instead. A thread of its
// own, because a thread cannot raise its priority back without privilege
// and threads it starts (a store's evictor) would inherit the low one.
template <typename Fn>
auto AtLowPriority(Fn fn) -> decltype(fn()) {
  std::optional<decltype(fn())> result;
  std::thread([&] {
    sched_param param{};
    pthread_setschedparam(pthread_self(), SCHED_IDLE, &param);
    result.emplace(fn());
  }).join();
  return *std::move(result);
}

void Log(const std::string& line) {
  std::fprintf(stderr, "ps-server: %s\n", line.c_str());
}

// Snapshots whose last holder let go, waiting for the follow thread to
// close them (a request thread never pays for closing a checkpoint). Shared
// by the follower and the deleters of the snapshots it handed out.
// Also carries the follow thread's stop flag and the root watcher's "poll
// now", so that one condition wakes it for any of them.
struct RetireQueue {
  absl::Mutex mu;
  std::vector<ServingSnapshot*> queue ABSL_GUARDED_BY(mu);
  bool closed ABSL_GUARDED_BY(mu) = false;  // no follow thread: delete inline
  bool stop ABSL_GUARDED_BY(mu) = false;    // the follow thread should end

  // The root watcher saw a manifest renamed in: poll now.
  bool poll_now ABSL_GUARDED_BY(mu) = false;

  static bool Wake(RetireQueue* q) ABSL_SHARED_LOCKS_REQUIRED(q->mu) {
    return q->stop || q->poll_now || !q->queue.empty();
  }
};

// Verifies the checkpoint and opens the shard(s) served read-only.
absl::StatusOr<std::unique_ptr<ServingSnapshot>> OpenSnapshot(
    const FollowerOptions& options, const CheckpointRef& ref) {
  PSDB_ASSIGN_OR_RETURN(std::unique_ptr<ckpt::CheckpointReader> reader,
                        ckpt::CheckpointReader::Open(ref.path));
  PSDB_ASSIGN_OR_RETURN(ckpt::VerifyReport report,
                        AtLowPriority([&] { return ckpt::Verify(*reader); }));
  if (!report.ok()) {
    return absl::DataLossError(
        absl::StrCat("verify found ", report.error_count, " error(s), first: ",
                     report.errors.empty() ? "?" : report.errors.front()));
  }
  auto snap = std::make_unique<ServingSnapshot>();
  snap->checkpoint_id = ref.id;
  snap->dir = ref.path;
  snap->seq = ref.seq;
  snap->step = reader->manifest().step();
  snap->created =
      absl::FromUnixMicros(reader->manifest().created_unix_micros());
  if (options.shard_id == kAllShards) {
    for (const ckpt::ShardInfo& shard : reader->shards()) {
      snap->shard_ids.push_back(shard.shard_id);
    }
    std::sort(snap->shard_ids.begin(), snap->shard_ids.end());
  } else {
    snap->shard_ids.push_back(options.shard_id);
  }
  if (reader->shards().size() > 1) {
    PSDB_ASSIGN_OR_RETURN(std::unique_ptr<ckpt::RingOwnershipCheck> ring,
                          ckpt::RingOwnershipCheck::Create(*reader));
    if (ring == nullptr) {
      return absl::DataLossError(absl::StrCat(
          ref.path, ": ", reader->shards().size(),
          " shards but the manifest records no ring to route keys by"));
    }
    snap->ring = ring->ring();
  }
  reader.reset();
  for (int shard_id : snap->shard_ids) {
    PSDB_ASSIGN_OR_RETURN(
        std::unique_ptr<Store> store,
        Store::OpenCheckpoint(options.store, ref.path, shard_id,
                              Store::ShardFileCheck::kAlreadyChecked));
    snap->stores.push_back(std::move(store));
  }
  return snap;
}

// Pulls the keys `from` holds in memory out of `to`, so they are resident
// there. Best effort: a failure only means a colder start.
void Warm(Store& from, Store& to, size_t max_keys) {
  std::vector<float> scratch;
  for (const TableSpec& spec : to.ListTables()) {
    absl::StatusOr<TableSpec> old = from.GetTable(spec.name);
    if (!old.ok() || old->dim != spec.dim) continue;
    absl::StatusOr<std::vector<uint64_t>> keys =
        from.ResidentKeys(spec.name, max_keys);
    if (!keys.ok()) continue;
    PullOptions serving;
    serving.serving = true;
    for (size_t i = 0; i < keys->size(); i += kWarmBatch) {
      const size_t n = std::min(kWarmBatch, keys->size() - i);
      scratch.resize(n * spec.dim);
      if (!to.Pull(spec.name, absl::MakeConstSpan(keys->data() + i, n),
                   absl::MakeSpan(scratch), serving)
               .ok()) {
        break;
      }
    }
  }
}

// Every shard `next` shares with `old`, warmed from it.
void WarmShards(const ServingSnapshot& old, const ServingSnapshot& next,
                size_t max_keys) {
  for (size_t i = 0; i < next.shard_ids.size(); ++i) {
    for (size_t j = 0; j < old.shard_ids.size(); ++j) {
      if (old.shard_ids[j] == next.shard_ids[i]) {
        Warm(*old.stores[j], *next.stores[i], max_keys);
      }
    }
  }
}

// A partitioner per thread for multi-shard snapshots (shard/partitioner.h).
Partitioner& ThreadPartitioner() {
  thread_local Partitioner partitioner;
  return partitioner;
}

// Index into ServingSnapshot::stores of `shard`. REQUIRES: it is held.
size_t StoreIndex(const std::vector<int>& shard_ids, ServerId shard) {
  return std::lower_bound(shard_ids.begin(), shard_ids.end(), shard) -
         shard_ids.begin();
}

}  // namespace

bool ServingSnapshot::Holds(uint64_t key) const {
  if (!ring.has_value()) return true;
  return std::binary_search(shard_ids.begin(), shard_ids.end(),
                            ring->Owner(key));
}

absl::Status ServingSnapshot::Pull(absl::string_view table,
                                   absl::Span<const uint64_t> keys,
                                   absl::Span<float> out) const {
  PullOptions serving;
  serving.serving = true;
  if (stores.size() == 1) return stores[0]->Pull(table, keys, out, serving);
  PSDB_ASSIGN_OR_RETURN(TableSpec spec, GetTable(table));
  const size_t dim = static_cast<size_t>(spec.dim);
  if (out.size() != keys.size() * dim) {
    return absl::InvalidArgumentError(absl::StrCat(
        "table ", table, ": pull of ", keys.size(), " keys of dim ", dim,
        " needs ", keys.size() * dim, " output floats, got ", out.size()));
  }
  Partitioner& partitioner = ThreadPartitioner();
  PSDB_RETURN_IF_ERROR(partitioner.Partition(*ring, keys));
  std::vector<float> sent(partitioner.num_sent() * dim);
  for (uint32_t p : partitioner.nonempty_parts()) {
    const size_t i = StoreIndex(shard_ids, partitioner.part_server(p));
    const absl::Span<const uint64_t> part = partitioner.part_keys(p);
    PSDB_RETURN_IF_ERROR(stores[i]->Pull(
        table, part,
        absl::MakeSpan(sent).subspan(partitioner.part_offset(p) * dim,
                                     part.size() * dim),
        serving));
  }
  return partitioner.Scatter<float>(sent, dim, out);
}

absl::Status ServingSnapshot::PullRows(absl::string_view table,
                                       absl::Span<const uint64_t> keys,
                                       RowBatch* out) const {
  if (stores.size() == 1) return stores[0]->PullRows(table, keys, out);
  if (out == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat("table ", table, ": PullRows output is null"));
  }
  Partitioner& partitioner = ThreadPartitioner();
  PSDB_RETURN_IF_ERROR(partitioner.Partition(*ring, keys));
  // Each part's rows, then every position copied from its key's part row.
  std::vector<RowBatch> parts(partitioner.num_parts());
  std::vector<std::pair<uint32_t, uint32_t>> where(partitioner.num_sent());
  for (uint32_t p : partitioner.nonempty_parts()) {
    const size_t i = StoreIndex(shard_ids, partitioner.part_server(p));
    PSDB_RETURN_IF_ERROR(
        stores[i]->PullRows(table, partitioner.part_keys(p), &parts[p]));
    for (size_t j = 0; j < parts[p].size(); ++j) {
      where[partitioner.part_offset(p) + j] = {p, static_cast<uint32_t>(j)};
    }
  }
  PSDB_ASSIGN_OR_RETURN(TableSpec spec, GetTable(table));
  const int state_size = optim::StateSize(spec.optimizer, spec.dim);
  const size_t d = static_cast<size_t>(spec.dim);
  const size_t ss = static_cast<size_t>(state_size);
  out->Resize(spec.dim, state_size, keys.size());
  for (size_t k = 0; k < keys.size(); ++k) {
    const auto [p, j] = where[partitioner.inverse()[k]];
    const RowBatch& src = parts[p];
    std::copy_n(src.values.data() + j * d, d, out->values.data() + k * d);
    std::copy_n(src.state.data() + j * ss, ss, out->state.data() + k * ss);
    out->headers[k] = src.headers[j];
  }
  return absl::OkStatus();
}

StoreStats ServingSnapshot::Stats() const {
  std::vector<StoreStats> parts;
  for (const auto& store : stores) parts.push_back(store->Stats());
  return MergeStoreStats(parts);
}

class CheckpointFollower::Impl {
 public:
  explicit Impl(const FollowerOptions& options)
      : options_(options), retire_(std::make_shared<RetireQueue>()) {}

  ~Impl() {
    watcher_.reset();  // no more wake-ups
    {
      absl::MutexLock l(&retire_->mu);
      retire_->stop = true;
    }
    if (thread_.joinable()) thread_.join();
    std::vector<ServingSnapshot*> left;
    {
      absl::MutexLock l(&retire_->mu);
      retire_->closed = true;
      left.swap(retire_->queue);
    }
    for (ServingSnapshot* s : left) delete s;
    absl::MutexLock l(&mu_);
    current_.reset();  // the last reference (callers released theirs)
  }

  // Wraps a snapshot so that its last holder hands it to the follow thread.
  std::shared_ptr<ServingSnapshot> Share(std::unique_ptr<ServingSnapshot> s) {
    std::shared_ptr<RetireQueue> retire = retire_;
    return std::shared_ptr<ServingSnapshot>(s.release(),
                                            [retire](ServingSnapshot* snap) {
                                              {
                                                absl::MutexLock l(&retire->mu);
                                                if (!retire->closed) {
                                                  retire->queue.push_back(snap);
                                                  return;
                                                }
                                              }
                                              delete snap;
                                            });
  }

  absl::StatusOr<bool> Poll() {
    absl::MutexLock poll_lock(&poll_mu_);
    PSDB_ASSIGN_OR_RETURN(std::vector<CheckpointRef> refs,
                          ListCheckpoints(options_.root));
    std::shared_ptr<ServingSnapshot> old = Acquire();
    std::vector<std::string> reasons;
    for (const CheckpointRef& ref : refs) {  // newest first
      if (old != nullptr && ref.seq <= old->seq) break;
      if (refused_ids_.contains(ref.id)) continue;
      const absl::Time swap_start = absl::Now();
      absl::StatusOr<std::unique_ptr<ServingSnapshot>> next =
          OpenSnapshot(options_, ref);
      if (!next.ok()) {
        const std::string why = absl::StrCat(
            "refusing checkpoint ", ref.path, ": ", next.status().ToString(),
            old != nullptr
                ? absl::StrCat("; still serving ", old->checkpoint_id)
                : "");
        Log(why);
        reasons.push_back(why);
        refused_ids_.insert(ref.id);
        absl::MutexLock l(&mu_);
        ++status_.refused;
        status_.last_refusal = why;
        continue;
      }
      if (old != nullptr) {
        AtLowPriority([&] {
          WarmShards(*old, **next, options_.warm_max_keys);
          return true;
        });
      }
      std::shared_ptr<ServingSnapshot> shared = Share(*std::move(next));
      SwapReport report;
      report.checkpoint_id = shared->checkpoint_id;
      report.step = shared->step;
      report.created = shared->created;
      report.took = absl::Now() - swap_start;
      SwapObserver observer;
      {
        absl::MutexLock l(&mu_);
        current_ = shared;
        status_.last_swap = report;
        observer = observer_;
        status_.checkpoint_id = shared->checkpoint_id;
        status_.step = shared->step;
        status_.created = shared->created;
        status_.opened = absl::Now();
        if (old != nullptr) ++status_.swaps;
      }
      Log(absl::StrCat("serving checkpoint ", shared->dir, " (step ",
                       shared->step, ", shard ",
                       absl::StrJoin(shared->shard_ids, ","), ") after ",
                       absl::FormatDuration(report.took)));
      if (observer) observer(report);
      return true;
    }
    if (old == nullptr) {
      if (refs.empty()) {
        return absl::NotFoundError(
            absl::StrCat("no complete checkpoint under ", options_.root));
      }
      return absl::FailedPreconditionError(
          absl::StrCat("no checkpoint under ", options_.root,
                       " can be served: ", absl::StrJoin(reasons, "; ")));
    }
    return false;
  }

  std::shared_ptr<ServingSnapshot> Acquire() const {
    absl::MutexLock l(&mu_);
    return current_;
  }

  ServingStatus status() const {
    absl::MutexLock l(&mu_);
    return status_;
  }

  void SetSwapObserver(SwapObserver observer) {
    absl::MutexLock l(&mu_);
    observer_ = std::move(observer);
  }

  void StartThread() {
    if (options_.interval > absl::ZeroDuration() && options_.watch_root) {
      std::shared_ptr<RetireQueue> retire = retire_;
      absl::StatusOr<std::unique_ptr<CheckpointRootWatcher>> watcher =
          CheckpointRootWatcher::Start(
              options_.root,
              [retire] {
                absl::MutexLock l(&retire->mu);
                retire->poll_now = true;
              },
              [](const std::string& line) { Log(line); });
      if (watcher.ok()) {
        watcher_ = *std::move(watcher);
      } else {
        Log(absl::StrCat("not watching ", options_.root, " (",
                         watcher.status().message(),
                         "): new checkpoints are looked for every ",
                         absl::FormatDuration(options_.interval)));
      }
    }
    thread_ = std::thread([this] { Loop(); });
  }

 private:
  // Closes retired snapshots as they come and polls every interval and
  // whenever the root watcher says a manifest was renamed in.
  void Loop() {
    const bool follow = options_.interval > absl::ZeroDuration();
    absl::Time next_poll =
        follow ? absl::Now() + options_.interval : absl::InfiniteFuture();
    while (true) {
      std::vector<ServingSnapshot*> retired;
      bool poll_now = false;
      {
        absl::MutexLock l(&retire_->mu);
        retire_->mu.AwaitWithDeadline(
            absl::Condition(&RetireQueue::Wake, retire_.get()), next_poll);
        if (retire_->stop) return;
        retired.swap(retire_->queue);
        poll_now = std::exchange(retire_->poll_now, false);
      }
      if (!retired.empty()) {
        // Closing frees a whole memory tier and a RocksDB instance.
        AtLowPriority([&] {
          for (ServingSnapshot* s : retired) delete s;
          return true;
        });
      }
      if (poll_now || absl::Now() >= next_poll) {
        absl::StatusOr<bool> polled = Poll();
        if (!polled.ok()) Log(polled.status().ToString());
        next_poll = absl::Now() + options_.interval;
      }
    }
  }

  const FollowerOptions options_;
  const std::shared_ptr<RetireQueue> retire_;
  absl::Mutex poll_mu_;  // one Poll at a time
  absl::flat_hash_set<std::string> refused_ids_ ABSL_GUARDED_BY(poll_mu_);
  mutable absl::Mutex mu_;
  std::shared_ptr<ServingSnapshot> current_ ABSL_GUARDED_BY(mu_);
  ServingStatus status_ ABSL_GUARDED_BY(mu_);
  SwapObserver observer_ ABSL_GUARDED_BY(mu_);
  std::thread thread_;
  // Null when not following, watch_root is off or inotify is unavailable.
  std::unique_ptr<CheckpointRootWatcher> watcher_;
};

absl::StatusOr<std::unique_ptr<CheckpointFollower>> CheckpointFollower::Start(
    const FollowerOptions& options) {
  if (options.root.empty()) {
    return absl::InvalidArgumentError("serving: the checkpoint root is empty");
  }
  if (options.shard_id < 0 && options.shard_id != kAllShards) {
    return absl::InvalidArgumentError(absl::StrCat(
        "serving: shard id ", options.shard_id, " (use kAllShards for all)"));
  }
  if (options.interval < absl::ZeroDuration()) {
    return absl::InvalidArgumentError("serving: negative follow interval");
  }
  auto impl = std::make_unique<Impl>(options);
  PSDB_RETURN_IF_ERROR(impl->Poll().status());
  impl->StartThread();
  return std::unique_ptr<CheckpointFollower>(
      new CheckpointFollower(std::move(impl)));
}

CheckpointFollower::CheckpointFollower(std::unique_ptr<Impl> impl)
    : impl_(std::move(impl)) {}
CheckpointFollower::~CheckpointFollower() = default;

std::shared_ptr<ServingSnapshot> CheckpointFollower::Acquire() const {
  return impl_->Acquire();
}

absl::StatusOr<bool> CheckpointFollower::Poll() { return impl_->Poll(); }

ServingStatus CheckpointFollower::status() const { return impl_->status(); }

void CheckpointFollower::SetSwapObserver(SwapObserver observer) {
  impl_->SetSwapObserver(std::move(observer));
}

}  // namespace psdb::rpc
