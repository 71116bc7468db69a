#!/usr/bin/env python3
"""Wide&Deep in PyTorch with its embeddings in psdb: ps-train's Python twin.

    PYTHONPATH=build/release/python /usr/bin/python3 \
        examples/python/wide_deep.py --data /tmp/criteo-synth \
        --checkpoint_dir /tmp/wd-py

Same data, same model, same defaults as `ps-train` (train/wide_deep.h,
train/trainer.h, tools/train/train_flags.cc):
  - Criteo-format files (label, 13 integers, 26 hex categoricals, tab-
    separated; train* and test* in --data, meta.json's bayes_auc if there);
    categorical values become psdb keys exactly as ps-train's CategoricalKey
    does (train/criteo_reader.cc), so both programs train the same rows;
  - wide: a dim-1 psdb table "wide" (FTRL, zeros) summed over the 26 ids,
    plus a 13-weight linear model and bias, the dim-14 psdb table
    "wide_linear" (FTRL), on sign(x) log(1 + |x|) of the integer features;
  - deep: the dim-16 psdb table "deep" (LazyAdam or Adagrad, uniform
    +-0.05) for the 26 ids, concatenated with the integer features, through
    a torch MLP 429 -> 256 -> 128 -> 1 (ReLU, Glorot-uniform weights, zero
    biases) trained by torch.optim.Adam: the dense part stays in torch;
  - p = sigmoid(wide + deep), mean sigmoid cross-entropy; batch 512, one
    epoch, in file order; every table's seed derives from --seed as in
    ps-train, and each step pushes with its global step (sync mode).
The embedding tables go through a write-back psdb.VocabCache per table
(--cache_rows, 0 = none) with the next batch prefetched, as ps-train does;
their gradients are pushed on a background thread while the step goes on
(async_push; --sync_push: in backward itself), the same result either way.

Writes CDIR/summary.json (auc, logloss, bayes_auc, samples_per_sec, ...),
CDIR/metrics.csv and a psdb checkpoint under CDIR. The store defaults to
$PSDB_URL, else local:CDIR/store; any psdb URL works (servers:...,
scheduler:...).
"""

import argparse
import json
import math
import os
import sys
import time

import numpy as np
import torch

import psdb
import psdb.torch

NUM_INT = 13
NUM_CAT = 26


# ---------------------------------------------------------------------------
# Data: the Criteo format and ps-train's keys.

class CriteoData:
    """All examples of some Criteo files, parsed (malformed lines skipped).

    labels (n,) float32; dense (n, 13) float32 = sign(x) log1p(|x|), 0 when
    missing (train/wide_deep.cc NormalizeIntFeatures); keys (n, 26) uint64.
    """

    def __init__(self, files):
        labels, ints, int_present, cats, cat_present = [], [], [], [], []
        self.malformed = 0
        self.first_error = ""
        for path in files:
            valid = 0
            with open(path, "r", newline="\n") as f:
                for lineno, line in enumerate(f, 1):
                    parsed = _parse_line(line)
                    if isinstance(parsed, str):
                        if self.malformed == 0:
                            self.first_error = f"{path}:{lineno}: {parsed}"
                        self.malformed += 1
                        continue
                    valid += 1
                    labels.append(parsed[0])
                    ints.append(parsed[1])
                    int_present.append(parsed[2])
                    cats.append(parsed[3])
                    cat_present.append(parsed[4])
            if valid == 0:
                raise ValueError(f"data file {path} has no valid Criteo line "
                                 f"(first error: {self.first_error})")
        n = len(labels)
        self.labels = np.asarray(labels, dtype=np.float32)
        x = np.asarray(ints, dtype=np.float64).reshape(n, NUM_INT)
        present = np.asarray(int_present, dtype=bool).reshape(n, NUM_INT)
        self.dense = np.where(present, np.sign(x) * np.log1p(np.abs(x)),
                              0.0).astype(np.float32)
        self.keys = psdb.criteo_keys(
            np.asarray(cats, dtype=np.uint64).reshape(n, NUM_CAT),
            np.asarray(cat_present, dtype=bool).reshape(n, NUM_CAT))

    def __len__(self):
        return len(self.labels)

    def batches(self, batch_size):
        for start in range(0, len(self), batch_size):
            end = min(start + batch_size, len(self))
            yield (self.keys[start:end], self.dense[start:end],
                   self.labels[start:end])


