"""psdb.Client against an embedded store (local: URLs): values, arrays,
errors and threads."""

import numpy as np
import pytest

import psdb


@pytest.fixture
def client(tmp_path):
    with psdb.open(f"local:{tmp_path / 'data'}") as c:
        yield c


def test_sgd_round_trip_is_exact(client):
    client.create_table("t", 4, optimizer="sgd", learning_rate=0.5)
    ids = np.array([1, 2, 1], dtype=np.uint64)
    before = client.pull("t", ids)
    assert before.dtype == np.float32 and before.shape == (3, 4)
    grads = np.arange(12, dtype=np.float32).reshape(3, 4)
    client.push("t", ids, grads)
    after = client.pull("t", ids)
    # Duplicates are summed: key 1 gets rows 0 and 2.
    lr = np.float32(0.5)
    np.testing.assert_array_equal(after[0], before[0] - lr * (grads[0] + grads[2]))
    np.testing.assert_array_equal(after[1], before[1] - lr * grads[1])
