"""PyTorch embedding modules whose tables live in psdb.

    import psdb, psdb.torch
    client = psdb.open("local:/tmp/psdb-data")        # or servers:/scheduler:
    emb = psdb.torch.EmbeddingBag(client, "item", dim=16, mode="sum",
                                  optimizer="adagrad", learning_rate=0.05)
    mlp = torch.nn.Linear(16, 1)
    opt = torch.optim.Adam(mlp.parameters())           # dense part only
    for ids, offsets, y in batches:
        loss = loss_fn(mlp(emb(ids, offsets)), y)
        opt.zero_grad(); loss.backward(); opt.step()   # backward pushes to psdb

The FBGEMM "fused optimizer" pattern: the modules hold no torch Parameters
for the table. Forward de-duplicates the ids (torch.unique with an inverse
index) and pulls the unique rows (zero-copy: torch.from_numpy on the array
psdb filled); a gather (Embedding) or torch's embedding_bag (EmbeddingBag)
then builds the output per position, their backward sums the gradient per
unique row (index_add), and a small autograd.Function pushes it to psdb,
whose server-side optimizer (the table's, optim/kernels.h) updates the rows.
No optimizer math is done in Python (STYLE.md 13). Modules that look up the
same ids share one de-duplication through psdb.torch.UniqueIds.

Steps: every training forward takes the next value of the module's `step`
counter (or the `step` passed to forward) and the backward pushes with it, so
Adam's bias correction and TTL see the trainer's global step whatever the
URL. The counter starts at the table's step in the store (0 for a new
table), so a module over a trained table resumes; set `module.step` to
choose. One forward per module per training step: two forwards before one
backward would push twice, with two steps.

Worker cache: pass `cache=psdb.VocabCache(client, tables=[table], ...)`, a
cache dedicated to this module's table; lookups and updates go through it
(write-back caches count steps themselves). `prefetch(next_ids)` fetches the
next batch's rows in the background; `flush()` writes the cache back.

async_push=True runs each push on a background thread, overlapping the rest
of the step; the module's next call waits for it (so training is exactly the
synchronous run's), flush() too: call it before reading the table directly.

Evaluation (module.eval() or torch.no_grad()): serving pulls, which never
create rows (a missing id reads the table's serving default); a cache is
flushed first so the store has its rows.

Errors: malformed ids, offsets or weights raise ValueError before anything is
pulled or pushed; psdb's own errors (KeyError for an unknown table,
ConnectionError, ...) pass through unchanged.

Thread-safety: a module is driven by one training thread.
"""

import concurrent.futures

import numpy as np
import torch
import torch.nn.functional as F

__all__ = ["Embedding", "EmbeddingBag", "UniqueIds"]

_INT_DTYPES = (torch.int64, torch.int32, torch.int16, torch.int8, torch.uint8)


def _as_id_tensor(ids, what="ids"):
    """ids (torch integer tensor, numpy integer array or list) -> int64 tensor.

    uint64 keys keep their bits: torch has no uint64, so they travel as
    int64 views and go back to psdb as uint64 views (no copy either way).
    """
    if isinstance(ids, np.ndarray):
        if ids.dtype.kind not in "iu":
            raise ValueError(f"{what} must be integers, got numpy {ids.dtype}")
        if ids.dtype == np.uint64:
            ids = ids.view(np.int64)
        ids = torch.from_numpy(np.ascontiguousarray(ids))
    elif not isinstance(ids, torch.Tensor):
        try:
            arr = np.asarray(ids)
        except Exception as e:  # pragma: no cover - exotic inputs
            raise ValueError(f"{what} must be an integer array: {e}") from None
        if arr.dtype.kind not in "iu" and arr.size > 0:
            raise ValueError(f"{what} must be integers, got {arr.dtype}")
        return _as_id_tensor(arr.astype(np.int64, copy=False), what)
    if ids.dtype not in _INT_DTYPES:
        raise ValueError(f"{what} must be an integer tensor, got {ids.dtype}")
    if ids.dtype != torch.int64:
        ids = ids.to(torch.int64)
    return ids