def _parse_line(line):
    """A parsed example, or a string saying why the line is malformed."""
    line = line.rstrip("\n")
    if line.endswith("\r"):
        line = line[:-1]
    fields = line.split("\t")
    if len(fields) != 1 + NUM_INT + NUM_CAT:
        return f"{len(fields)} fields, expected {1 + NUM_INT + NUM_CAT}"
    if fields[0] not in ("0", "1"):
        return f"label '{fields[0]}' is not 0 or 1"
    ints, int_present = [0] * NUM_INT, [False] * NUM_INT
    for j, s in enumerate(fields[1:1 + NUM_INT]):
        if s:
            try:
                ints[j], int_present[j] = int(s), True
            except ValueError:
                return f"integer feature I{j + 1} '{s}' is not an integer"
    cats, cat_present = [0] * NUM_CAT, [False] * NUM_CAT
    for j, s in enumerate(fields[1 + NUM_INT:]):
        if s:
            if len(s) > 16 or s[0] in "+-_ " or s.startswith(("0x", "0X")):
                return f"categorical feature C{j + 1} '{s}' is not a hex id"
            try:
                cats[j], cat_present[j] = int(s, 16), True
            except ValueError:
                return f"categorical feature C{j + 1} '{s}' is not a hex id"
    return float(fields[0]), ints, int_present, cats, cat_present


def data_files(data_dir):
    """(train files, test files, bayes_auc or None), as train/ LoadDataDir."""
    if not os.path.isdir(data_dir):
        raise FileNotFoundError(f"data directory {data_dir} does not exist")
    names = sorted(n for n in os.listdir(data_dir)
                   if os.path.isfile(os.path.join(data_dir, n)))
    train = [os.path.join(data_dir, n) for n in names if n.startswith("train")]
    test = [os.path.join(data_dir, n) for n in names if n.startswith("test")]
    if not train:
        raise FileNotFoundError(f"data directory {data_dir} has no train* file")
    bayes = None
    meta = os.path.join(data_dir, "meta.json")
    if os.path.exists(meta):
        with open(meta) as f:
            bayes = json.load(f).get("bayes_auc")
    return train, test, bayes


# ---------------------------------------------------------------------------
# Metrics (train/metrics.cc).

def auc(scores, labels):
    """ROC AUC with mid-ranks for ties (Mann-Whitney U)."""
    scores = np.asarray(scores, dtype=np.float32)
    labels = np.asarray(labels) > 0.5
    order = np.argsort(scores, kind="stable")
    s = scores[order]
    # Mid-rank of each group of equal scores (1-based ranks).
    starts = np.flatnonzero(np.r_[True, s[1:] != s[:-1]])
    ends = np.r_[starts[1:], len(s)]
    mid = 0.5 * ((starts + 1) + ends)
    ranks = np.repeat(mid, ends - starts)
    pos = labels[order]
    positives = float(pos.sum())
    negatives = len(s) - positives
    if positives == 0 or negatives == 0:
        raise ValueError("AUC needs both classes")
    return (ranks[pos].sum() - positives * (positives + 1) / 2) / (
        positives * negatives)


def logloss(probs, labels):
    p = np.clip(np.asarray(probs, dtype=np.float64), 1e-7, 1 - 1e-7)
    y = np.asarray(labels, dtype=np.float64)
    return float(-np.mean(y * np.log(p) + (1 - y) * np.log1p(-p)))


# ---------------------------------------------------------------------------
# The model.

def mlp(sizes, generator):
    """ReLU MLP; Glorot-uniform weights and zero biases (train/mlp.h)."""
    layers = []
    for i in range(len(sizes) - 1):
        lin = torch.nn.Linear(sizes[i], sizes[i + 1])
        limit = math.sqrt(6.0 / (sizes[i] + sizes[i + 1]))
        with torch.no_grad():
            lin.weight.uniform_(-limit, limit, generator=generator)
            lin.bias.zero_()
        layers.append(lin)
        if i + 2 < len(sizes):
            layers.append(torch.nn.ReLU())
    return torch.nn.Sequential(*layers)


