#include "rpc/server/root_watcher.h"

#include <poll.h>
#include <sys/eventfd.h>
#include <sys/inotify.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <system_error>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "manifest/manifest.h"

namespace psdb::rpc {
namespace {

namespace fs = std::filesystem;

// The root: checkpoint directories arriving or leaving, and the root itself
// going away.
constexpr uint32_t kRootMask = IN_CREATE | IN_MOVED_TO | IN_MOVED_FROM |
                               IN_DELETE_SELF | IN_MOVE_SELF | IN_ONLYDIR;
// A checkpoint directory: its manifest renamed in (WriteManifestAtomic) or
// written and closed (a writer that does not rename; IN_CREATE would fire
// while the file is still empty).
constexpr uint32_t kDirMask = IN_MOVED_TO | IN_CLOSE_WRITE | IN_ONLYDIR;
// The nearest existing ancestor of a root that does not exist yet.
constexpr uint32_t kAncestorMask =
    IN_CREATE | IN_MOVED_TO | IN_DELETE_SELF | IN_MOVE_SELF | IN_ONLYDIR;
constexpr uint32_t kSelfGone = IN_DELETE_SELF | IN_MOVE_SELF | IN_IGNORED;

std::string ErrnoText(int err) {
  std::string text = std::strerror(err);
  if (err == ENOSPC) {
    absl::StrAppend(&text, " (the fs.inotify.max_user_watches limit)");
  }
  return text;
}

bool IsCheckpointName(const std::string& name) {
  int64_t step;
  uint64_t seq;
  return ParseCheckpointId(name, &step, &seq);
}

}  // namespace

absl::StatusOr<std::unique_ptr<CheckpointRootWatcher>>
CheckpointRootWatcher::Start(std::string root, ChangeFn on_change, LogFn log) {
  const int inotify_fd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
  if (inotify_fd < 0) {
    return absl::UnavailableError(
        absl::StrCat("inotify_init1: ", ErrnoText(errno)));
  }
  const int stop_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (stop_fd < 0) {
    const int err = errno;
    close(inotify_fd);
    return absl::UnavailableError(absl::StrCat("eventfd: ", ErrnoText(err)));
  }
  std::error_code ec;
  fs::path absolute = fs::absolute(root, ec);
  if (ec) absolute = root;
  std::string path = absolute.lexically_normal().string();
  // "/a/b/" normalizes to itself; its parent would be "/a/b".
  if (path.size() > 1 && path.back() == '/') path.pop_back();
  std::unique_ptr<CheckpointRootWatcher> watcher(
      new CheckpointRootWatcher(std::move(path), std::move(on_change),
                                std::move(log), inotify_fd, stop_fd));
  absl::StatusOr<bool> set_up = watcher->Setup();
  if (!set_up.ok()) return set_up.status();
  watcher->change_due_ = *set_up;
  watcher->thread_ = std::thread([w = watcher.get()] { w->Loop(); });
  return watcher;
}

CheckpointRootWatcher::CheckpointRootWatcher(std::string root,
                                             ChangeFn on_change, LogFn log,
                                             int inotify_fd, int stop_fd)
    : root_(std::move(root)),
      on_change_(std::move(on_change)),
      log_(std::move(log)),
      inotify_fd_(inotify_fd),
      stop_fd_(stop_fd) {}

CheckpointRootWatcher::~CheckpointRootWatcher() {
  if (thread_.joinable()) {
    const uint64_t one = 1;
    // An eventfd write of 1 cannot block or fail short of overflowing the
    // counter, which one write per watcher cannot do.
    [[maybe_unused]] const ssize_t n = write(stop_fd_, &one, sizeof(one));
    thread_.join();
  }
  close(inotify_fd_);
  close(stop_fd_);
}

void CheckpointRootWatcher::Log(const std::string& line) {
  if (log_) {
    log_(line);
  } else {
    std::fprintf(stderr, "%s\n", line.c_str());
  }
}

void CheckpointRootWatcher::PublishCount() {
  watched_dirs_.store(dirs_.size(), std::memory_order_release);
}

void CheckpointRootWatcher::Clear() {
  for (int wd : {root_wd_, ancestor_wd_}) {
    if (wd >= 0) inotify_rm_watch(inotify_fd_, wd);
  }
  for (const auto& [wd, name] : dirs_) inotify_rm_watch(inotify_fd_, wd);
  root_wd_ = ancestor_wd_ = -1;
  dirs_.clear();
  wds_.clear();
  PublishCount();
}

absl::StatusOr<bool> CheckpointRootWatcher::Setup() {
  Clear();
  std::error_code ec;
  // Bounded: each round either watches the root or an ancestor that
  // existed a moment ago; a root appearing and vanishing in a tight loop
  // could keep it going, hence the cap.
  for (int round = 0; round < 100; ++round) {
    if (fs::is_directory(root_, ec)) {
      root_wd_ = inotify_add_watch(inotify_fd_, root_.c_str(), kRootMask);
      if (root_wd_ >= 0) {
        for (const fs::directory_entry& entry :
             fs::directory_iterator(root_, ec)) {
          const std::string name = entry.path().filename().string();
          if (entry.is_directory(ec) && IsCheckpointName(name)) AddDir(name);
        }
        PublishCount();
        return true;
      }
      if (errno != ENOENT && errno != ENOTDIR) {
        return absl::UnavailableError(
            absl::StrCat("inotify_add_watch ", root_, ": ", ErrnoText(errno)));
      }
      continue;  // gone again: look for an ancestor
    }
    // Wait for the root under its nearest existing ancestor.
    fs::path child = root_;
    fs::path dir = child.parent_path();
    while (!fs::is_directory(dir, ec) && dir.has_relative_path()) {
      child = dir;
      dir = dir.parent_path();
    }
    ancestor_wd_ = inotify_add_watch(inotify_fd_, dir.c_str(), kAncestorMask);
    if (ancestor_wd_ < 0) {
      if (errno == ENOENT || errno == ENOTDIR) continue;
      return absl::UnavailableError(
          absl::StrCat("inotify_add_watch ", dir.string(), " (waiting for ",
                       root_, " to appear): ", ErrnoText(errno)));
    }
    ancestor_child_ = child.filename().string();
    // It may have appeared before the watch was in place. (A file of that
    // name is waited on too: its replacement by a directory is an
    // IN_CREATE or IN_MOVED_TO here.)
    if (!fs::is_directory(child, ec)) return true;
    inotify_rm_watch(inotify_fd_, ancestor_wd_);
    ancestor_wd_ = -1;
  }
  return absl::UnavailableError(
      absl::StrCat("cannot establish a watch on ", root_, ": it keeps moving"));
}

bool CheckpointRootWatcher::AddDir(const std::string& name) {
  const fs::path path = fs::path(root_) / name;
  const int wd = inotify_add_watch(inotify_fd_, path.c_str(), kDirMask);
  if (wd < 0) {
    // ENOENT/ENOTDIR: deleted or replaced already, nothing to watch.
    if (errno == ENOSPC && !limit_logged_) {
      limit_logged_ = true;
      Log(absl::StrCat("inotify: cannot watch ", path.string(), ": ",
                       ErrnoText(ENOSPC), "; checkpoints under ", root_,
                       " beyond it are noticed by polling only"));
    }
    return false;
  }
  // A rename within the root keeps the inode, hence the watch: drop the
  // old name.
  if (auto it = dirs_.find(wd); it != dirs_.end()) wds_.erase(it->second);
  dirs_[wd] = name;
  wds_[name] = wd;
  std::error_code ec;
  return fs::exists(path / kManifestFileName, ec);
}

void CheckpointRootWatcher::RemoveDir(const std::string& name) {
  auto it = wds_.find(name);
  if (it == wds_.end()) return;
  inotify_rm_watch(inotify_fd_, it->second);
  dirs_.erase(it->second);
  wds_.erase(it);
}

bool CheckpointRootWatcher::Drain() {
  // Room for many events; inotify never splits one across reads.
  alignas(inotify_event) char buf[64 * 1024];
  bool changed = false;
  bool rebuild = false;
  while (true) {
    const ssize_t n = read(inotify_fd_, buf, sizeof(buf));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;  // EAGAIN: drained
    for (ssize_t off = 0; off < n;) {
      const auto* ev = reinterpret_cast<const inotify_event*>(buf + off);
      off += static_cast<ssize_t>(sizeof(inotify_event) + ev->len);
      // The name is NUL-padded to its length.
      const std::string name = ev->len > 0 ? std::string(ev->name) : "";
      if ((ev->mask & IN_Q_OVERFLOW) != 0) {
        rebuild = true;
      } else if (root_wd_ >= 0 && ev->wd == root_wd_) {
        if ((ev->mask & kSelfGone) != 0) {
          rebuild = true;
        } else if ((ev->mask & IN_ISDIR) != 0 && IsCheckpointName(name)) {
          if ((ev->mask & (IN_CREATE | IN_MOVED_TO)) != 0) {
            changed |= AddDir(name);
          } else if ((ev->mask & IN_MOVED_FROM) != 0) {
            RemoveDir(name);
          }
        }
      } else if (ancestor_wd_ >= 0 && ev->wd == ancestor_wd_) {
        if ((ev->mask & kSelfGone) != 0 || name == ancestor_child_) {
          rebuild = true;
        }
      } else if (auto it = dirs_.find(ev->wd); it != dirs_.end()) {
        if ((ev->mask & IN_IGNORED) != 0) {  // the directory was deleted
          wds_.erase(it->second);
          dirs_.erase(it);
        } else if (name == kManifestFileName) {
          changed = true;
        }
      }
      // Otherwise a watch already removed (its IN_IGNORED, late events).
    }
  }
  if (rebuild) {
    absl::StatusOr<bool> set_up = Setup();
    if (!set_up.ok()) {
      Log(absl::StrCat("inotify: ", set_up.status().message(),
                       "; checkpoints under ", root_,
                       " are noticed by polling only"));
    }
    changed = true;  // events were lost or the root changed: re-list
  }
  PublishCount();
  return changed;
}

void CheckpointRootWatcher::Loop() {
  if (change_due_) on_change_();
  pollfd fds[2] = {{inotify_fd_, POLLIN, 0}, {stop_fd_, POLLIN, 0}};
  while (true) {
    const int ready = poll(fds, 2, /*timeout=*/-1);
    if (ready < 0) {
      if (errno == EINTR) continue;
      Log(absl::StrCat("inotify: poll: ", ErrnoText(errno), "; checkpoints ",
                       "under ", root_, " are noticed by polling only"));
      return;
    }
    if (fds[1].revents != 0) return;
    if ((fds[0].revents & POLLIN) != 0 && Drain()) on_change_();
  }
}

}  // namespace psdb::rpc
