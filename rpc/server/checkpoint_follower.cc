#include "rpc/server/checkpoint_follower.h"

#include <pthread.h>
#include <sched.h>

#include <algorithm>
#include <cstdio>
#include <optional>
#include <thread>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/mutex.h"
#include "checkpoint/file_verify.h"
#include "checkpoint/verify.h"
#include "manifest/manifest.h"
#include "psdb/checkpoint_reader.h"
#include "rocksdb/db.h"
#include "rpc/server/lay_over.h"
#include "rpc/server/root_watcher.h"
#include "store/counting_file_system.h"
#include "store/file_io_rocksdb.h"
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

// A checkpoint verified and opened, before it is swapped in.
struct Opened {
  std::unique_ptr<ServingSnapshot> snap;
  // Every read of its files goes through it: the swap's bytes.
  std::shared_ptr<internal::CountingFileSystem> fs;
  SwapReport report;
  // Every file of the shards verified (the ones later swaps may reuse).
  absl::flat_hash_set<ckpt::FileId> files;
};

// The whole checkpoint verified (checkpoint/verify.h, row counts
// included): the first one a replica serves, or one that cannot be
// verified file by file (manifest format 1). Its files are recorded.
absl::Status VerifyWhole(const CheckpointRef& ref, Opened* out,
                         ckpt::VerifiedFiles* verified) {
  PSDB_ASSIGN_OR_RETURN(std::unique_ptr<ckpt::CheckpointReader> reader,
                        ckpt::CheckpointReader::Open(ref.path, out->fs));
  PSDB_ASSIGN_OR_RETURN(ckpt::VerifyReport report,
                        AtLowPriority([&] { return ckpt::Verify(*reader); }));
  if (!report.ok()) {
    return absl::DataLossError(
        absl::StrCat("verify found ", report.error_count, " error(s), first: ",
                     report.errors.empty() ? "?" : report.errors.front()));
  }
  const v1::Manifest& m = reader->manifest();
  for (int i = 0; i < m.shards_size(); ++i) {
    out->report.files_verified += m.shards(i).files_size();
    for (const v1::ShardFile& f : m.shards(i).files()) {
      out->report.bytes_verified += f.size();
    }
    if (m.format_version() >= kManifestShardFilesVersion) {
      PSDB_RETURN_IF_ERROR(
          verified->AddShard(out->fs, m, i, ref.path, &out->files));
    }
  }
  out->report.rows_verified = report.rows;
  return absl::OkStatus();
}