class WideDeep(torch.nn.Module):
    """logit = sum_f wide[id_f] + linear . x + b + MLP([deep[id_f]..., x]).

    forward returns (logit, wide logit, deep logit): the wide logit is
    sum_f wide[id_f] + linear . x + b, the deep logit the MLP's output, and
    logit their sum (train/wide_deep.h WideDeepLoss)."""

    def __init__(self, client, args, caches=None):
        super().__init__()
        caches = caches or {}
        # FTRL-Proximal with per-example alpha (--wide_lr), beta 1 and
        # lambda2 (--wide_l2), as ps-train: the loss is a batch mean, so
        # at batch B beta is sqrt of an initial accumulator (1/B)^2 and the
        # l2 is lambda2 / (2B) (docs/models.md).
        batch = args.batch_size
        ftrl = dict(optimizer="ftrl", learning_rate=args.wide_lr,
                    l2=args.wide_l2 / (2 * batch),
                    initial_accumulator=1.0 / (batch * batch),
                    initializer="zeros", init_a=0.0, init_b=0.0)
        # train/wide_deep.cc ModelTableSpecs: seeds seed, seed+1, seed+2.
        overlap = not getattr(args, "sync_push", True)
        self.wide = psdb.torch.EmbeddingBag(
            client, "wide", 1, mode="sum", cache=caches.get("wide"),
            async_push=overlap, seed=args.seed, **ftrl)
        self.deep = psdb.torch.Embedding(
            client, "deep", args.deep_dim, cache=caches.get("deep"),
            async_push=overlap,
            optimizer=args.deep_optimizer, learning_rate=args.deep_lr,
            initializer="uniform", init_a=-0.05, init_b=0.05,
            seed=args.seed + 1)
        # The 13 linear weights and the bias: ps-train's dense tensor
        # "wide_linear" (one block of 14 floats, key 0, FTRL).
        self.linear = psdb.torch.Embedding(
            client, "wide_linear", NUM_INT + 1, seed=args.seed + 2, **ftrl)
        generator = torch.Generator().manual_seed(args.seed)
        self.mlp = mlp([NUM_CAT * args.deep_dim + NUM_INT] + args.hidden + [1],
                       generator)
        self._zero = torch.zeros(1, dtype=torch.int64)

    @staticmethod
    def unique(keys):
        """A batch's keys (n, 26) sorted once for both tables (UniqueIds)."""
        return psdb.torch.UniqueIds(keys.view(np.int64))

    def forward(self, keys, dense, step=None, prefetch=None):
        """keys: (n, 26) uint64 or their unique(); dense: (n, 13); prefetch:
        the next batch's unique(), fetched while this one computes."""
        if not isinstance(keys, psdb.torch.UniqueIds):
            keys = self.unique(keys)
        dense = torch.from_numpy(dense)
        wide = self.wide(keys, step=step)                     # (n, 1)
        deep = self.deep(keys, step=step).flatten(1)          # (n, 26 * d)
        lin = self.linear(self._zero, step=step)[0]           # (14,)
        if prefetch is not None:
            self.prefetch(prefetch)
        wide_logit = wide[:, 0] + dense @ lin[:NUM_INT] + lin[NUM_INT]
        deep_logit = self.mlp(torch.cat([deep, dense], 1))[:, 0]
        return wide_logit + deep_logit, wide_logit, deep_logit

    def prefetch(self, keys):
        """keys: the next batch's unique() (announced, then fetched)."""
        self.wide.prefetch(keys)
        self.deep.prefetch(keys)

    def flush(self):
        self.wide.flush()
        self.deep.flush()
        self.linear.flush()


# ---------------------------------------------------------------------------
# The job.

