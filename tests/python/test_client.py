"""psdb.Client over an embedded store (local: URLs): exact values, numpy
arrays in and out, errors (a bad call raises and changes nothing), close(),
and Python threads."""

import threading
import time

import numpy as np
import pytest

import psdb


@pytest.fixture
def client(tmp_path):
    with psdb.open(f"local:{tmp_path / 'data'}") as c:
        yield c


@pytest.fixture
def table(client):
    client.create_table("t", 4, optimizer="sgd", learning_rate=0.5, seed=3)
    return "t"


IDS = np.array([1, 2, 1, 9], dtype=np.uint64)


def test_sgd_push_is_value_minus_lr_times_summed_grads(client, table):
    before = client.pull(table, IDS)
    assert before.dtype == np.float32 and before.shape == (4, 4)
    assert before.flags.c_contiguous
    grads = np.arange(16, dtype=np.float32).reshape(4, 4) / 8
    client.push(table, IDS, grads)
    after = client.pull(table, IDS)
    lr = np.float32(0.5)
    # Duplicates are summed before the optimizer runs once per key: key 1
    # gets rows 0 and 2.
    np.testing.assert_array_equal(after[0], before[0] - lr * (grads[0] + grads[2]))
    np.testing.assert_array_equal(after[1], before[1] - lr * grads[1])
    np.testing.assert_array_equal(after[2], after[0])
    np.testing.assert_array_equal(after[3], before[3] - lr * grads[3])


def test_initial_values_are_deterministic_and_within_the_initializer(client, tmp_path):
    client.create_table("u", 8, init_a=-0.25, init_b=0.25, seed=11)
    rows = client.pull("u", np.arange(100, dtype=np.uint64))
    assert rows.min() >= -0.25 and rows.max() < 0.25
    with psdb.open(f"local:{tmp_path / 'other'}") as other:
        other.create_table("u", 8, init_a=-0.25, init_b=0.25, seed=11)
        np.testing.assert_array_equal(other.pull("u", np.arange(100, dtype=np.uint64)), rows)


def test_pull_writes_into_out(client, table):
    out = np.full((4, 4), 7, dtype=np.float32)
    result = client.pull(table, IDS, out=out)
    assert result is out
    np.testing.assert_array_equal(out, client.pull(table, IDS))
    # A view into a larger C-contiguous buffer is filled in place.
    big = np.zeros((10, 4), dtype=np.float32)
    client.pull(table, IDS, out=big[3:7])
    np.testing.assert_array_equal(big[3:7], out)
    assert not big[:3].any() and not big[7:].any()


def test_ids_of_any_integer_dtype_and_layout(client, table):
    expected = client.pull(table, IDS)
    np.testing.assert_array_equal(client.pull(table, IDS.astype(np.int64)), expected)
    np.testing.assert_array_equal(client.pull(table, IDS.astype(np.int32)), expected)
    np.testing.assert_array_equal(client.pull(table, IDS.astype(np.uint16)), expected)
    np.testing.assert_array_equal(client.pull(table, [1, 2, 1, 9]), expected)
    strided = np.zeros(8, dtype=np.uint64)
    strided[::2] = IDS
    assert not strided[::2].flags.c_contiguous
    np.testing.assert_array_equal(client.pull(table, strided[::2]), expected)
    np.testing.assert_array_equal(client.pull(table, IDS[::-1]), expected[::-1])
    with pytest.raises(ValueError, match="empty batch"):  # as in C++
        client.pull(table, np.array([], dtype=np.uint64))


def test_push_accepts_flat_and_strided_grads(client, tmp_path):
    grads = np.arange(16, dtype=np.float32).reshape(4, 4)
    for name, g in [("flat", grads.reshape(-1)), ("strided", np.asfortranarray(grads)),
                    ("plain", grads)]:
        client.create_table(name, 4, optimizer="sgd", learning_rate=0.5)
        client.push(name, IDS, g, step=1)
    np.testing.assert_array_equal(client.pull("flat", IDS), client.pull("plain", IDS))
    np.testing.assert_array_equal(client.pull("strided", IDS), client.pull("plain", IDS))


