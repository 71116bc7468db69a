"""Serving from Python: a checkpoint written through psdb.open("local:...")
served by two ps-server --serve_from replicas behind one "a|b" URL. Reads
equal the checkpoint's rows, writes are refused, and reads keep working
after one replica is SIGKILLed."""

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
