// A process killed (SIGKILL) at any moment of Store::Checkpoint leaves the
// previous checkpoint intact, and both the checkpoint root and the live
// store open cleanly afterwards. The store runs in a helper process
// (store_crash_helper) that reports each stage on a pipe; the test waits on
// that report, not on time.
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "manifest/manifest.h"
#include "psdb/store.h"
#include "tests/testing/test_util.h"

extern char** environ;

namespace psdb {
namespace {

namespace fs = std::filesystem;
using ::psdb::testing::BuiltBinary;
using ::psdb::testing::ScratchDir;

// A helper process whose stdout we read.
class Helper {
 public:
  explicit Helper(std::vector<std::string> args) {
    int fds[2];
    if (pipe(fds) != 0) {
      ADD_FAILURE() << "pipe";
      return;
    }
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, fds[1], STDOUT_FILENO);
    posix_spawn_file_actions_addclose(&fa, fds[0]);
    posix_spawn_file_actions_addclose(&fa, fds[1]);
    const std::string bin = BuiltBinary("tests/store/store_crash_helper");
    args.insert(args.begin(), bin);
    std::vector<char*> argv;
    for (std::string& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    const int rc =
        posix_spawn(&pid_, bin.c_str(), &fa, nullptr, argv.data(), environ);
    posix_spawn_file_actions_destroy(&fa);
    close(fds[1]);
    fd_ = fds[0];
    if (rc != 0) {
      ADD_FAILURE() << "cannot spawn " << bin << ": " << strerror(rc);
      pid_ = -1;
    }
  }
  ~Helper() {
    if (pid_ > 0) Kill();
    if (fd_ >= 0) close(fd_);
  }

  // Waits (up to 60 s) until the helper printed a line containing `text`.
  bool WaitForLine(const std::string& text) {
    const absl::Time deadline = absl::Now() + absl::Seconds(60);
    while (absl::Now() < deadline) {
      size_t nl;
      while ((nl = buf_.find('\n')) != std::string::npos) {
        const std::string line = buf_.substr(0, nl);
        buf_.erase(0, nl + 1);
        if (absl::StrContains(line, text)) return true;
      }
      pollfd p{fd_, POLLIN, 0};
      if (poll(&p, 1, 1000) <= 0) continue;
      char tmp[256];
      const ssize_t n = read(fd_, tmp, sizeof(tmp));
      if (n <= 0) return false;  // helper exited
      buf_.append(tmp, static_cast<size_t>(n));
    }
    return false;
  }
  void Kill() {
    kill(pid_, SIGKILL);
    Wait();
  }
  int Wait() {
    int status = 0;
    waitpid(pid_, &status, 0);
    pid_ = -1;
    return status;
  }

 private:
  pid_t pid_ = -1;
  int fd_ = -1;
  std::string buf_;
};

// Restores the newest checkpoint under `root` into a fresh store and checks
// that every row equals `value`.
void ExpectCheckpointHolds(const std::string& root, float value) {
  ScratchDir restored;
  StoreOptions o;
  o.memory_budget_bytes = 1 << 20;
  o.restore_from = root;
  ASSERT_OK_AND_ASSIGN(auto store, Store::Open(o, restored.path()));
  std::vector<uint64_t> keys(100);
  for (uint64_t k = 0; k < 100; ++k) keys[k] = k;
  std::vector<float> out(400);
  ASSERT_OK(store->Pull("t", keys, absl::MakeSpan(out)));
  for (float v : out) ASSERT_EQ(v, value);
}

void ExpectLiveStoreOpensAndCheckpoints(const std::string& dir,
                                        const std::string& root) {
  StoreOptions o;
  o.memory_budget_bytes = 1 << 20;
  ASSERT_OK_AND_ASSIGN(auto store, Store::Open(o, dir));
  ASSERT_EQ(store->ListTables().size(), 1u);
  ASSERT_OK(store->Checkpoint(root, {.keep_last = 0}));
  EXPECT_TRUE(ListIncompleteCheckpoints(root)->empty());
}

class CrashAtStageTest : public ::testing::TestWithParam<const char*> {};

TEST_P(CrashAtStageTest, PreviousCheckpointSurvives) {
  const std::string stage = GetParam();
  ScratchDir dir, root;
  {
    Helper prep({dir.path(), root.path(), "prepare"});
    ASSERT_TRUE(prep.WaitForLine("OK"));
    const int st = prep.Wait();
    ASSERT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0);
  }
  ASSERT_OK_AND_ASSIGN(CheckpointRef before, LatestCheckpoint(root.path()));
  {
    Helper crash({dir.path(), root.path(), "stop-at", stage});
    ASSERT_TRUE(crash.WaitForLine("AT " + stage)) << stage;
    crash.Kill();
  }
  // The manifest is the commit point: before it the old checkpoint is the
  // newest, after it the new one is, and either restores exactly.
  const bool committed = stage == "manifest_written" || stage == "pruned_one";
  ASSERT_OK_AND_ASSIGN(CheckpointRef after, LatestCheckpoint(root.path()));
  if (committed) {
    EXPECT_GT(after.seq, before.seq);
    ExpectCheckpointHolds(root.path(), -2.0f);
  } else {
    EXPECT_EQ(after.path, before.path);
    ExpectCheckpointHolds(root.path(), -1.0f);
  }
  ExpectLiveStoreOpensAndCheckpoints(dir.path(), root.path());
}

INSTANTIATE_TEST_SUITE_P(Stages, CrashAtStageTest,
                         ::testing::Values("start", "dir_created",
                                           "rows_flushed",
                                           "rocksdb_checkpoint_done",
                                           "manifest_written", "pruned_one"));

TEST(CrashTest, KillDuringCheckpointLoop) {
  // Killed right after the third checkpoint reported, i.e. somewhere in the
  // push or checkpoint that follows: the newest complete checkpoint holds
  // exactly the state of its own step.
  ScratchDir dir, root;
  {
    Helper loop({dir.path(), root.path(), "loop"});
    ASSERT_TRUE(loop.WaitForLine("CKPT 3"));
    loop.Kill();
  }
  ASSERT_OK_AND_ASSIGN(CheckpointRef latest, LatestCheckpoint(root.path()));
  ASSERT_OK_AND_ASSIGN(v1::Manifest m, ReadManifest(latest.path));
  ASSERT_GE(m.step(), 3);
  ExpectCheckpointHolds(root.path(), -static_cast<float>(m.step()));
  ExpectLiveStoreOpensAndCheckpoints(dir.path(), root.path());
}

}  // namespace
}  // namespace psdb
