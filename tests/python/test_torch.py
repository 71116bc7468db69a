"""psdb.torch: Embedding / EmbeddingBag over psdb tables.

Exactness: psdb.torch.EmbeddingBag + the table's server-side optimizer
against torch.nn.EmbeddingBag + torch's reference optimizer applied to the
rows a batch touches (what a sparse / lazy optimizer does), after 20 steps
of random bags with repeated ids. Where torch has no reference optimizer
(FTRL, row-wise Adagrad) the C++ kernels' values and state, read back with
pull_rows, are compared with a NumPy transcription of the published formula.
"""

import numpy as np
import pytest
import torch

import psdb
import psdb.torch
from psdb_testing import Cluster

DIM = 8
VOCAB = 40
STEPS = 20
RTOL = 1e-6


def assert_rel(got, want, rtol=RTOL):
    """|got - want| <= rtol * (|want| + max |want|): 1e-6 relative, where a
    value near zero (a weight crossing 0, a bag whose rows cancel) is held
    to 1e-6 of the array's scale rather than of itself."""
    got = np.asarray(got.detach() if torch.is_tensor(got) else got)
    want = np.asarray(want.detach() if torch.is_tensor(want) else want)
    scale = float(np.abs(want).max()) if want.size else 0.0
    np.testing.assert_allclose(got, want, rtol=rtol, atol=rtol * scale)


@pytest.fixture
def client(tmp_path):
    with psdb.open(f"local:{tmp_path / 'db'}") as c:
        yield c


def keys_of(vocab=VOCAB):
    """psdb keys of the reference model's rows 0..vocab-1: spread over the
    whole uint64 range (half of them >= 2^63) to exercise the int64 views."""
    rng = np.random.default_rng(7)
    keys = np.unique(rng.integers(1, 2**62, size=2 * vocab, dtype=np.uint64)
                     * np.uint64(3))[:vocab]
    keys[::2] |= np.uint64(1 << 63)
    return rng.permutation(keys)


def random_batch(rng, bags=12):
    """Bags of 0..6 ids each, skewed so ids repeat within a batch."""
    lengths = rng.integers(0, 7, size=bags)
    n = int(lengths.sum())
    idx = np.minimum(rng.zipf(1.3, size=n) - 1, VOCAB - 1)
    idx = rng.permutation(VOCAB)[idx]  # the hot ids anywhere in the vocab
    offsets = np.r_[0, np.cumsum(lengths)[:-1]]
    weights = rng.uniform(0.5, 1.5, size=n).astype(np.float32)
    target = rng.normal(size=(bags, DIM)).astype(np.float32)
    return idx, offsets, weights, target


def loss_of(out, target):
    return ((out - torch.from_numpy(target)) ** 2).sum()


# --- torch references on the touched rows --------------------------------