def test_table_specs(client):
    client.create_table("d", 8)
    spec = client.get_table("d")
    # The defaults are the C++ TableSpec's.
    assert (spec.name, spec.dim, spec.optimizer, spec.initializer) == ("d", 8, "sgd", "uniform")
    assert (spec.learning_rate, spec.init_a, spec.init_b) == (0.01, -0.05, 0.05)
    assert (spec.non_finite, spec.serving_default, spec.state_size) == ("reject", "init", 0)
    client.create_table("a", 8, optimizer="adam", beta1=0.8, non_finite="skip_row",
                        initializer="normal", init_a=0.0, init_b=0.1, ttl_steps=5,
                        admission_threshold=2)
    a = client.get_table("a")
    assert (a.optimizer, a.beta1, a.non_finite, a.initializer) == ("adam", 0.8, "skip_row", "normal")
    assert (a.ttl_steps, a.admission_threshold, a.state_size) == (5, 2, 2 * 8 + 1)
    assert sorted(s.name for s in client.list_tables()) == ["a", "d"]
    # to_dict() is create_table's arguments: the same call is idempotent.
    client.create_table(**a.to_dict())
    assert client.get_table("a") == a
    client.drop_table("d")
    assert [s.name for s in client.list_tables()] == ["a"]
    with pytest.raises(KeyError, match="d"):
        client.get_table("d")


def test_ftrl_accumulator_decay_reaches_the_store(client):
    # FTRL's accumulator n' = decay * n + g^2 at each update of a row.
    client.create_table("f", 2, optimizer="ftrl", initial_accumulator=0.5,
                        accumulator_decay=0.5)
    f = client.get_table("f")
    assert (f.optimizer, f.accumulator_decay) == ("ftrl", 0.5)
    assert f.to_dict()["accumulator_decay"] == 0.5
    assert f.state_size == 4
    ids = np.array([3], dtype=np.uint64)
    client.pull("f", ids)
    client.push("f", ids, np.full((1, 2), 2.0, dtype=np.float32), step=1)
    client.push("f", ids, np.full((1, 2), 2.0, dtype=np.float32), step=2)
    # n: 0.5 -> 0.25 + 4 = 4.25 -> 2.125 + 4 = 6.125 (state: z then n).
    n = client.pull_rows("f", ids).state[0, 2:]
    np.testing.assert_array_equal(n, np.full(2, 6.125, np.float32))
    with pytest.raises(ValueError, match="accumulator_decay"):
        client.create_table("g", 2, optimizer="ftrl", accumulator_decay=0.0)
    with pytest.raises(ValueError, match="accumulator_decay"):
        client.create_table("g", 2, optimizer="ftrl", accumulator_decay=1.5)


def test_pull_rows_and_put_rows_move_whole_rows(client, tmp_path):
    client.create_table("g", 3, optimizer="adagrad", learning_rate=0.1)
    ids = np.array([5, 6, 7], dtype=np.uint64)
    client.pull("g", ids)
    client.push("g", ids, np.ones((3, 3), dtype=np.float32), step=4)
    rows = client.pull_rows("g", ids)
    assert len(rows) == 3
    assert rows.values.shape == (3, 3) and rows.state.shape == (3, 3)
    assert rows.values.dtype == np.float32 and rows.state.dtype == np.float32
    # Adagrad: accumulator = initial 0.1 + g^2.
    np.testing.assert_array_equal(rows.state, np.full((3, 3), np.float32(0.1) + np.float32(1), np.float32))
    np.testing.assert_array_equal(rows.update_count, [1, 1, 1])
    np.testing.assert_array_equal(rows.last_update_step, [4, 4, 4])
    assert rows.update_count.dtype == np.uint64 and rows.last_update_step.dtype == np.int64
    with psdb.open(f"local:{tmp_path / 'copy'}") as other:
        other.create_table(**client.get_table("g").to_dict())
        other.put_rows("g", ids, rows)
        copy = other.pull_rows("g", ids)
        for field in ("values", "state", "update_count", "last_update_step"):
            np.testing.assert_array_equal(getattr(copy, field), getattr(rows, field))
        # pull_rows is a sighting of each key, counted after the assignment.
        np.testing.assert_array_equal(copy.frequency, rows.frequency + 1)
    # Rows built in Python (headers default to zero).
    client.put_rows("g", ids[:1], psdb.Rows(np.full((1, 3), 2, np.float32),
                                            np.full((1, 3), 3, np.float32)))
    np.testing.assert_array_equal(client.pull("g", ids[:1]), [[2, 2, 2]])