// Verifies the checkpoint and opens the shard(s) served read-only: each
// laid over the base `old` serves it on when it can, else opened whole
// (see the header). Once `verified` holds files, only the served shards'
// files it does not hold are read (checkpoint/file_verify.h); the first
// checkpoint is verified whole.
absl::StatusOr<Opened> OpenSnapshot(const FollowerOptions& options,
                                    const CheckpointRef& ref,
                                    const ServingSnapshot* old,
                                    ckpt::VerifiedFiles* verified) {
  Opened out;
  out.fs =
      std::make_shared<internal::CountingFileSystem>(options.store.file_system);
  PSDB_ASSIGN_OR_RETURN(v1::Manifest m,
                        ReadManifest(ref.path, *internal::FileIoOver(out.fs)));
  auto snap = std::make_unique<ServingSnapshot>();
  snap->checkpoint_id = ref.id;
  snap->dir = ref.path;
  snap->seq = ref.seq;
  snap->step = m.step();
  snap->created = absl::FromUnixMicros(m.created_unix_micros());
  for (const v1::TableManifest& t : m.tables()) {
    PSDB_ASSIGN_OR_RETURN(TableSpec spec, TableSpecFromProto(t.spec()));
    absl::StrAppend(&snap->specs_key, TableSpecToJson(spec), "\n");
    snap->table_steps[spec.name] = t.step();
  }
  snap->ring_key = m.ring().SerializeAsString();
  std::vector<std::pair<int, int>> served;  // (shard id, manifest index)
  for (int i = 0; i < m.shards_size(); ++i) {
    if (options.shard_id == kAllShards ||
        m.shards(i).shard_id() == options.shard_id) {
      served.emplace_back(m.shards(i).shard_id(), i);
    }
  }
  if (served.empty()) {
    return absl::NotFoundError(absl::StrCat("checkpoint ", ref.path,
                                            " has no shard ", options.shard_id,
                                            " (", m.shards_size(), " shards)"));
  }
  std::sort(served.begin(), served.end());
  if (m.shards_size() > 1) {
    const std::string where = absl::StrCat(ref.path, "/", kManifestFileName);
    if (m.ring().server_ids_size() == 0) {
      return absl::DataLossError(
          absl::StrCat(where, ": ", m.shards_size(),
                       " shards but the manifest records no ring to route "
                       "keys by"));
    }
    PSDB_ASSIGN_OR_RETURN(snap->ring, ckpt::RingFromManifest(m.ring(), where));
  }
  const uint64_t max_delta = options.max_delta_bytes > 0
                                 ? options.max_delta_bytes
                                 : options.store.memory_budget_bytes / 4;
  const bool whole =
      verified->size() == 0 || m.format_version() < kManifestShardFilesVersion;
  if (whole) PSDB_RETURN_IF_ERROR(VerifyWhole(ref, &out, verified));
  // Verifies shard `index`'s files not verified before but those named in
  // `skip`, keeping their rows when asked. A shard is checked twice when it
  // could not be laid over after all: its known files count once.
  std::vector<int> checked_once;
  auto check = [&](int index, bool keep_rows,
                   absl::flat_hash_set<std::string> skip,
                   ckpt::FileVerifyReport* report) {
    ckpt::FileVerifyOptions verify;
    verify.ring = snap->ring.has_value() ? &*snap->ring : nullptr;
    verify.keep_rows = keep_rows;
    verify.max_row_bytes = max_delta;
    verify.skip = std::move(skip);
    PSDB_RETURN_IF_ERROR(AtLowPriority([&] {
      return ckpt::VerifyShardFiles(out.fs, m, index, ref.path, verify,
                                    verified, report);
    }));
    out.report.files_verified += report->files_verified;
    out.report.bytes_verified += report->bytes_verified;
    if (std::find(checked_once.begin(), checked_once.end(), index) ==
        checked_once.end()) {
      out.report.files_reused += report->files_reused;
      checked_once.push_back(index);
    }
    out.report.rows_verified += report->rows_verified;
    out.files.insert(report->ids.begin(), report->ids.end());
    return absl::OkStatus();
  };
  StoreOptions store_options = options.store;
  store_options.file_system = out.fs;
  out.report.delta = old != nullptr;
  for (const auto& [shard_id, index] : served) {
    snap->shard_ids.push_back(shard_id);
    PSDB_ASSIGN_OR_RETURN(std::vector<TableFile> files,
                          TableFiles(m, index, ref.path, *verified));
    absl::Status laid = absl::FailedPreconditionError(
        whole ? "verified whole" : "the first checkpoint served");
    size_t j = 0;  // the shard's index in `old`
    if (old != nullptr && !whole) {
      j = std::find(old->shard_ids.begin(), old->shard_ids.end(), shard_id) -
          old->shard_ids.begin();
      if (j == old->shard_ids.size()) {
        laid = absl::FailedPreconditionError("a shard not served before");
      } else if (old->specs_key != snap->specs_key ||
                 old->ring_key != snap->ring_key) {
        laid = absl::FailedPreconditionError("its tables or ring changed");
      } else {
        absl::StatusOr<LayPlan> plan = PlanLayOver(old->bases[j], files);
        laid = plan.status();
        if (plan.ok()) {
          ckpt::FileVerifyReport checked;
          PSDB_RETURN_IF_ERROR(check(index, true, plan->skip, &checked));
          absl::StatusOr<std::shared_ptr<const DeltaRows>> delta = LayOver(
              *plan, checked, *verified, old->deltas[j].get(), max_delta);
          laid = delta.status();
          if (delta.ok()) {
            out.report.files_skipped += checked.files_skipped;
            snap->stores.push_back(old->stores[j]);
            ServingSnapshot::Base base = old->bases[j];
            base.files.clear();
            for (const TableFile& f : files) base.files.insert(f.id);
            base.seen_max = plan->seen_max;
            snap->bases.push_back(std::move(base));
            out.report.delta_rows += (*delta)->rows();
            out.report.delta_bytes += (*delta)->bytes();
            snap->deltas.push_back(*std::move(delta));
            continue;
          }
        }
      }
    }
    // Opened whole: every file it has is verified first.
    if (!whole) {
      ckpt::FileVerifyReport checked;
      PSDB_RETURN_IF_ERROR(check(index, false, {}, &checked));
    }
    out.report.delta = false;
    if (old != nullptr) {
      Log(absl::StrCat("checkpoint ", ref.path, " shard ", shard_id,
                       " opened whole: ", laid.message()));
    }
    PSDB_ASSIGN_OR_RETURN(
        std::unique_ptr<Store> store,
        Store::OpenCheckpoint(store_options, ref.path, shard_id,
                              Store::ShardFileCheck::kAlreadyChecked));
    snap->stores.push_back(std::move(store));
    snap->deltas.push_back(nullptr);
    snap->bases.push_back(BaseOf(ref.id, files));
  }
  out.snap = std::move(snap);
  return out;
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
      if (old.shard_ids[j] == next.shard_ids[i] &&
          old.stores[j] != next.stores[i]) {  // a new base
        Warm(*old.stores[j], *next.stores[i], max_keys);
      }
    }
  }
}

}  // namespace

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
    held_.clear();  // the last references (callers released theirs)
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
      absl::StatusOr<Opened> next =
          OpenSnapshot(options_, ref, old.get(), &verified_);
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
          WarmShards(*old, *next->snap, options_.warm_max_keys);
          return true;
        });
      }
      // Later checkpoints share files with this one, not with older ones.
      verified_.RetainOnly(next->files);
      SwapReport report = next->report;
      std::shared_ptr<ServingSnapshot> shared = Share(std::move(next->snap));
      report.checkpoint_id = shared->checkpoint_id;
      report.step = shared->step;
      report.created = shared->created;
      report.took = absl::Now() - swap_start;
      report.bytes_read = next->fs->bytes_read();
      SwapObserver observer;
      std::vector<std::shared_ptr<ServingSnapshot>> dropped;
      {
        absl::MutexLock l(&mu_);
        held_.insert(held_.begin(), shared);
        while (held_.size() > static_cast<size_t>(options_.serve_versions)) {
          // Released outside the lock: the last reference queues it for
          // the follow thread to close.
          dropped.push_back(std::move(held_.back()));
          held_.pop_back();
        }
        status_.last_swap = report;
        observer = observer_;
        status_.checkpoint_id = shared->checkpoint_id;
        status_.step = shared->step;
        status_.created = shared->created;
        status_.opened = absl::Now();
        if (old != nullptr) ++status_.swaps;
      }
      Log(absl::StrCat(
          "serving checkpoint ", shared->dir, " (step ", shared->step,
          ", shard ", absl::StrJoin(shared->shard_ids, ","), ") after ",
          absl::FormatDuration(report.took), ": ", report.files_verified,
          " files (", report.bytes_verified, " bytes, ", report.rows_verified,
          " rows) verified, ", report.files_reused, " known, ",
          report.files_skipped, " skipped, ", report.bytes_read, " bytes read",
          report.delta
              ? absl::StrCat(", ", report.delta_rows, " rows over its base")
              : ""));
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
    return held_.empty() ? nullptr : held_.front();
  }

  absl::StatusOr<std::shared_ptr<ServingSnapshot>> Acquire(
      absl::string_view checkpoint_id) const {
    absl::MutexLock l(&mu_);
    for (const auto& snap : held_) {
      if (snap->checkpoint_id == checkpoint_id) return snap;
    }
    std::vector<std::string> ids;
    for (const auto& snap : held_) ids.push_back(snap->checkpoint_id);
    return absl::NotFoundError(absl::StrCat(
        "version ", checkpoint_id, " is not held by this replica (",
        options_.root, "); it holds ", absl::StrJoin(ids, ", ")));
  }

  std::vector<ServedVersion> HeldVersions() const {
    absl::MutexLock l(&mu_);
    std::vector<ServedVersion> out;
    for (const auto& snap : held_) {
      out.push_back({snap->checkpoint_id, snap->step, snap->seq});
    }
    return out;
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
  // Files verified by earlier swaps (those of the newest one served).
  ckpt::VerifiedFiles verified_ ABSL_GUARDED_BY(poll_mu_);
  mutable absl::Mutex mu_;
  // The versions served, newest first (front: the current one); at most
  // options_.serve_versions.
  std::vector<std::shared_ptr<ServingSnapshot>> held_ ABSL_GUARDED_BY(mu_);
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
  if (options.serve_versions < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("serving: serve_versions ", options.serve_versions,
                     " (at least 1: the checkpoint served)"));
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

absl::StatusOr<std::shared_ptr<ServingSnapshot>> CheckpointFollower::Acquire(
    absl::string_view checkpoint_id) const {
  return impl_->Acquire(checkpoint_id);
}

std::vector<ServedVersion> CheckpointFollower::HeldVersions() const {
  return impl_->HeldVersions();
}

absl::StatusOr<bool> CheckpointFollower::Poll() { return impl_->Poll(); }

ServingStatus CheckpointFollower::status() const { return impl_->status(); }

void CheckpointFollower::SetSwapObserver(SwapObserver observer) {
  impl_->SetSwapObserver(std::move(observer));
}

}  // namespace psdb::rpc