def torch_reference(kind, hp):
    """A function(weight, state, rows, grads, step) that updates
    weight[rows] (and state) with torch's optimizer on those rows only."""
    # psdb keeps hyper-parameters as float32 (optim/optimizer.h); torch gets
    # the same float32 values (0.999 and float32(0.999) differ by 1.3e-9,
    # which 1 - beta2 turns into 1.3e-5 relative).
    hp = {k: float(np.float32(v)) if isinstance(v, float) else v
          for k, v in hp.items()}
    wd = hp.get("weight_decay", 0.0)

    def make(params):
        if kind in ("sgd", "momentum", "nesterov"):
            return torch.optim.SGD(
                params, lr=hp["learning_rate"],
                momentum=hp.get("momentum", 0.0) if kind != "sgd" else 0.0,
                dampening=0.0, nesterov=kind == "nesterov", weight_decay=wd)
        if kind == "adagrad":
            return torch.optim.Adagrad(
                params, lr=hp["learning_rate"], lr_decay=0.0,
                initial_accumulator_value=hp["initial_accumulator"],
                eps=hp["epsilon"], weight_decay=wd)
        # Adam (Kingma & Ba; PyTorch Adam: eps added to sqrt(v_hat)).
        return torch.optim.Adam(
            params, lr=hp["learning_rate"], betas=(hp["beta1"], hp["beta2"]),
            eps=hp["epsilon"], weight_decay=wd)

    def step_rows(weight, state, rows, grads, t):
        p = torch.nn.Parameter(weight[rows].clone())
        p.grad = grads.clone()
        opt = make([p])
        if kind in ("momentum", "nesterov"):
            if "a" in state:  # torch starts the buffer at g, psdb at 0*m + g
                buf = state["a"][rows].clone()
                opt.state[p] = {"momentum_buffer": buf}
        elif kind == "adagrad":
            opt.state[p] = {"step": torch.tensor(0.0),
                            "sum": state["s"][rows].clone()}
        elif kind in ("adam", "lazy_adam"):
            opt.state[p] = {"step": torch.tensor(float(t - 1)),
                            "exp_avg": state["m"][rows].clone(),
                            "exp_avg_sq": state["v"][rows].clone()}
        opt.step()
        with torch.no_grad():
            weight[rows] = p
        st = opt.state[p]
        if kind in ("momentum", "nesterov"):
            state.setdefault("a", torch.zeros_like(weight))[rows] = \
                st["momentum_buffer"]
        elif kind == "adagrad":
            state["s"][rows] = st["sum"]
        elif kind in ("adam", "lazy_adam"):
            state["m"][rows] = st["exp_avg"]
            state["v"][rows] = st["exp_avg_sq"]

    def update(weight, state, rows, grads, step):
        if kind == "adagrad" and "s" not in state:
            state["s"] = torch.full_like(weight, hp["initial_accumulator"])
        if kind in ("adam", "lazy_adam") and "m" not in state:
            state["m"] = torch.zeros_like(weight)
            state["v"] = torch.zeros_like(weight)
            state["t"] = torch.zeros(weight.shape[0], dtype=torch.int64)
        if kind == "momentum" or kind == "nesterov":
            state.setdefault("a", torch.zeros_like(weight))
        if kind != "lazy_adam":
            step_rows(weight, state, rows, grads, step)
            return
        # LazyAdam: each row's bias correction counts its own updates, so
        # rows are stepped in groups of equal update counts.
        state["t"][rows] += 1
        counts = state["t"][rows]
        for c in torch.unique(counts).tolist():
            sel = counts == c
            step_rows(weight, state, rows[sel], grads[sel], c)

    return update


# --- NumPy transcriptions where torch has no optimizer --------------------


def numpy_reference(kind, hp):
    f32 = np.float32
    lr = f32(hp["learning_rate"])

    def ftrl(w, st, g):
        # FTRL-Proximal, McMahan et al. 2013 ("Ad Click Prediction: a View
        # from the Trenches"), Algorithm 1 per coordinate, lr_power = -1/2
        # and l2 as in TensorFlow's ApplyFtrl (denominator ... + 2 l2):
        #   n' = n + g^2; sigma = (sqrt(n') - sqrt(n)) / alpha;
        #   z += g - sigma w; n = n';
        #   w = 0 if |z| <= l1 else (sign(z) l1 - z) / (sqrt(n)/alpha + 2 l2)
        z, n = st
        l1, l2 = f32(hp["l1"]), f32(hp["l2"])
        n_new = n + g * g
        sigma = (np.sqrt(n_new) - np.sqrt(n)) / lr
        z[:] = z + (g - sigma * w)
        n[:] = n_new
        w[:] = np.where(np.abs(z) <= l1, f32(0),
                        (np.sign(z) * l1 - z) / (np.sqrt(n) / lr + f32(2) * l2))

    def rowwise_adagrad(w, st, g):
        # Row-wise Adagrad (FBGEMM split_embedding "rowwise_adagrad"; Gupta
        # et al. 2014): one accumulator per row, s += mean_j g_j^2;
        # w -= lr g / (sqrt(s) + eps).
        (s,) = st
        eps = f32(hp["epsilon"])
        s[:, 0] += (g * g).mean(axis=1, dtype=f32)
        w[:] = w - (lr * g) / (np.sqrt(s) + eps)

    def init_state(rows, dim):
        if kind == "ftrl":
            return [np.zeros((rows, dim), f32),
                    np.full((rows, dim), hp["initial_accumulator"], f32)]
        return [np.full((rows, 1), hp["initial_accumulator"], f32)]

    return (ftrl if kind == "ftrl" else rowwise_adagrad), init_state