def test_checkpoint_and_restore(client, table, tmp_path):
    client.push(table, IDS, np.ones((4, 4), dtype=np.float32), step=7)
    expected = client.pull(table, IDS)
    info = client.checkpoint(str(tmp_path / "ckpt"), keep_last=2)
    assert info["step"] == 7 and info["rows_flushed"] == 3
    assert info["path"].startswith(str(tmp_path / "ckpt")) and info["duration_s"] >= 0
    with psdb.open(f"local:{tmp_path / 'restored'}", restore_from=info["path"],
                   memory_budget_bytes=1 << 24) as restored:
        np.testing.assert_array_equal(restored.pull(table, IDS), expected)
        assert restored.get_table(table) == client.get_table(table)


def test_stats(client, table):
    client.pull(table, IDS)
    stats = client.stats()
    t = stats["tables"][table]
    assert t["name"] == table and t["created"] == 3 and t["memory_rows"] == 3
    assert stats["memory_budget_bytes"] == 1 << 30  # StoreOptions' default
    assert set(stats) >= {"memory_used_bytes", "checkpoints", "last_checkpoint_duration_s"}


def test_serving_pull_creates_nothing(client, table):
    rows = client.pull(table, IDS, serving=True)
    assert client.stats()["tables"][table]["created"] == 0
    np.testing.assert_array_equal(rows, client.pull(table, IDS))


def unchanged(client, table, call):
    """Runs `call`, which must raise; returns the exception after checking
    the table's rows are what they were."""
    before = client.pull_rows(table, IDS)
    with pytest.raises(Exception) as raised:
        call()
    after = client.pull_rows(table, IDS)
    np.testing.assert_array_equal(after.values, before.values)
    np.testing.assert_array_equal(after.update_count, before.update_count)
    return raised.value


@pytest.mark.parametrize("ids, message", [
    (np.array([1.0, 2.0]), "integer"),
    (np.array([[1, 2]], dtype=np.uint64), "1-D"),
    (np.array([1, -2], dtype=np.int64), "negative"),
    (np.array([True, False]), "integer"),
    ("12", "1-D"),
    (None, "None"),
])
def test_bad_ids_raise_value_error(client, table, ids, message):
    grads = np.zeros((2, 4), dtype=np.float32)
    for call in (lambda: client.pull(table, ids), lambda: client.push(table, ids, grads)):
        e = unchanged(client, table, call)
        assert isinstance(e, ValueError) and message in str(e)


@pytest.mark.parametrize("grads, message", [
    (np.zeros((4, 4), dtype=np.float64), "float32"),
    (np.zeros((3, 4), dtype=np.float32), "3 rows for 4 ids"),
    (np.zeros((4, 5), dtype=np.float32), ""),
    (np.zeros(15, dtype=np.float32), ""),
    (np.zeros((4, 4, 1), dtype=np.float32), "3-D"),
    (np.zeros((4, 4), dtype=np.int32), "float32"),
])
def test_bad_grads_raise_value_error(client, table, grads, message):
    e = unchanged(client, table, lambda: client.push(table, IDS, grads))
    assert isinstance(e, ValueError) and message in str(e)


def test_nan_gradient_is_rejected_and_nothing_changes(client, table):
    grads = np.ones((4, 4), dtype=np.float32)
    grads[3, 2] = np.nan
    e = unchanged(client, table, lambda: client.push(table, IDS, grads))
    assert isinstance(e, ValueError) and "finite" in str(e).lower()


