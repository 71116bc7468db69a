"""The same calls through local: and through 2 real ps-server processes
(servers: URL) give bit-identical rows; a stopped cluster is a
ConnectionError."""

import numpy as np
import pytest

import psdb
from psdb_testing import Cluster


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    c = Cluster(tmp_path_factory.mktemp("cluster"), 2)
    yield c
    c.stop()


TABLES = [
    dict(name="ada", dim=8, optimizer="adagrad", learning_rate=0.05, seed=7),
    dict(name="adam", dim=4, optimizer="adam", learning_rate=0.01, seed=8),
    dict(name="ftrl", dim=1, optimizer="ftrl", learning_rate=0.05, l1=0.001, l2=0.01, seed=9),
]


def train(client):
    """Creates the tables and runs 10 steps of pulls and pushes of random
    batches with repeated ids; returns every row touched, with state."""
    rng = np.random.default_rng(1)
    touched = {}
    for spec in TABLES:
        client.create_table(**spec)
        touched[spec["name"]] = set()
    for step in range(1, 11):
        for spec in TABLES:
            ids = rng.zipf(1.3, 300).astype(np.uint64)
            rows = client.pull(spec["name"], ids)
            grads = (rng.standard_normal(rows.shape) * 0.1).astype(np.float32) + rows
            client.push(spec["name"], ids, grads, step=step)
            touched[spec["name"]].update(ids.tolist())
    return {name: client.pull_rows(name, np.array(sorted(ids), dtype=np.uint64))
            for name, ids in touched.items()}


def test_servers_and_local_give_bit_identical_rows(cluster, tmp_path):
    with psdb.open(f"local:{tmp_path / 'local'}") as local:
        expected = train(local)
    with psdb.open(cluster.url, call_timeout_s=60) as remote:
        got = train(remote)
        assert sorted(s.name for s in remote.list_tables()) == ["ada", "adam", "ftrl"]
        with pytest.raises(KeyError, match="nope"):
            remote.pull("nope", np.array([1], dtype=np.uint64))
        with pytest.raises(ValueError):
            remote.push("ada", np.array([1], dtype=np.uint64),
                        np.full((1, 8), np.nan, dtype=np.float32))
    for name, rows in expected.items():
        for field in ("values", "state", "update_count", "last_update_step"):
            np.testing.assert_array_equal(getattr(got[name], field), getattr(rows, field),
                                          err_msg=f"{name}.{field}")


def test_a_stopped_cluster_is_a_connection_error(tmp_path):
    c = Cluster(tmp_path, 2)
    with psdb.open(c.url, call_timeout_s=5, max_attempts=2, initial_backoff_s=0.05) as remote:
        remote.create_table("t", 4)
        c.stop()
        with pytest.raises(ConnectionError):
            remote.pull("t", np.array([1, 2, 3], dtype=np.uint64))


def test_a_table_recreated_by_another_client_is_pulled_with_its_new_dim(cluster):
    ids = np.array([1, 2], dtype=np.uint64)
    with psdb.open(cluster.url) as one, psdb.open(cluster.url) as two:
        one.create_table("re", 4)
        assert one.pull("re", ids).shape == (2, 4)
        two.drop_table("re")
        two.create_table("re", 8)
        assert one.pull("re", ids).shape == (2, 8)
        one.drop_table("re")
