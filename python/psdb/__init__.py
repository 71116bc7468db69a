"""psdb: a parameter store for giant recommendation embedding tables.

The same C++ core as the psdb library (embedded store, gRPC cluster client,
worker vocab cache), reached through one URL:

    import numpy as np
    import psdb

    with psdb.open("local:/tmp/psdb-data") as client:       # embedded
        client.create_table("user", 16, optimizer="adagrad", learning_rate=0.05)
        ids = np.array([3, 7, 3], dtype=np.uint64)
        rows = client.pull("user", ids)                    # (3, 16) float32
        client.push("user", ids, np.ones_like(rows))       # server-side Adagrad

    psdb.open("servers:h1:p1,h2:p2")   # a static list of ps-server processes
    psdb.open("servers:h1:p1|h2:p2,h3:p3|h4:p4")  # read-only replicas per shard
    psdb.open("scheduler:host:port")   # a cluster formed by ps-scheduler
    psdb.open("scheduler:h1:p1,h2:p2") # several schedulers on one etcd

Arrays: ids are any 1-D integer array (uint64 or int64; C-contiguous ones
are used in place, others converted); grads and `out` are float32 (n, dim)
C-contiguous. The GIL is released during every call, so Python threads
sharing a client overlap.

Errors are exceptions carrying psdb's message: invalid arguments and
out-of-range values -> ValueError; unknown table (not found) -> KeyError;
unavailable server or deadline exceeded -> ConnectionError; data loss ->
psdb.DataLossError; failed precondition (e.g. a data directory locked by
another process) -> psdb.FailedPreconditionError, a RuntimeError; anything
else -> RuntimeError. A failed call changes nothing.
"""

import os as _os

# The build tree links the .py files here from python/psdb/; a module added
# there since the last build is still found through the source directory.
_source_dir = _os.path.dirname(_os.path.realpath(__file__))
if _source_dir not in __path__:
    __path__.append(_source_dir)

from psdb._psdb import (  # noqa: E402  (after the __path__ set-up)
    Client,
    DataLossError,
    FailedPreconditionError,
    Rows,
    TableSpec,
    Version,
    VocabCache,
    criteo_keys,
)
from psdb import _psdb  # noqa: E402
# Generated from the file VERSION by the build (python/CMakeLists.txt), as
# the C++ headers' psdb/version.h is.
from psdb._version import __version__  # noqa: E402


def open(url, **options):  # noqa: A001  (psdb.open, like the C++ factory)
    """Opens a psdb client for `url` and returns a psdb.Client.

    url: "local:DIR" (an embedded store under DIR), "servers:h:p,..." (a
    static list of ps-server processes; "a|b" names read-only serving
    replicas of one shard: reads fail over between them, writes are
    refused) or "scheduler:HOST:PORT" (several, "scheduler:h1:p1,h2:p2",
    for schedulers sharing etcd: calls fail over between them).

    Options for local: URLs (StoreOptions, psdb/store.h):
      memory_budget_bytes, eviction ("clock" | "sampled_lru"),
      index_stripes, max_batch_keys, background_eviction,
      rocksdb_block_cache_bytes, create_if_missing, restore_from, shard_id.
    Options for servers: and scheduler: URLs (RemoteClientOptions,
    rpc/client/remote_client.h; durations in seconds):
      call_timeout_s, replica_attempt_timeout_s, replica_avoid_time_s,
      max_attempts, initial_backoff_s, max_backoff_s,
      max_batch_keys, push_to_every_server, worker_id, tls_ca_file,
      tls_cert_file, tls_key_file, tls_server_name_override, tls_insecure.
    Omitted options keep the C++ defaults. An unknown option, or one that
    does not apply to the URL's scheme, is a ValueError.

    The client is a context manager (close() on exit); any call after
    close() raises ValueError("client is closed").

    Client methods:
      create_table(name, dim, *, optimizer="sgd", learning_rate=..., ...)
      drop_table(name); list_tables() -> [TableSpec]; get_table(name)
      pull(table, ids, *, out=None, serving=False, version=None,
          return_version=False) -> float32 (n, dim), or (rows, Version)
      pull_tables({table: ids}, *, serving=False, version=None,
          return_version=False) -> {table: float32 (n, dim)}, or
          ({...}, Version): every row from one version
      push(table, ids, grads, *, step=None, worker_id=None)
      pull_rows(table, ids) -> Rows; put_rows(table, ids, rows)
      checkpoint(dir, *, keep_last=None) -> dict(path, step, rows_flushed,
          rows_expired, duration_s)
      stats() -> dict(tables={name: {...TableStats fields}},
          memory_budget_bytes, memory_used_bytes, disk_running_compactions,
          checkpoints, last_checkpoint_duration_s, total_checkpoint_duration_s)
      close()
    """
    return _psdb.open(url, **options)


__all__ = [
    "Client",
    "DataLossError",
    "FailedPreconditionError",
    "Rows",
    "TableSpec",
    "Version",
    "VocabCache",
    "criteo_keys",
    "open",
]
