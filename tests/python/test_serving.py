"""Serving from Python: a checkpoint written through psdb.open("local:...")
served by two ps-server --serve_from replicas behind one "a|b" URL. Reads
equal the checkpoint's rows, writes are refused, and reads keep working
after one replica is SIGKILLed."""

import time

import numpy as np
import pytest

import psdb
from psdb_testing import Replica


def test_replicas_serve_the_checkpoint_fail_over_and_refuse_writes(tmp_path):
    ids = np.arange(1, 201, dtype=np.uint64)
    with psdb.open(f"local:{tmp_path / 'train'}") as train:
        train.create_table("emb", 8, optimizer="adagrad", learning_rate=0.1, seed=3)
        grads = np.linspace(-1, 1, ids.size * 8, dtype=np.float32).reshape(-1, 8)
        train.push("emb", ids, grads, step=1)
        train.checkpoint(str(tmp_path / "ckpt"))
        want = train.pull("emb", ids, serving=True)

    replicas = [Replica(tmp_path / "ckpt") for _ in range(2)]
    try:
        with psdb.open(f"servers:{replicas[0].address}") as one:
            with pytest.raises(psdb.FailedPreconditionError,
                               match="read-only serving replica"):
                one.push("emb", ids, grads, step=2)
            assert one.stats()["tables"]["emb"]["step"] == 1

        url = "servers:" + "|".join(r.address for r in replicas)
        with psdb.open(url, replica_attempt_timeout_s=1) as client:
            np.testing.assert_array_equal(client.pull("emb", ids), want)
            with pytest.raises(psdb.FailedPreconditionError, match="read-only"):
                client.push("emb", ids, grads, step=2)
            replicas[0].kill()
            for _ in range(20):
                np.testing.assert_array_equal(client.pull("emb", ids), want)
    finally:
        for r in replicas:
            r.stop()


def test_versions_and_consistent_reads(tmp_path):
    """pull(return_version=True), pull(version=V) and pull_tables over a
    replica holding two checkpoints (--serve_versions default 2): every row
    of both tables is the step of the version returned."""
    ids = np.arange(1, 101, dtype=np.uint64)
    blocks = np.arange(0, 4, dtype=np.uint64)
    root = tmp_path / "ckpt"
    replica = None
    with psdb.open(f"local:{tmp_path / 'train'}") as train:
        for name, dim in (("emb", 8), ("dense", 4)):
            train.create_table(name, dim, optimizer="sgd", learning_rate=1.0,
                               initializer="zeros")

        def step(s):  # SGD, lr 1, from zeros: a -1 gradient makes every row s
            train.push("emb", ids, -np.ones((ids.size, 8), np.float32), step=s)
            train.push("dense", blocks, -np.ones((blocks.size, 4), np.float32),
                       step=s)
            train.checkpoint(str(root))

        step(1)
        rows, version = train.pull("emb", ids, return_version=True)
        assert version is None  # an embedded store has no versions
        np.testing.assert_array_equal(rows, np.ones((ids.size, 8), np.float32))
        with pytest.raises(psdb.FailedPreconditionError, match="no checkpoint versions"):
            train.pull("emb", ids, version="ckpt-000000000001-000001")
        try:
            replica = Replica(root, "--follow_interval_s=1")
            with psdb.open(f"servers:{replica.address}") as client:
                rows, v1 = client.pull("emb", ids, return_version=True)
                assert (v1.step, str(v1)) == (1, v1.checkpoint_id)
                np.testing.assert_array_equal(rows, np.ones((ids.size, 8)))
                step(2)
                deadline = time.monotonic() + 60
                while client.pull("emb", ids, return_version=True)[1].step != 2:
                    assert time.monotonic() < deadline, "replica never took step 2"
                    time.sleep(0.05)
                np.testing.assert_array_equal(client.pull("emb", ids),
                                              np.full((ids.size, 8), 2.0))
                tables, v2 = client.pull_tables({"emb": ids, "dense": blocks},
                                                return_version=True)
                assert v2.step == 2 and v2.seq > v1.seq and v2 != v1
                assert list(tables) == ["emb", "dense"]
                np.testing.assert_array_equal(tables["emb"], np.full((ids.size, 8), 2.0))
                np.testing.assert_array_equal(tables["dense"], np.full((4, 4), 2.0))
                # The version before, by psdb.Version and by id.
                old = client.pull_tables({"emb": ids, "dense": blocks}, version=v1)
                np.testing.assert_array_equal(old["emb"], np.ones((ids.size, 8)))
                np.testing.assert_array_equal(old["dense"], np.ones((4, 4)))
                np.testing.assert_array_equal(
                    client.pull("emb", ids, version=v1.checkpoint_id),
                    np.ones((ids.size, 8)))
                rows, v = client.pull("dense", blocks, version=v1, return_version=True)
                assert v == v1
                np.testing.assert_array_equal(rows, np.ones((4, 4)))
                with pytest.raises(KeyError,
                                   match="version ckpt-000000000009-000009 is not held"):
                    client.pull("emb", ids, version="ckpt-000000000009-000009")
        finally:
            if replica is not None:
                replica.stop()
