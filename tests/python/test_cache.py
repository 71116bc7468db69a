"""psdb.VocabCache: lookups equal direct pulls, write-back + flush equals
pull + push bit for bit, push-through, prefetch, stats, errors."""

import numpy as np
import pytest

import psdb

DIM = 4


def batches(n, seed=2, size=48):
    rng = np.random.default_rng(seed)
    return [rng.zipf(1.2, size).astype(np.uint64) % 200 for _ in range(n)]


@pytest.fixture
def stores(tmp_path):
    """(cached, reference): two stores with the same tables."""
    with psdb.open(f"local:{tmp_path / 'cached'}") as cached, \
            psdb.open(f"local:{tmp_path / 'reference'}") as reference:
        for c in (cached, reference):
            c.create_table("a", DIM, optimizer="adagrad", learning_rate=0.1, seed=1)
            c.create_table("b", 2 * DIM, optimizer="sgd", learning_rate=0.2, seed=2)
        yield cached, reference


def all_rows(client, table):
    return client.pull_rows(table, np.arange(200, dtype=np.uint64))


@pytest.mark.parametrize("policy", ["lru", "lfu", "lookahead"])
@pytest.mark.parametrize("prefetch", [False, True])
def test_write_back_equals_pull_and_push(stores, policy, prefetch):
    cached, reference = stores
    steps = list(zip(batches(30, seed=3), batches(30, seed=4)))
    rng = np.random.default_rng(0)
    cache = psdb.VocabCache(cached, ["a", "b"], capacity_rows=64, policy=policy)
    if policy == "lookahead":
        for a, b in steps:
            cache.announce({"a": a, "b": b})
    for t, (a, b) in enumerate(steps):
        rows_a, rows_b = cache.lookup({"a": a, "b": b})
        assert rows_a.shape == (len(a), DIM) and rows_b.shape == (len(b), 2 * DIM)
        np.testing.assert_array_equal(rows_a, reference.pull("a", a))
        np.testing.assert_array_equal(rows_b, reference.pull("b", b))
        if prefetch and t + 1 < len(steps):
            cache.prefetch({"a": steps[t + 1][0], "b": steps[t + 1][1]})
        ga = rng.standard_normal(rows_a.shape).astype(np.float32)
        gb = rng.standard_normal(rows_b.shape).astype(np.float32)
        if t % 2:
            cache.update([ga, gb])
        else:
            cache.update({"b": gb, "a": ga})
        reference.push("a", a, ga)
        reference.push("b", b, gb)
    cache.flush()
    for table in ("a", "b"):
        got, want = all_rows(cached, table), all_rows(reference, table)
        np.testing.assert_array_equal(got.values, want.values)
        np.testing.assert_array_equal(got.state, want.state)
        np.testing.assert_array_equal(got.update_count, want.update_count)
    stats = cache.stats()
    positions = sum(len(a) for a, _ in steps)
    unique = sum(len(np.unique(a)) for a, _ in steps)
    s = stats["a"]
    assert s["table"] == "a" and s["lookups"] == positions and s["unique_ids"] == unique
    # Every position hits or is the first position of a fetched row.
    assert s["hits"] + s["misses"] == positions
    assert 0 < s["hit_rate"] < 1 and s["hit_rate"] == s["hits"] / positions
    assert s["evictions"] > 0 and s["write_backs"] >= s["evictions"]
    assert (s["prefetched"] > 0) == prefetch
    assert cache.cached_rows("a") == 64


def test_big_capacity_fetches_each_row_once(stores):
    cached, _ = stores
    steps = batches(10)
    with psdb.VocabCache(cached, ["a"], capacity_rows=1000) as cache:
        for ids in steps:
            cache.lookup({"a": ids})
            cache.release()
        s = cache.stats()["a"]
        distinct = len(np.unique(np.concatenate(steps)))
        assert s["misses"] == distinct and s["evictions"] == 0
        assert s["hits"] == sum(len(ids) for ids in steps) - distinct
        assert cache.cached_rows("a") == distinct