def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--data", required=True, help="Criteo-format directory")
    p.add_argument("--checkpoint_dir", required=True,
                   help="reports and checkpoints")
    p.add_argument("--store", default=None,
                   help="psdb URL (default $PSDB_URL, else local:CDIR/store)")
    p.add_argument("--epochs", type=int, default=1)
    p.add_argument("--batch_size", type=int, default=512)
    p.add_argument("--max_steps", type=int, default=0, help="0 = no limit")
    p.add_argument("--log_every", type=int, default=200)
    p.add_argument("--cache_rows", type=int, default=1 << 18,
                   help="rows per table in the worker cache (0 = none)")
    p.add_argument("--cache_policy", default="lru",
                   choices=["lru", "lfu", "lookahead"])
    p.add_argument("--cache_mode", default="write_back",
                   choices=["write_back", "push_through"])
    p.add_argument("--no_prefetch", action="store_true")
    p.add_argument("--sync_push", action="store_true",
                   help="push the embedding gradients in backward() itself; "
                   "by default they are pushed on a background thread while "
                   "the step goes on (same result: the next lookup waits "
                   "for them)")
    p.add_argument("--deep_optimizer", default="lazy_adam",
                   choices=["lazy_adam", "adagrad"])
    p.add_argument("--deep_lr", type=float, default=None,
                   help="default 0.002 (lazy_adam) or 0.05 (adagrad)")
    p.add_argument("--wide_lr", type=float, default=0.1,
                   help="the wide part's FTRL-Proximal alpha")
    p.add_argument("--wide_l2", type=float, default=0.0,
                   help="its per-example lambda2")
    p.add_argument("--dense_lr", type=float, default=0.001)
    p.add_argument("--deep_dim", type=int, default=16)
    p.add_argument("--hidden", default="256,128")
    p.add_argument("--seed", type=int, default=42)
    p.add_argument("--memory_budget_mb", type=int, default=1024)
    p.add_argument("--threads", type=int, default=0,
                   help="torch intra-op threads (0 = torch's default)")
    args = p.parse_args(argv)
    if args.deep_lr is None:
        args.deep_lr = 0.05 if args.deep_optimizer == "adagrad" else 0.002
    try:
        args.hidden = [int(w) for w in args.hidden.split(",")]
        if not args.hidden or min(args.hidden) < 1:
            raise ValueError
    except ValueError:
        p.error(f"--hidden must be comma-separated widths, got {args.hidden!r}")
    if args.batch_size < 1 or args.epochs < 1 or args.log_every < 1:
        p.error("--batch_size, --epochs and --log_every must be >= 1")
    if args.cache_rows and args.cache_rows < 2 * args.batch_size * NUM_CAT:
        p.error(f"--cache_rows {args.cache_rows} is too small for "
                f"--batch_size {args.batch_size}: a batch and its prefetched "
                f"successor may need {2 * args.batch_size * NUM_CAT} rows")
    if args.store is None:
        args.store = os.environ.get("PSDB_URL") or (
            "local:" + os.path.join(args.checkpoint_dir, "store"))
    return args


def open_store(url, memory_budget_mb):
    if url.startswith("local:"):
        return psdb.open(url, memory_budget_bytes=memory_budget_mb << 20)
    return psdb.open(url)


def evaluate(model, data, batch_size):
    """Predictions on `data` with serving pulls (no rows created)."""
    model.eval()
    probs = []
    with torch.no_grad():
        for keys, dense, _ in data.batches(batch_size):
            probs.append(torch.sigmoid(model(keys, dense)[0]).numpy())
    model.train()
    return np.concatenate(probs)


def load_data(data_dir):
    """(train CriteoData, test CriteoData or None, bayes_auc, seconds)."""
    train_files, test_files, bayes_auc = data_files(data_dir)
    t0 = time.perf_counter()
    train_data = CriteoData(train_files)
    test_data = CriteoData(test_files) if test_files else None
    return train_data, test_data, bayes_auc, time.perf_counter() - t0