class UniqueIds:
    """Ids de-duplicated once (torch.unique, sorted, with the inverse index).

    Modules accept a UniqueIds wherever they accept ids, so models that look
    up the same ids in several tables (Wide&Deep's wide and deep parts) sort
    them once: u = psdb.torch.UniqueIds(ids); wide(u); deep(u).
    """

    def __init__(self, ids, what="ids"):
        ids = _as_id_tensor(ids, what)
        self.shape = ids.shape
        self.device = ids.device
        uniq, inverse = torch.unique(ids.reshape(-1), sorted=True,
                                     return_inverse=True)
        self.inverse = inverse.reshape(ids.shape)
        # The unique keys as psdb takes them: uint64 bits, no copy.
        self.keys = uniq.cpu().numpy().view(np.uint64)

    def dim(self):
        return len(self.shape)

    def numel(self):
        return self.inverse.numel()


def _unique(ids, what="ids"):
    return ids if isinstance(ids, UniqueIds) else UniqueIds(ids, what)


class _ClientRows:
    """Pull / push of unique rows straight through a psdb client."""

    def __init__(self, client, table):
        self.client, self.table = client, table

    def lookup(self, ids, step):
        return self.client.pull(self.table, ids)

    def update(self, ids, grads, step):
        self.client.push(self.table, ids, grads, step=step)

    def serve(self, ids):
        return self.client.pull(self.table, ids, serving=True)

    def prefetch(self, ids):
        pass

    def flush(self):
        pass


class _CacheRows:
    """Lookup / update through a psdb.VocabCache holding this one table."""

    def __init__(self, client, table, cache):
        self.client, self.table, self.cache = client, table, cache
        self.dirty = False

    def lookup(self, ids, step):
        self.dirty = True
        return self.cache.lookup({self.table: ids})[0]

    def update(self, ids, grads, step):
        self.cache.update({self.table: grads}, step)

    def serve(self, ids):
        # The store gets the cache's rows first; then a serving pull.
        self.flush()
        return self.client.pull(self.table, ids, serving=True)

    def prefetch(self, ids):
        batch = {self.table: ids}
        self.cache.announce(batch)
        self.cache.prefetch(batch)

    def flush(self):
        if self.dirty:
            self.cache.flush()
            self.dirty = False


class _OverlappedPush:
    """Runs a module's pushes on a background thread (async_push=True).

    The push of step t overlaps whatever follows its gradient (the rest of
    backward, the dense optimizer's step, the next batch's de-duplication);
    every other call on the table waits for it first, so the rows read are
    those of the synchronous run. A failed push raises at the module's next
    call.
    """

    def __init__(self, inner):
        self.inner = inner
        self.pool = concurrent.futures.ThreadPoolExecutor(
            max_workers=1, thread_name_prefix="psdb-push")
        self.pending = None

    def wait(self):
        pending, self.pending = self.pending, None
        if pending is not None:
            pending.result()

    def update(self, ids, grads, step):
        self.wait()
        self.pending = self.pool.submit(self.inner.update, ids, grads, step)

    def lookup(self, ids, step):
        self.wait()
        return self.inner.lookup(ids, step)

    def serve(self, ids):
        self.wait()
        return self.inner.serve(ids)

    def prefetch(self, ids):
        self.wait()
        self.inner.prefetch(ids)

    def flush(self):
        self.wait()
        self.inner.flush()


class _PullPush(torch.autograd.Function):
    """rows = pull(unique ids); backward pushes d loss / d rows at `step`.

    `anchor` is an empty tensor that requires grad: it makes autograd call
    backward although the module has no Parameter.
    """

    @staticmethod
    def forward(ctx, anchor, rows_io, ids, step):
        ctx.rows_io, ctx.ids, ctx.step = rows_io, ids, step
        return torch.from_numpy(rows_io.lookup(ids, step))

    @staticmethod
    def backward(ctx, grad):
        # The array views g's memory; a deferred push keeps it alive.
        g = grad.detach().to(device="cpu", dtype=torch.float32).contiguous()
        ctx.rows_io.update(ctx.ids, g.numpy(), ctx.step)
        return None, None, None, None