def test_push_through_reads_the_store(stores):
    cached, _ = stores
    cache = psdb.VocabCache(cached, ["a"], capacity_rows=128, mode="push_through")
    rng = np.random.default_rng(9)
    for ids in batches(10, seed=5):
        rows = cache.lookup([("a", ids)])[0]
        np.testing.assert_array_equal(rows, cached.pull("a", ids))
        cache.update([rng.standard_normal(rows.shape).astype(np.float32)])
    # The pushes carry the caller's step (sync servers aggregate by it).
    ids = np.array([3, 4], dtype=np.uint64)
    rows = cache.lookup({"a": ids})[0]
    cache.update({"a": np.ones_like(rows)}, step=41)
    assert cached.pull_rows("a", ids).last_update_step.tolist() == [41, 41]
    rows = cache.lookup({"a": ids})[0]
    with pytest.raises(ValueError, match="step must be >= 0"):
        cache.update({"a": np.ones_like(rows)}, step=-1)


def test_errors(stores):
    cached, _ = stores
    ids = np.arange(10, dtype=np.uint64)
    with pytest.raises(ValueError, match="policy"):
        psdb.VocabCache(cached, ["a"], capacity_rows=8, policy="fifo")
    with pytest.raises(ValueError, match="mode"):
        psdb.VocabCache(cached, ["a"], capacity_rows=8, mode="write_through")
    with pytest.raises(KeyError):
        psdb.VocabCache(cached, ["nope"], capacity_rows=8)
    cache = psdb.VocabCache(cached, ["a"], capacity_rows=8)
    with pytest.raises(RuntimeError, match="holds 8 rows"):
        cache.lookup({"a": ids})
    with pytest.raises(psdb.FailedPreconditionError):
        cache.update([np.zeros((10, DIM), dtype=np.float32)])
    with pytest.raises(ValueError, match="integer"):
        cache.lookup({"a": ids.astype(np.float32)})
    with pytest.raises(ValueError, match="pairs"):
        cache.lookup(["a"])
    rows = cache.lookup({"a": ids[:5]})[0]
    with pytest.raises(ValueError, match="float32"):
        cache.update([rows.astype(np.float64)])
    with pytest.raises(ValueError):
        cache.update([np.zeros((4, DIM), dtype=np.float32)])
    cache.update([np.zeros_like(rows)])
    cache.close()
    with pytest.raises(ValueError, match="cache is closed"):
        cache.lookup({"a": ids[:5]})


def test_closing_the_client_closes_its_caches(tmp_path):
    client = psdb.open(f"local:{tmp_path / 'd'}")
    client.create_table("a", DIM)
    cache = psdb.VocabCache(client, ["a"], capacity_rows=16)
    cache.lookup({"a": np.arange(4, dtype=np.uint64)})
    cache.prefetch({"a": np.arange(4, 12, dtype=np.uint64)})
    client.close()
    for call in (lambda: cache.lookup({"a": np.arange(4, dtype=np.uint64)}),
                 cache.flush, cache.stats):
        with pytest.raises(ValueError, match="closed"):
            call()


def test_a_cache_keeps_its_client_alive(tmp_path):
    client = psdb.open(f"local:{tmp_path / 'd'}")
    client.create_table("a", DIM)
    cache = psdb.VocabCache(client, ["a"], capacity_rows=16)
    expected = client.pull("a", np.arange(4, dtype=np.uint64))
    del client
    np.testing.assert_array_equal(cache.lookup({"a": np.arange(4, dtype=np.uint64)})[0],
                                  expected)


def test_cuda_backend_matches_the_cpu_backend(stores):
    cached, reference = stores
    try:
        gpu = psdb.VocabCache(cached, ["a"], capacity_rows=64, backend="cuda")
    except RuntimeError as e:  # Unimplemented (no CUDA build) or no device
        pytest.skip(f"no CUDA backend here: {e}")
    cpu = psdb.VocabCache(reference, ["a"], capacity_rows=64, backend="cpu")
    rng = np.random.default_rng(4)
    for ids in batches(20, seed=6):
        rows = gpu.lookup({"a": ids})[0]
        np.testing.assert_array_equal(rows, cpu.lookup({"a": ids})[0])
        g = rng.standard_normal(rows.shape).astype(np.float32)
        gpu.update([g])
        cpu.update([g])
    gpu.flush()
    cpu.flush()
    np.testing.assert_array_equal(all_rows(cached, "a").values, all_rows(reference, "a").values)