def train(args, log=None, data=None):
    """Runs the job; `data` = load_data(args.data) if already loaded; the log
    goes to `log`, else to sys.stdout as it is at the call."""
    log = log or sys.stdout
    os.makedirs(args.checkpoint_dir, exist_ok=True)
    if args.threads > 0:
        torch.set_num_threads(args.threads)
    train_data, test_data, bayes_auc, load_seconds = data or load_data(
        args.data)
    malformed = train_data.malformed
    print(f"wide_deep.py: Wide&Deep on {args.data} ({len(train_data)} train, "
          f"{len(test_data) if test_data else 0} test examples parsed in "
          f"{load_seconds:.1f}s)", file=log)

    client = open_store(args.store, args.memory_budget_mb)
    caches = {}
    if args.cache_rows > 0:
        # Tables first, then one cache per embedding table (a psdb.torch
        # module's cache serves its table only).
        WideDeep(client, args)
        for table in ("wide", "deep"):
            caches[table] = psdb.VocabCache(
                client, tables=[table], capacity_rows=args.cache_rows,
                policy=args.cache_policy, mode=args.cache_mode)
    model = WideDeep(client, args, caches)
    dense_opt = torch.optim.Adam(model.mlp.parameters(), lr=args.dense_lr,
                                 betas=(0.9, 0.999), eps=1e-8)
    embeddings = (f"VocabCache ({args.cache_mode}, {args.cache_policy}, "
                  f"{args.cache_rows} rows per table)" if caches
                  else "psdb client (no cache)")
    embeddings += ", synchronous pushes" if args.sync_push else (
        ", pushes overlapped")
    print(f"wide_deep.py: store {args.store}; embeddings {embeddings}; batch "
          f"{args.batch_size}, {args.epochs} epoch(s)", file=log)
    log.flush()

    metrics = []
    csv_path = os.path.join(args.checkpoint_dir, "metrics.csv")
    step, samples = 0, 0
    window_loss, window_steps, last_loss = 0.0, 0, float("nan")
    window_wide, window_deep = 0.0, 0.0
    batches = [b for _ in range(args.epochs)
               for b in train_data.batches(args.batch_size)]
    epoch_of = [e + 1 for e in range(args.epochs)
                for _ in range(math.ceil(len(train_data) / args.batch_size))]
    if args.max_steps > 0:
        batches = batches[:args.max_steps]
    start = time.perf_counter()
    prefetch = not args.no_prefetch
    uniq = model.unique(batches[0][0]) if batches else None
    if uniq is not None and prefetch:
        model.prefetch(uniq)
    for i, (keys, dense, labels) in enumerate(batches):
        step += 1
        # The next batch's keys are sorted once, for its prefetch (after this
        # batch's lookups, as ps-train does) and for its own step.
        following = (model.unique(batches[i + 1][0])
                     if i + 1 < len(batches) else None)
        logit, wide_logit, deep_logit = model(
            uniq, dense, step=step, prefetch=following if prefetch else None)
        uniq = following
        target = torch.from_numpy(labels)
        loss = torch.nn.functional.binary_cross_entropy_with_logits(
            logit, target)
        # Each part's own log-loss, from the same forward pass (reported,
        # not trained): seed 004's wide_loss / deep_loss.
        with torch.no_grad():
            window_wide += float(
                torch.nn.functional.binary_cross_entropy_with_logits(
                    wide_logit, target))
            window_deep += float(
                torch.nn.functional.binary_cross_entropy_with_logits(
                    deep_logit, target))
        dense_opt.zero_grad()
        loss.backward()  # pushes the embedding gradients to psdb
        dense_opt.step()
        samples += len(labels)
        window_loss += float(loss)
        window_steps += 1
        if step % args.log_every == 0 or i + 1 == len(batches):
            last_loss = window_loss / window_steps
            wide_loss = window_wide / window_steps
            deep_loss = window_deep / window_steps
            print(f"epoch: {epoch_of[i]} step: {step}, loss is "
                  f"{last_loss:.4f}", file=log)
            # As ps-train: float32 in shortest form, seed 004's format
            # (str() of a numpy float32; format() would widen it to double).
            print(f"epoch: {epoch_of[i]} step: {step}, wide_loss is "
                  f"{str(np.float32(wide_loss))}, deep_loss is "
                  f"{str(np.float32(deep_loss))}", file=log)
            log.flush()
            metrics.append({"step": step, "epoch": epoch_of[i],
                            "samples": samples, "train_loss": last_loss,
                            "wide_loss": wide_loss, "deep_loss": deep_loss})
            window_loss, window_steps = 0.0, 0
            window_wide, window_deep = 0.0, 0.0
    # Timed like ps-train (train/trainer.cc): the training loop, not the
    # cache flush before evaluation.
    seconds = time.perf_counter() - start
    samples_per_sec = samples / seconds if seconds > 0 else 0.0
    flush_start = time.perf_counter()
    model.flush()
    flush_seconds = time.perf_counter() - flush_start

    result = {"auc": None, "bayes_auc": bayes_auc, "logloss": None}
    if test_data is not None:
        probs = evaluate(model, test_data, args.batch_size * 4)
        result["auc"] = auc(probs, test_data.labels)
        result["logloss"] = logloss(probs, test_data.labels)
        metrics.append({"step": step, "epoch": epoch_of[len(batches) - 1],
                        "samples": samples, "eval_auc": result["auc"],
                        "eval_logloss": result["logloss"]})
        extra = (f"; Bayes-optimal AUC {bayes_auc:.4f}"
                 if bayes_auc is not None else "")
        print(f"epoch: {epoch_of[len(batches) - 1]} step: {step}, eval AUC is "
              f"{result['auc']:.4f}, log-loss is {result['logloss']:.4f} "
              f"({len(test_data)} test examples{extra})", file=log)
    info = client.checkpoint(args.checkpoint_dir)
    checkpoint = info.get("path", "") if isinstance(info, dict) else str(info)

    hit_rate = None
    if caches:
        lookups = hits = 0
        for cache in caches.values():
            for t in _table_stats(cache.stats()):
                lookups += t.get("lookups", 0)
                hits += t.get("hits", 0)
        hit_rate = hits / lookups if lookups else None
    result.update({
        "samples_per_sec": samples_per_sec,
        "cache_hit_rate": hit_rate,
        "checkpoint": checkpoint,
        "steps": step,
        "samples": samples,
        "seconds": seconds,
        "load_seconds": load_seconds,
        "flush_seconds": flush_seconds,
        "last_train_loss": last_loss,
        "malformed_lines": malformed,
        "mode": "sync",
        "store": args.store,
        "embeddings": embeddings,
        "frontend": "python (psdb.torch)",
    })
    with open(csv_path, "w") as f:
        cols = ["step", "epoch", "samples", "train_loss", "eval_auc",
                "eval_logloss", "wide_loss", "deep_loss"]
        f.write(",".join(cols) + "\n")
        for row in metrics:
            f.write(",".join("" if row.get(c) is None else str(row[c])
                             for c in cols) + "\n")
    summary = os.path.join(args.checkpoint_dir, "summary.json")
    with open(summary + ".tmp", "w") as f:
        json.dump(result, f, indent=2)
        f.write("\n")
    os.replace(summary + ".tmp", summary)

    print("== summary", file=log)
    print(f"trained: {samples} samples, {step} steps in {seconds:.1f}s: "
          f"{samples_per_sec:.0f} samples/s ({malformed} malformed lines "
          f"skipped)", file=log)
    if result["auc"] is not None:
        gap = (f"; Bayes-optimal AUC {bayes_auc:.4f} (gap "
               f"{bayes_auc - result['auc']:.4f})" if bayes_auc else "")
        print(f"eval: AUC {result['auc']:.4f}, log-loss "
              f"{result['logloss']:.4f}{gap}", file=log)
    if hit_rate is not None:
        print(f"worker cache: hit rate {100 * hit_rate:.1f}%", file=log)
    print(f"checkpoint: {checkpoint}", file=log)
    print(f"reports: {summary}, {csv_path}", file=log)
    client.close()
    return result


def _table_stats(stats):
    """A cache's stats as a list of per-table dicts."""
    if isinstance(stats, dict):
        if "tables" in stats:
            return _table_stats(stats["tables"])
        if all(isinstance(v, dict) for v in stats.values()):
            return list(stats.values())
        return [stats]
    return list(stats)


def main(argv=None):
    args = parse_args(argv)
    try:
        train(args)
    except (ValueError, KeyError, FileNotFoundError, ConnectionError) as e:
        print(f"wide_deep.py: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