@pytest.mark.parametrize("out, message", [
    (np.zeros((4, 4), dtype=np.float64), "float32"),
    (np.zeros((4, 3), dtype=np.float32), "shape (4, 4)"),
    (np.zeros((4, 8), dtype=np.float32)[:, ::2], "C-contiguous"),
    ([[0.0] * 4] * 4, "numpy"),
])
def test_bad_out_raises_value_error(client, table, out, message):
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")):
        client.pull(table, IDS, out=out)
    read_only = np.zeros((4, 4), dtype=np.float32)
    read_only.flags.writeable = False
    with pytest.raises(ValueError, match="read-only"):
        client.pull(table, IDS, out=read_only)


def test_unknown_table_raises_key_error(client, table):
    grads = np.zeros((4, 4), dtype=np.float32)
    for call in (lambda: client.pull("nope", IDS), lambda: client.push("nope", IDS, grads),
                 lambda: client.pull_rows("nope", IDS), lambda: client.get_table("nope"),
                 lambda: client.drop_table("nope")):
        with pytest.raises(KeyError, match="nope"):
            call()


def test_bad_specs_and_options(client, tmp_path):
    with pytest.raises(ValueError, match="optimizer"):
        client.create_table("x", 4, optimizer="adamw")
    with pytest.raises(ValueError, match="initializer"):
        client.create_table("x", 4, initializer="ones")
    with pytest.raises(ValueError):
        client.create_table("x", 0)
    with pytest.raises(ValueError):
        client.create_table("bad name", 4)
    with pytest.raises(ValueError):
        client.create_table("x", 4, learning_rate=-1)
    with pytest.raises(TypeError):
        client.create_table("x", 4, learning_rat=0.1)
    assert client.list_tables() == []
    client.create_table("x", 4)
    with pytest.raises(RuntimeError, match="x"):
        client.create_table("x", 8)
    with pytest.raises(ValueError, match="unknown option"):
        psdb.open(f"local:{tmp_path / 'o'}", memory_budget=1)
    with pytest.raises(ValueError, match="local: URLs only"):
        psdb.open("servers:127.0.0.1:1", memory_budget_bytes=1)
    with pytest.raises(ValueError, match="servers: and scheduler:"):
        psdb.open(f"local:{tmp_path / 'o'}", call_timeout_s=1)
    with pytest.raises(ValueError, match="URL"):
        psdb.open("file:/tmp/x")


def test_a_locked_directory_is_a_failed_precondition(client, tmp_path):
    with pytest.raises(psdb.FailedPreconditionError):
        psdb.open(f"local:{tmp_path / 'data'}")
    assert issubclass(psdb.FailedPreconditionError, RuntimeError)
    assert issubclass(psdb.DataLossError, Exception)


def test_corrupt_manifest_is_data_loss(client, table, tmp_path):
    info = client.checkpoint(str(tmp_path / "ckpt"))
    with open(f"{info['path']}/MANIFEST.json", "w") as f:
        f.write("{not json")
    with pytest.raises(psdb.DataLossError, match="MANIFEST.json"):
        psdb.open(f"local:{tmp_path / 'r'}", restore_from=info["path"])


def test_calls_after_close_raise_value_error(tmp_path):
    c = psdb.open(f"local:{tmp_path / 'data'}")
    c.create_table("t", 4)
    c.close()
    c.close()  # idempotent
    assert c.closed
    calls = [
        lambda: c.pull("t", IDS), lambda: c.push("t", IDS, np.zeros((4, 4), np.float32)),
        lambda: c.pull_rows("t", IDS), lambda: c.get_table("t"), lambda: c.list_tables(),
        lambda: c.create_table("u", 4), lambda: c.drop_table("t"), lambda: c.stats(),
        lambda: c.checkpoint(str(tmp_path / "ckpt")),
        lambda: psdb.VocabCache(c, ["t"], capacity_rows=4),
    ]
    for call in calls:
        with pytest.raises(ValueError, match="client is closed"):
            call()
    # The directory was released: it opens again, with the table.
    with psdb.open(f"local:{tmp_path / 'data'}") as again:
        assert again.get_table("t").dim == 4