TORCH_CASES = {
    "sgd": dict(optimizer="sgd", learning_rate=0.1),
    "momentum": dict(optimizer="momentum", learning_rate=0.05, momentum=0.9),
    "nesterov": dict(optimizer="momentum", learning_rate=0.05, momentum=0.9,
                     nesterov=True),
    "adagrad": dict(optimizer="adagrad", learning_rate=0.1,
                    initial_accumulator=0.1, epsilon=1e-8, weight_decay=0.01),
    "adam": dict(optimizer="adam", learning_rate=0.01, beta1=0.9, beta2=0.999,
                 epsilon=1e-8, weight_decay=0.01),
    "lazy_adam": dict(optimizer="lazy_adam", learning_rate=0.01, beta1=0.8,
                      beta2=0.99, epsilon=1e-8),
}
NUMPY_CASES = {
    "ftrl": dict(optimizer="ftrl", learning_rate=0.1, l1=0.001, l2=0.01,
                 initial_accumulator=0.1, lr_power=-0.5),
    "rowwise_adagrad": dict(optimizer="rowwise_adagrad", learning_rate=0.1,
                            initial_accumulator=0.1, epsilon=1e-8),
}


def start_weights(client, table, keys):
    return torch.from_numpy(client.pull(table, keys).copy())


def reference_bag(weight, mode):
    bag = torch.nn.EmbeddingBag(VOCAB, DIM, mode=mode, sparse=True)
    with torch.no_grad():
        bag.weight.copy_(weight)
    return bag


def touched_grads(bag):
    g = bag.weight.grad.coalesce()
    return g.indices()[0], g.values()


@pytest.mark.parametrize("kind", sorted(TORCH_CASES))
@pytest.mark.parametrize("mode", ["sum", "mean"])
def test_matches_torch_optimizer(client, kind, mode):
    hp = TORCH_CASES[kind]
    keys = keys_of()
    emb = psdb.torch.EmbeddingBag(client, "t", DIM, mode=mode, seed=3, **hp)
    weight = start_weights(client, "t", keys)
    update = torch_reference(kind, hp)
    state = {}
    rng = np.random.default_rng(11)
    for step in range(1, STEPS + 1):
        idx, offsets, psw, target = random_batch(rng)
        psw_t = torch.from_numpy(psw) if mode == "sum" else None
        # psdb: forward pulls, backward pushes at `step`.
        out = emb(torch.from_numpy(keys[idx].view(np.int64)),
                  torch.from_numpy(offsets), psw_t)
        loss_of(out, target).backward()
        # torch: the same bags on a copy of the weights, sparse gradient.
        bag = reference_bag(weight, mode)
        ref = bag(torch.from_numpy(idx), torch.from_numpy(offsets), psw_t)
        assert_rel(out, ref)
        loss_of(ref, target).backward()
        rows, grads = touched_grads(bag)
        update(weight, state, rows, grads, step)
    assert emb.step == STEPS
    got = client.pull("t", keys)
    assert_rel(got, weight)
    # The optimizer state too, where torch keeps the same quantity.
    rows = client.pull_rows("t", keys)
    if kind == "adagrad":
        assert_rel(rows.state, state["s"])
    if kind in ("adam", "lazy_adam"):
        assert_rel(rows.state[:, :DIM], state["m"])
        assert_rel(rows.state[:, DIM:2 * DIM], state["v"])
    if kind == "lazy_adam":
        np.testing.assert_array_equal(rows.state[:, 2 * DIM],
                                      state["t"].numpy().astype(np.float32))


