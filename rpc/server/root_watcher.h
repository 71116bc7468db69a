// CheckpointRootWatcher: notices, through Linux inotify, that a checkpoint
// may have become complete under a checkpoint root, so that a serving
// replica (checkpoint_follower.h) starts on it at once instead of at its
// next polling interval.
//
// A checkpoint is complete when MANIFEST.json is renamed into <root>/<id>/
// (manifest/manifest.h). inotify is not recursive, so the watcher watches
// the root for checkpoint directories created or moved in (names that
// ParseCheckpointId accepts; others, such as a training store's own
// directory, are not watched) and each checkpoint directory for
// MANIFEST.json moved in or written and closed. `on_change` is called, on
// the watcher's thread, when
//  - MANIFEST.json is renamed into (or written and closed in) a watched
//    checkpoint directory;
//  - a checkpoint directory appears that already holds MANIFEST.json (moved
//    in whole, or completed before its watch was added);
//  - the watches were (re)established: after Start, after the root was
//    created, deleted or moved, and after the kernel's event queue
//    overflowed (IN_Q_OVERFLOW: events were lost, so anything may have
//    changed).
// It may be called when nothing new is complete (a caller re-lists the
// root); it is never skipped for a manifest rename under a watched root.
//
// A root that does not exist yet is waited for: its nearest existing
// ancestor is watched until it appears. Watches of deleted checkpoint
// directories go away with them (IN_IGNORED). When inotify_add_watch hits
// the per-user watch limit (fs.inotify.max_user_watches), the directories
// beyond it go unwatched; that is logged once, and callers keep polling as
// their safety net.
//
// The thread blocks in poll(2) on the inotify descriptor and an eventfd;
// the destructor writes the eventfd and joins, so stopping is prompt. No
// loop sleeps.
//
// Thread-safety: Start and the destructor from one thread; watched_dirs()
// from any. `on_change` and `log` run on the watcher's thread and must not
// destroy the watcher.
#ifndef PSDB_RPC_SERVER_ROOT_WATCHER_H_
#define PSDB_RPC_SERVER_ROOT_WATCHER_H_

#include <atomic>
#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"

namespace psdb::rpc {

class CheckpointRootWatcher {
 public:
  using ChangeFn = std::function<void()>;
  using LogFn = std::function<void(const std::string& line)>;

  // Watches `root` (which need not exist yet) and calls `on_change` as the
  // header says; `log` gets the lines worth an operator's eye (null:
  // stderr). Unavailable when inotify cannot be used at all
  // (inotify_init1 fails: not Linux, or the per-user instance limit) or
  // the root itself cannot be watched; the caller then polls.
  static absl::StatusOr<std::unique_ptr<CheckpointRootWatcher>> Start(
      std::string root, ChangeFn on_change, LogFn log = nullptr);
  ~CheckpointRootWatcher();
  CheckpointRootWatcher(const CheckpointRootWatcher&) = delete;
  CheckpointRootWatcher& operator=(const CheckpointRootWatcher&) = delete;

  // Checkpoint directories watched now (for tests and logs).
  size_t watched_dirs() const {
    return watched_dirs_.load(std::memory_order_acquire);
  }

 private:
  CheckpointRootWatcher(std::string root, ChangeFn on_change, LogFn log,
                        int inotify_fd, int stop_fd);

  // (Re)establishes every watch from scratch; true when it should be
  // reported as a change. Unavailable if the root exists but cannot be
  // watched.
  absl::StatusOr<bool> Setup();
  // Removes every watch (their IN_IGNORED events are then ignored).
  void Clear();
  // Watches checkpoint directory <root>/<name>; true if it holds
  // MANIFEST.json already.
  bool AddDir(const std::string& name);
  void RemoveDir(const std::string& name);
  // Reads and handles the queued events; true when on_change is due.
  bool Drain();
  void Loop();
  void Log(const std::string& line);
  void PublishCount();

  const std::string root_;
  const ChangeFn on_change_;
  const LogFn log_;
  const int inotify_fd_;
  const int stop_fd_;  // an eventfd the destructor writes
  // Touched only by Start (before the thread) and the thread.
  int root_wd_ = -1;            // the root's watch; -1 while it does not exist
  int ancestor_wd_ = -1;        // the nearest existing ancestor's, meanwhile
  std::string ancestor_child_;  // its entry on the way to the root
  absl::flat_hash_map<int, std::string> dirs_;  // wd -> checkpoint dir name
  absl::flat_hash_map<std::string, int> wds_;   // and back
  bool limit_logged_ = false;
  bool change_due_ = false;  // Setup asked for a report
  std::atomic<size_t> watched_dirs_{0};
  std::thread thread_;
};

}  // namespace psdb::rpc

#endif  // PSDB_RPC_SERVER_ROOT_WATCHER_H_