def test_four_threads_pushing_give_the_serial_result(tmp_path):
    # Zero initial values, lr 1 and small integer gradients: every sum is
    # exact, so any interleaving must give exactly the serial values.
    rng = np.random.default_rng(5)
    batches = [(rng.integers(0, 200, 256).astype(np.uint64),
                rng.integers(-4, 5, (256, 8)).astype(np.float32)) for _ in range(4 * 40)]
    spec = dict(optimizer="sgd", learning_rate=1.0, initializer="zeros")
    ids = np.arange(200, dtype=np.uint64)
    with psdb.open(f"local:{tmp_path / 'serial'}") as serial:
        serial.create_table("t", 8, **spec)
        for b in batches:
            serial.push("t", *b)
        expected = serial.pull_rows("t", ids)
    with psdb.open(f"local:{tmp_path / 'threads'}") as shared:
        shared.create_table("t", 8, **spec)
        errors = []

        def work(mine):
            try:
                for b in mine:
                    shared.push("t", *b)
            except Exception as e:  # noqa: BLE001  (reported below)
                errors.append(e)

        threads = [threading.Thread(target=work, args=(batches[i::4],)) for i in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert errors == []
        got = shared.pull_rows("t", ids)
    np.testing.assert_array_equal(got.values, expected.values)
    np.testing.assert_array_equal(got.update_count, expected.update_count)


def test_the_gil_is_released_during_a_call():
    # A pull from an unreachable server blocks in C++ (connection refused,
    # retried with backoff until it gives up). Meanwhile this thread keeps
    # running Python, which it could not if the call held the GIL.
    c = psdb.open("servers:127.0.0.1:1", max_attempts=4, initial_backoff_s=0.1,
                  max_backoff_s=0.1, call_timeout_s=10)
    window = {}
    errors = []

    def blocked():
        window["start"] = time.monotonic()
        try:
            c.pull("t", IDS, out=np.zeros((4, 4), dtype=np.float32))
        except ConnectionError as e:
            errors.append(e)
        window["end"] = time.monotonic()

    thread = threading.Thread(target=blocked)
    ticks = []
    thread.start()
    while thread.is_alive():
        ticks.append(time.monotonic())
    thread.join()
    assert len(errors) == 1, "an unreachable server is a ConnectionError"
    inside = [t for t in ticks if window["start"] < t < window["end"]]
    assert len(inside) > 100
    c.close()


def test_close_while_threads_call(tmp_path):
    # Calls in flight finish, later ones raise ValueError; nothing crashes.
    c = psdb.open(f"local:{tmp_path / 'data'}")
    c.create_table("t", 16)
    ids = np.arange(2048, dtype=np.uint64)
    grads = np.zeros((2048, 16), dtype=np.float32)
    outcomes = []
    started = threading.Barrier(5)

    def work():
        started.wait()
        n = 0
        while True:
            try:
                c.pull("t", ids)
                c.push("t", ids, grads)
                n += 1
            except ValueError as e:
                outcomes.append((n, str(e)))
                return

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    started.wait()
    c.close()
    for t in threads:
        t.join()
    assert [message for _, message in outcomes] == ["client is closed"] * 4


def test_contiguous_arrays_are_read_in_place():
    from psdb import _psdb
    assert _psdb._ids_borrowed(IDS)
    assert _psdb._ids_borrowed(IDS.astype(np.int64))
    assert not _psdb._ids_borrowed(IDS.astype(np.int32))  # converted
    assert not _psdb._ids_borrowed(np.repeat(IDS, 2)[::2])  # strided: copied
    grads = np.zeros((4, 4), dtype=np.float32)
    assert _psdb._floats_borrowed(grads) and _psdb._floats_borrowed(grads.reshape(-1))
    assert not _psdb._floats_borrowed(np.asfortranarray(grads))