@pytest.mark.parametrize("kind", sorted(NUMPY_CASES))
def test_matches_published_formula(client, kind):
    hp = NUMPY_CASES[kind]
    keys = keys_of()
    emb = psdb.torch.EmbeddingBag(client, "t", DIM, mode="sum", seed=5, **hp)
    weight = client.pull("t", keys).copy()
    apply, init_state = numpy_reference(kind, hp)
    state = init_state(VOCAB, DIM)
    rng = np.random.default_rng(13)
    for step in range(1, STEPS + 1):
        idx, offsets, psw, target = random_batch(rng)
        out = emb(torch.from_numpy(keys[idx].view(np.int64)),
                  torch.from_numpy(offsets), torch.from_numpy(psw))
        loss_of(out, target).backward()
        bag = reference_bag(torch.from_numpy(weight), "sum")
        ref = bag(torch.from_numpy(idx), torch.from_numpy(offsets),
                  torch.from_numpy(psw))
        loss_of(ref, target).backward()
        rows, grads = touched_grads(bag)
        rows = rows.numpy()
        w = weight[rows]
        st = [s[rows] for s in state]
        apply(w, st, grads.numpy())
        weight[rows] = w
        for s, new in zip(state, st):
            s[rows] = new
    got = client.pull_rows("t", keys)
    assert_rel(got.values, weight)
    for got_state, want_state in zip(
            np.split(got.state, np.cumsum([s.shape[1] for s in state])[:-1],
                     axis=1), state):
        assert_rel(got_state, want_state)


# --- forward ---------------------------------------------------------------


def test_embedding_forward_equals_pull(client):
    emb = psdb.torch.Embedding(client, "e", 4, seed=9)
    ids = torch.tensor([[5, 3, 5], [2**40, 3, 7]])
    out = emb(ids)
    assert out.shape == (2, 3, 4)
    want = client.pull("e", ids.reshape(-1).numpy())
    np.testing.assert_array_equal(out.detach().reshape(-1, 4).numpy(), want)
    # uint64 numpy keys, above 2^63 too.
    big = np.array([2**64 - 1, 2**63, 1], dtype=np.uint64)
    np.testing.assert_array_equal(emb(big).detach().numpy(),
                                  client.pull("e", big))


class SpyClient:
    """Forwards to a psdb client and keeps every array pull returned."""

    def __init__(self, client):
        self.client, self.pulled = client, []

    def __getattr__(self, name):
        return getattr(self.client, name)

    def pull(self, table, ids, **kw):
        self.pulled.append(self.client.pull(table, ids, **kw))
        return self.pulled[-1]


def test_pulled_rows_are_not_copied(client):
    spy = SpyClient(client)
    emb = psdb.torch.Embedding(spy, "e", 4)
    emb(torch.tensor([1, 2, 2, 3]))
    assert [p.shape for p in spy.pulled] == [(3, 4)]  # the unique ids, once
    # The rows handed to autograd are the pulled array's memory.
    rows = psdb.torch._PullPush.apply(
        emb._anchor, emb._rows, np.array([1, 2], np.uint64), 1)
    assert rows.data_ptr() == spy.pulled[-1].ctypes.data


@pytest.mark.parametrize("mode", ["sum", "mean"])
def test_embedding_bag_forward_equals_torch(client, mode):
    keys = np.arange(10, dtype=np.uint64) * np.uint64(1000003)
    emb = psdb.torch.EmbeddingBag(client, "b", 6, mode=mode, seed=4)
    bag = torch.nn.EmbeddingBag(10, 6, mode=mode)
    with torch.no_grad():
        bag.weight.copy_(torch.from_numpy(client.pull("b", keys)))
    idx = torch.tensor([1, 2, 2, 9, 0, 0, 0, 4])
    offsets = torch.tensor([0, 3, 3, 5])  # one empty bag
    k = torch.from_numpy(keys.view(np.int64))
    torch.testing.assert_close(emb(k[idx], offsets), bag(idx, offsets),
                               rtol=0, atol=0)
    two_d = torch.tensor([[1, 1, 3], [0, 9, 8]])
    torch.testing.assert_close(emb(k[two_d]), bag(two_d), rtol=0, atol=0)
    last = psdb.torch.EmbeddingBag(client, "b", mode=mode,
                                   include_last_offset=True)
    bag_last = torch.nn.EmbeddingBag(10, 6, mode=mode,
                                     include_last_offset=True)
    bag_last.weight = bag.weight
    off_last = torch.tensor([0, 3, 3, 5, 8])
    torch.testing.assert_close(last(k[idx], off_last), bag_last(idx, off_last),
                               rtol=0, atol=0)
    if mode == "sum":
        w = torch.rand(len(idx))
        torch.testing.assert_close(emb(k[idx], offsets, w),
                                   bag(idx, offsets, per_sample_weights=w),
                                   rtol=0, atol=0)