class _Bag(torch.autograd.Function):
    """F.embedding_bag over the unique rows: torch's own forward (outputs
    equal torch.nn.EmbeddingBag's bit for bit), and a backward that
    index_adds the gradient of each position to its unique row. torch's
    generic embedding_bag backward costs about 10x more on the narrow rows
    of a wide part (dim 1, 26 ids per bag); this is the same sum.
    """

    @staticmethod
    def forward(ctx, rows, per_sample_weights, inverse, offsets, mode,
                include_last_offset):
        ctx.save_for_backward(rows, per_sample_weights)
        ctx.inverse, ctx.offsets = inverse, offsets
        ctx.mode, ctx.include_last_offset = mode, include_last_offset
        return F.embedding_bag(inverse, rows, offsets, mode=mode,
                               per_sample_weights=per_sample_weights,
                               include_last_offset=include_last_offset)

    @staticmethod
    def backward(ctx, grad_out):
        rows, psw = ctx.saved_tensors
        inverse = ctx.inverse.reshape(-1)
        n = inverse.numel()
        if ctx.inverse.dim() == 2:  # bags of equal length: the rows of input
            bags, length = ctx.inverse.shape
            bag_of = torch.arange(bags, device=inverse.device)
            bag_of = bag_of.repeat_interleave(length)
            lengths = torch.full((bags,), length, device=inverse.device)
        else:
            offsets = ctx.offsets
            starts = offsets[:-1] if ctx.include_last_offset else offsets
            ends = (offsets[1:] if ctx.include_last_offset else torch.cat(
                [offsets[1:], offsets.new_tensor([n])]))
            positions = torch.arange(n, device=inverse.device)
            # A position's bag is the last one starting at or before it.
            bag_of = torch.bucketize(positions, starts, right=True) - 1
            lengths = ends - starts
        grad_pos = grad_out[bag_of]
        if ctx.mode == "mean":
            grad_pos = grad_pos / lengths[bag_of].unsqueeze(1).to(grad_pos)
        grad_psw = None
        if psw is not None:
            if ctx.needs_input_grad[1]:
                grad_psw = (rows[inverse] * grad_pos).sum(1).reshape(psw.shape)
            grad_pos = grad_pos * psw.reshape(-1, 1)
        grad_rows = None
        if ctx.needs_input_grad[0]:
            # index_add as index_put_(accumulate=True): the same sums, and on
            # CPU several times faster than index_add_ for narrow rows.
            grad_rows = torch.zeros_like(rows).index_put_(
                (inverse,), grad_pos, accumulate=True)
        return grad_rows, grad_psw, None, None, None, None


class _PsdbModule(torch.nn.Module):
    """What Embedding and EmbeddingBag share: table, cache, step, lookup."""

    def __init__(self, client, table, dim=None, *, cache=None,
                 async_push=False, **spec):
        super().__init__()
        if not isinstance(table, str):
            raise ValueError(f"table must be a name, got {table!r}")
        if dim is not None:
            # Idempotent: psdb accepts an identical spec and refuses another.
            client.create_table(table, int(dim), **spec)
        elif spec:
            raise ValueError("table spec arguments need dim= (to create it)")
        self.client = client
        self.table = table
        self.spec = client.get_table(table)
        self.embedding_dim = self.spec.dim
        self.cache = cache
        self._rows = (_CacheRows(client, table, cache)
                      if cache is not None else _ClientRows(client, table))
        if async_push:
            self._rows = _OverlappedPush(self._rows)
        # Global step of the last training forward; the next one uses +1.
        # A table trained before resumes at its step (the store keeps the
        # last step pushed), so Adam's bias correction goes on, not over.
        self.step = int(client.stats()["tables"].get(table, {}).get("step", 0))
        self._anchor = torch.empty(0, requires_grad=True)

    def extra_repr(self):
        return (f"table={self.table!r}, dim={self.embedding_dim}, "
                f"optimizer={self.spec.optimizer!r}, step={self.step}"
                + (", cached" if self.cache is not None else ""))

    def _rows_of(self, ids, step):
        """Rows (unique ids, dim): pulled for training, served otherwise."""
        keys = ids.keys
        training = self.training and torch.is_grad_enabled()
        if keys.size == 0:
            # Nothing to pull or push; still part of the graph when training
            # (as torch.nn.EmbeddingBag's output is), so backward() works.
            rows = (self._anchor.reshape(0, self.embedding_dim) if training
                    else torch.zeros(0, self.embedding_dim))
        elif training:
            if step is None:
                step = self.step + 1
            step = int(step)
            if step < 1:
                raise ValueError(f"step must be >= 1, got {step}")
            rows = _PullPush.apply(self._anchor, self._rows, keys, step)
            self.step = step
        else:
            rows = torch.from_numpy(self._rows.serve(keys))
        return rows.to(ids.device)

    def prefetch(self, ids):
        """Starts fetching the rows of the next batch's ids (cache only)."""
        keys = _unique(ids).keys
        if keys.size > 0:
            self._rows.prefetch(keys)

    def flush(self):
        """Completes an overlapped push (async_push) and writes a write-back
        cache's rows to the store: after it, the store has every update."""
        self._rows.flush()


