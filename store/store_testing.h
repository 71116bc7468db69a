// Test hooks of psdb_store (internal): lets a crash test stop a process at a
// named stage of Checkpoint(). Production code never sets a hook; an unset
// hook costs one atomic load per stage.
//
// Stages, in order: "start", "dir_created", "rows_flushed",
// "rocksdb_checkpoint_done", "manifest_written", "pruned_one" (once per
// deleted old checkpoint), "done".
//
// Thread-safety: SetCheckpointHookForTesting may be called at any time.
#ifndef PSDB_STORE_STORE_TESTING_H_
#define PSDB_STORE_STORE_TESTING_H_

namespace psdb::internal {

using CheckpointHook = void (*)(const char* stage);
void SetCheckpointHookForTesting(CheckpointHook hook);
void RunCheckpointHook(const char* stage);

}  // namespace psdb::internal

#endif  // PSDB_STORE_STORE_TESTING_H_