def test_unique_ids_shared_by_two_tables(tmp_path):
    def run(shared):
        with psdb.open(f"local:{tmp_path / str(shared)}") as c:
            a = psdb.torch.EmbeddingBag(c, "a", 3, mode="sum",
                                        optimizer="adagrad", seed=1)
            b = psdb.torch.Embedding(c, "b", 2, optimizer="adam", seed=2)
            ids = torch.tensor([[7, 3, 7], [3, 2**62, 9]])
            for _ in range(3):
                u = psdb.torch.UniqueIds(ids) if shared else ids
                out = a(u).sum() + (b(u) ** 2).sum()
                out.backward()
            keys = ids.reshape(-1).numpy()
            return c.pull("a", keys), c.pull("b", keys)

    for x, y in zip(run(True), run(False)):
        np.testing.assert_array_equal(x, y)


def test_per_sample_weights_get_gradients(client):
    emb = psdb.torch.EmbeddingBag(client, "b", 3, mode="sum", seed=4)
    ids = np.array([4, 5, 4], np.uint64)
    rows = client.pull("b", ids)  # the rows the forward will see
    w = torch.tensor([0.5, 2.0, 1.0], requires_grad=True)
    out = emb(torch.from_numpy(ids.view(np.int64)), torch.tensor([0, 2]), w)
    out.sum().backward()
    # d sum(out) / d w_i = sum_j row(ids[i])_j.
    assert_rel(w.grad, rows.sum(1))


class PushSpy(SpyClient):
    """Also keeps every (ids, grads) pushed."""

    def __init__(self, client):
        super().__init__(client)
        self.pushed = []

    def push(self, table, ids, grads, **kw):
        self.pushed.append((np.array(ids), np.array(grads)))
        return self.client.push(table, ids, grads, **kw)


@pytest.mark.parametrize("mode,last,weighted", [
    ("sum", False, False), ("sum", False, True), ("sum", True, True),
    ("mean", False, False), ("mean", True, False)])
def test_pushed_gradients_equal_torch_weight_grads(client, mode, last,
                                                    weighted):
    spy = PushSpy(client)
    emb = psdb.torch.EmbeddingBag(spy, "g", 5, mode=mode,
                                  include_last_offset=last)
    keys = np.arange(12, dtype=np.uint64) + np.uint64(2**63)
    bag = torch.nn.EmbeddingBag(12, 5, mode=mode, include_last_offset=last)
    with torch.no_grad():
        bag.weight.copy_(torch.from_numpy(client.pull("g", keys)))
    idx = torch.tensor([3, 1, 3, 3, 0, 11, 11, 2, 1])
    offsets = torch.tensor([0, 0, 4, 4, 7] + ([9] if last else []))
    psw = torch.linspace(0.5, 2.0, len(idx)) if weighted else None
    target = torch.randn(5, 5, generator=torch.Generator().manual_seed(1))
    k = torch.from_numpy(keys.view(np.int64))
    loss_of(emb(k[idx], offsets, psw), target.numpy()).backward()
    loss_of(bag(idx, offsets, per_sample_weights=psw),
            target.numpy()).backward()
    (ids, grads), = spy.pushed
    rows = [int(np.flatnonzero(keys == i)[0]) for i in ids]
    assert sorted(rows) == sorted(set(idx.tolist()))
    assert_rel(grads, bag.weight.grad[rows])