class Embedding(_PsdbModule):
    """torch.nn.Embedding over a psdb table: forward(ids) -> ids.shape + (dim,).

    Embedding(client, table, dim=None, *, cache=None, async_push=False,
              **spec): with `dim`,
    the table is created with the psdb.Client.create_table keyword arguments
    in `spec` (or reused if it exists with the same spec); without, it must
    exist. ids are any-shaped integer tensors or arrays (uint64 keys as
    int64 bits).
    """

    def forward(self, ids, *, step=None):
        ids = _unique(ids)
        # A gather; its backward accumulates per unique row (index_put_ with
        # accumulate, which costs half of F.embedding's sorting backward).
        return self._rows_of(ids, step)[ids.inverse]


class EmbeddingBag(_PsdbModule):
    """torch.nn.EmbeddingBag over a psdb table.

    EmbeddingBag(client, table, dim=None, *, mode="mean", cache=None,
                 include_last_offset=False, async_push=False, **spec)
    forward(input, offsets=None, per_sample_weights=None, *, step=None)
    -> (bags, dim), with torch.nn.EmbeddingBag's conventions: a 2-D input is
    one bag per row (offsets must be None); a 1-D input is cut into bags at
    `offsets` (1-D, starting at 0, non-decreasing, at most len(input));
    per_sample_weights (the shape of input) scale rows, mode "sum" only.
    """

    def __init__(self, client, table, dim=None, *, mode="mean", cache=None,
                 include_last_offset=False, async_push=False, **spec):
        if mode not in ("sum", "mean"):
            raise ValueError(f"mode must be 'sum' or 'mean', got {mode!r}")
        super().__init__(client, table, dim, cache=cache,
                         async_push=async_push, **spec)
        self.mode = mode
        self.include_last_offset = bool(include_last_offset)

    def extra_repr(self):
        return super().extra_repr() + f", mode={self.mode!r}"

    def _check(self, input, offsets, per_sample_weights):
        if input.dim() == 2:
            if offsets is not None:
                raise ValueError(
                    "offsets must be None when input is 2-D (one bag per row)")
        elif input.dim() == 1:
            if offsets is None:
                raise ValueError("a 1-D input needs offsets (bag starts)")
            offsets = _as_id_tensor(offsets, "offsets")
            if offsets.dim() != 1:
                raise ValueError(
                    f"offsets must be 1-D, got shape {tuple(offsets.shape)}")
            n = input.numel()
            if offsets.numel() > 0:
                if int(offsets[0]) != 0:
                    raise ValueError(
                        f"offsets must start at 0, got {int(offsets[0])}")
                if bool((offsets[1:] < offsets[:-1]).any()):
                    raise ValueError("offsets must be non-decreasing")
                if int(offsets[-1]) > n:
                    raise ValueError(
                        f"offsets[-1] = {int(offsets[-1])} is past the end "
                        f"of input ({n} ids)")
            if self.include_last_offset and (offsets.numel() == 0 or
                                             int(offsets[-1]) != n):
                raise ValueError("include_last_offset: offsets must end at "
                                 f"len(input) = {n}")
        else:
            raise ValueError(
                f"input must be 1-D (with offsets) or 2-D, got shape "
                f"{tuple(input.shape)}")
        if per_sample_weights is not None:
            if self.mode != "sum":
                raise ValueError("per_sample_weights need mode='sum'")
            if not isinstance(per_sample_weights, torch.Tensor):
                per_sample_weights = torch.as_tensor(per_sample_weights)
            if not per_sample_weights.is_floating_point():
                raise ValueError("per_sample_weights must be floating point")
            if per_sample_weights.shape != input.shape:
                raise ValueError(
                    "per_sample_weights shape "
                    f"{tuple(per_sample_weights.shape)} differs from input "
                    f"shape {tuple(input.shape)}")
        return offsets, per_sample_weights

    def forward(self, input, offsets=None, per_sample_weights=None, *,
                step=None):
        input = _unique(input, "input")
        offsets, per_sample_weights = self._check(input, offsets,
                                                  per_sample_weights)
        rows = self._rows_of(input, step)
        if per_sample_weights is not None:
            per_sample_weights = per_sample_weights.to(rows.dtype)
        if offsets is not None:
            offsets = offsets.to(input.device)
        return _Bag.apply(rows, per_sample_weights, input.inverse, offsets,
                          self.mode, self.include_last_offset)