@pytest.mark.parametrize("mode", ["sum", "mean"])
def test_pushed_gradients_of_2d_input(client, mode):
    spy = PushSpy(client)
    emb = psdb.torch.EmbeddingBag(spy, "g", 3, mode=mode)
    keys = np.arange(6, dtype=np.uint64) * np.uint64(7)
    bag = torch.nn.EmbeddingBag(6, 3, mode=mode)
    with torch.no_grad():
        bag.weight.copy_(torch.from_numpy(client.pull("g", keys)))
    idx = torch.tensor([[5, 1, 5], [0, 0, 0], [2, 5, 1]])
    psw = torch.rand(3, 3) if mode == "sum" else None
    target = np.ones((3, 3), np.float32)
    k = torch.from_numpy(keys.view(np.int64))
    loss_of(emb(k[idx], per_sample_weights=psw), target).backward()
    loss_of(bag(idx, per_sample_weights=psw), target).backward()
    (ids, grads), = spy.pushed
    assert_rel(grads, bag.weight.grad[(ids // 7).astype(np.int64)])


def test_step_counter_and_explicit_steps(client):
    emb = psdb.torch.Embedding(client, "s", 2, optimizer="adam",
                               learning_rate=0.1)
    for _ in range(3):
        emb(torch.tensor([1, 2])).sum().backward()
    assert emb.step == 3
    emb(torch.tensor([1]), step=10).sum().backward()
    assert emb.step == 10
    emb(torch.tensor([1])).sum().backward()
    assert emb.step == 11
    with pytest.raises(ValueError):
        emb(torch.tensor([1]), step=0)
    assert emb.step == 11


def test_a_new_module_resumes_at_the_tables_step(client):
    emb = psdb.torch.Embedding(client, "s", 2, optimizer="adam")
    for _ in range(3):
        emb(torch.tensor([1, 2])).sum().backward()
    again = psdb.torch.Embedding(client, "s")
    assert again.step == 3
    print(again)  # repr names the table, its optimizer and step
    assert "step=3" in repr(again)


def test_eval_serves_without_creating_rows(client):
    emb = psdb.torch.EmbeddingBag(client, "v", 4, mode="sum",
                                  serving_default="zeros")
    emb(torch.tensor([1, 2]), torch.tensor([0])).sum().backward()
    rows_before = client.pull_rows("v", np.array([1, 2], np.uint64)).values
    emb.eval()
    out = emb(torch.tensor([1, 2, 99]), torch.tensor([0, 2]))
    assert out.grad_fn is None
    np.testing.assert_array_equal(out[0].numpy(), rows_before.sum(0))
    np.testing.assert_array_equal(out[1].numpy(), np.zeros(4, np.float32))
    emb.train()
    with torch.no_grad():
        emb(torch.tensor([123456]), torch.tensor([0]))
    stats = client.stats()
    assert table_rows(stats, "v") == 2


def table_rows(stats, table):
    """Rows of `table` in a client.stats() report (memory + created)."""
    tables = stats["tables"]
    entry = tables[table] if isinstance(tables, dict) else next(
        t for t in tables if t["name"] == table)
    return entry.get("created", entry.get("rows"))


# --- overlapped pushes -----------------------------------------------------


@pytest.mark.parametrize("cached", [False, True])
def test_async_push_equals_sync(tmp_path, cached):
    def run(async_push):
        with psdb.open(f"local:{tmp_path / f'{async_push}{cached}'}") as c:
            c.create_table("t", DIM, optimizer="adam", learning_rate=0.01)
            cache = (psdb.VocabCache(c, tables=["t"], capacity_rows=64)
                     if cached else None)
            emb = psdb.torch.EmbeddingBag(c, "t", mode="sum", cache=cache,
                                          async_push=async_push)
            rng = np.random.default_rng(3)
            keys = keys_of()
            for _ in range(STEPS):
                idx, offsets, psw, target = random_batch(rng)
                out = emb(torch.from_numpy(keys[idx].view(np.int64)),
                          torch.from_numpy(offsets), torch.from_numpy(psw))
                loss_of(out, target).backward()
            emb.flush()  # the last push has landed
            return c.pull_rows("t", keys)

    a, b = run(True), run(False)
    np.testing.assert_array_equal(a.values, b.values)
    np.testing.assert_array_equal(a.state, b.state)


def test_async_push_error_raises_at_next_call(client):
    emb = psdb.torch.Embedding(client, "n", 4, async_push=True)
    keys = torch.tensor([1, 2])
    before = client.pull("n", keys.numpy())
    (emb(keys) * float("nan")).sum().backward()  # queued
    with pytest.raises(ValueError):
        emb(keys)
    np.testing.assert_array_equal(client.pull("n", keys.numpy()), before)
    emb(keys).sum().backward()  # the module goes on
    emb.flush()
    assert not np.array_equal(client.pull("n", keys.numpy()), before)


# --- the worker cache ------------------------------------------------------


@pytest.mark.parametrize("policy,mode", [
    ("lru", "write_back"), ("lfu", "write_back"), ("lookahead", "write_back"),
    ("lru", "push_through")])
def test_cache_equals_uncached(tmp_path, policy, mode):
    def run(use_cache):
        with psdb.open(f"local:{tmp_path / ('c' if use_cache else 'u')}") as c:
            hp = dict(optimizer="adagrad", learning_rate=0.1, seed=2)
            psdb.torch.EmbeddingBag(c, "t", DIM, mode="mean", **hp)
            cache = (psdb.VocabCache(c, tables=["t"], capacity_rows=16,
                                     policy=policy, mode=mode)
                     if use_cache else None)
            emb = psdb.torch.EmbeddingBag(c, "t", mode="mean", cache=cache)
            rng = np.random.default_rng(5)
            keys = keys_of()
            batches = [random_batch(rng, bags=2) for _ in range(STEPS + 1)]
            emb.prefetch(keys[batches[0][0]])  # announces it (lookahead)
            for i in range(STEPS):
                idx, offsets, _, target = batches[i]
                out = emb(torch.from_numpy(keys[idx].view(np.int64)),
                          torch.from_numpy(offsets))
                emb.prefetch(keys[batches[i + 1][0]])
                loss_of(out, target).backward()
            emb.flush()
            return c.pull_rows("t", keys)

    a, b = run(True), run(False)
    np.testing.assert_array_equal(a.values, b.values)
    np.testing.assert_array_equal(a.state, b.state)


# --- local: and a 2-server cluster give the same tables --------------------


@pytest.fixture
def two_servers(tmp_path):
    """The servers: URL of 2 real ps-server processes (static list)."""
    cluster = Cluster(tmp_path / "cluster", 2)
    yield cluster.url
    cluster.stop()


def train_small_model(client):
    """Two tables (Adam and FTRL), 20 steps; returns both tables' rows."""
    keys = keys_of()
    deep = psdb.torch.EmbeddingBag(client, "deep", DIM, mode="mean",
                                   optimizer="adam", learning_rate=0.01,
                                   seed=1)
    wide = psdb.torch.EmbeddingBag(client, "wide", 1, mode="sum",
                                   optimizer="ftrl", learning_rate=0.05,
                                   l2=0.001, initializer="zeros", seed=2)
    head = torch.nn.Linear(DIM, 1)
    with torch.no_grad():
        head.weight.copy_(torch.linspace(-0.1, 0.1, DIM))
        head.bias.zero_()
    opt = torch.optim.SGD(head.parameters(), lr=0.1)
    rng = np.random.default_rng(17)
    for _ in range(STEPS):
        idx, offsets, _, target = random_batch(rng)
        k = torch.from_numpy(keys[idx].view(np.int64))
        o = torch.from_numpy(offsets)
        logit = head(deep(k, o))[:, 0] + wide(k, o)[:, 0]
        loss = torch.nn.functional.binary_cross_entropy_with_logits(
            logit, torch.from_numpy((target[:, 0] > 0).astype(np.float32)))
        opt.zero_grad()
        loss.backward()
        opt.step()
    return {t: client.pull_rows(t, keys) for t in ("deep", "wide")}


def test_local_and_two_servers_bit_identical(tmp_path, two_servers):
    with psdb.open(f"local:{tmp_path / 'local'}") as local:
        a = train_small_model(local)
    with psdb.open(two_servers) as remote:
        b = train_small_model(remote)
    for table in a:
        for field in ("values", "state"):
            x, y = getattr(a[table], field), getattr(b[table], field)
            assert x.shape == y.shape
            assert np.array_equal(x.view(np.uint32), y.view(np.uint32)), \
                f"{table}.{field} differ between local: and servers:"


# --- bad input ---------------------------------------------------------------


def snapshot(client, table, keys):
    return client.pull_rows(table, keys).values.copy(), table_rows(
        client.stats(), table)


BAD_BAG_CALLS = {
    "2-D input with offsets": lambda e: e(torch.tensor([[1, 2], [3, 4]]),
                                          torch.tensor([0, 1])),
    "float ids": lambda e: e(torch.tensor([1.0, 2.0]), torch.tensor([0])),
    "float numpy ids": lambda e: e(np.array([1.5]), torch.tensor([0])),
    "offsets out of order": lambda e: e(torch.tensor([1, 2, 3, 4]),
                                        torch.tensor([0, 3, 1])),
    "offsets not from 0": lambda e: e(torch.tensor([1, 2]),
                                      torch.tensor([1])),
    "offsets past the end": lambda e: e(torch.tensor([1, 2]),
                                        torch.tensor([0, 3])),
    "2-D offsets": lambda e: e(torch.tensor([1, 2]), torch.tensor([[0, 1]])),
    "1-D input without offsets": lambda e: e(torch.tensor([1, 2])),
    "3-D input": lambda e: e(torch.ones(2, 2, 2, dtype=torch.int64)),
    "per-sample weights shape": lambda e: e(torch.tensor([1, 2]),
                                            torch.tensor([0]),
                                            torch.ones(3)),
    "integer per-sample weights": lambda e: e(torch.tensor([1, 2]),
                                              torch.tensor([0]),
                                              torch.ones(2, dtype=torch.int64)),
}


@pytest.mark.parametrize("case", sorted(BAD_BAG_CALLS))
def test_bad_input_raises_and_changes_nothing(client, case):
    emb = psdb.torch.EmbeddingBag(client, "x", 4, mode="sum",
                                  optimizer="adagrad")
    keys = np.array([1, 2, 3, 4], np.uint64)
    emb(torch.from_numpy(keys.view(np.int64)), torch.tensor([0, 2])) \
        .sum().backward()
    before = snapshot(client, "x", keys)
    step = emb.step
    with pytest.raises(ValueError):
        BAD_BAG_CALLS[case](emb)
    after = snapshot(client, "x", keys)
    np.testing.assert_array_equal(before[0], after[0])
    assert before[1] == after[1]
    assert emb.step == step


def test_per_sample_weights_need_sum_mode(client):
    emb = psdb.torch.EmbeddingBag(client, "x", 4, mode="mean")
    with pytest.raises(ValueError, match="sum"):
        emb(torch.tensor([1, 2]), torch.tensor([0]), torch.ones(2))
    with pytest.raises(ValueError, match="mode"):
        psdb.torch.EmbeddingBag(client, "x", mode="max")


def test_nan_gradient_is_rejected_and_changes_nothing(client):
    emb = psdb.torch.Embedding(client, "n", 4, optimizer="sgd")
    keys = np.array([1, 2], np.uint64)
    before = client.pull_rows("n", keys).values.copy()
    out = emb(torch.from_numpy(keys.view(np.int64)))
    with pytest.raises(ValueError):
        (out * float("nan")).sum().backward()
    np.testing.assert_array_equal(client.pull_rows("n", keys).values, before)


def test_unknown_table_and_spec_without_dim(client):
    with pytest.raises(KeyError):
        psdb.torch.Embedding(client, "missing")
    with pytest.raises(ValueError):
        psdb.torch.Embedding(client, "missing", optimizer="adam")
    assert "missing" not in [t.name for t in client.list_tables()]


def test_conflicting_spec_is_refused(client):
    psdb.torch.Embedding(client, "c", 4, optimizer="adam")
    psdb.torch.Embedding(client, "c", 4, optimizer="adam")  # identical: OK
    with pytest.raises(Exception) as e:
        psdb.torch.Embedding(client, "c", 8, optimizer="adam")
    assert "c" in str(e.value)


def test_closed_client(tmp_path):
    c = psdb.open(f"local:{tmp_path / 'db'}")
    emb = psdb.torch.Embedding(c, "e", 4)
    c.close()
    with pytest.raises(Exception) as e:
        emb(torch.tensor([1]))
    assert "closed" in str(e.value)
    assert emb.step == 0
