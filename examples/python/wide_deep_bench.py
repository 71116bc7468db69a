#!/usr/bin/env python3
"""Wide&Deep training speed: psdb.torch (embeddings in psdb, worker cache on)
against pure PyTorch (torch.nn.EmbeddingBag / Embedding in RAM).

    PYTHONPATH=build/release/python /usr/bin/python3 \
        examples/python/wide_deep_bench.py --data DIR [--repeats 3]

Both run the same model (examples/python/wide_deep.py: wide dim-1 sums, deep
dim-16 embeddings, the 13 integer features, MLP 429-256-128-1) with the same
batch size on the same pre-parsed examples, one epoch each, in alternating
rounds (psdb, torch, psdb, torch, ...), each psdb round on a fresh local
store. Only the training loop is timed (the data are parsed once, before).

The pure-PyTorch baseline gets its best case: the uint64 keys are mapped to
row indices of in-RAM tables once, outside the timing (a vocabulary it is
given), embeddings use sparse gradients, and torch's sparse optimizers stand
in for psdb's (torch has no FTRL or LazyAdam): Adagrad for the wide part,
SparseAdam for the deep part, Adam for the dense part.

Prints one line per round and a summary; --json FILE writes the figures.
"""

import argparse
import io
import json
import os
import statistics
import sys
import tempfile
import time

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import wide_deep  # noqa: E402  (the example, next to this file)


class TorchWideDeep(torch.nn.Module):
    """The same Wide&Deep with in-RAM torch tables of `vocab` rows."""

    def __init__(self, vocab, args):
        super().__init__()
        g = torch.Generator().manual_seed(args.seed)
        self.wide = torch.nn.EmbeddingBag(vocab, 1, mode="sum", sparse=True)
        self.deep = torch.nn.Embedding(vocab, args.deep_dim, sparse=True)
        self.linear = torch.nn.Linear(wide_deep.NUM_INT, 1)
        with torch.no_grad():
            self.wide.weight.zero_()
            self.deep.weight.uniform_(-0.05, 0.05, generator=g)
            self.linear.weight.zero_()
            self.linear.bias.zero_()
        self.mlp = wide_deep.mlp(
            [wide_deep.NUM_CAT * args.deep_dim + wide_deep.NUM_INT]
            + args.hidden + [1], g)

    def forward(self, idx, dense):
        deep = self.deep(idx).flatten(1)
        return (self.wide(idx)[:, 0] + self.linear(dense)[:, 0]
                + self.mlp(torch.cat([deep, dense], 1))[:, 0])


def run_torch(args, train_data, test_data):
    keys = [train_data.keys] + ([test_data.keys] if test_data else [])
    vocab, inverse = np.unique(np.concatenate([k.reshape(-1) for k in keys]),
                               return_inverse=True)
    n_train = train_data.keys.size
    train_idx = inverse[:n_train].reshape(train_data.keys.shape)
    test_idx = inverse[n_train:].reshape(-1, wide_deep.NUM_CAT)
    model = TorchWideDeep(len(vocab), args)
    opts = [
        torch.optim.Adagrad(model.wide.parameters(), lr=args.wide_lr,
                            initial_accumulator_value=0.1),
        torch.optim.SparseAdam(model.deep.parameters(), lr=args.deep_lr),
        torch.optim.Adam(list(model.linear.parameters())
                         + list(model.mlp.parameters()), lr=args.dense_lr),
    ]
    bs = args.batch_size
    samples = 0
    start = time.perf_counter()
    for s in range(0, len(train_data), bs):
        idx = torch.from_numpy(train_idx[s:s + bs])
        dense = torch.from_numpy(train_data.dense[s:s + bs])
        y = torch.from_numpy(train_data.labels[s:s + bs])
        loss = torch.nn.functional.binary_cross_entropy_with_logits(
            model(idx, dense), y)
        for o in opts:
            o.zero_grad()
        loss.backward()
        for o in opts:
            o.step()
        samples += len(y)
    seconds = time.perf_counter() - start
    result = {"samples_per_sec": samples / seconds, "seconds": seconds}
    if test_data is not None:
        with torch.no_grad():
            probs = torch.sigmoid(model(torch.from_numpy(test_idx),
                                        torch.from_numpy(test_data.dense)))
        result["auc"] = wide_deep.auc(probs.numpy(), test_data.labels)
    return result


def run_psdb(args, data, workdir):
    argv = ["--data", args.data, "--checkpoint_dir", workdir,
            "--batch_size", str(args.batch_size),
            "--cache_rows", str(args.cache_rows),
            "--cache_policy", args.cache_policy,
            "--log_every", "1000000000"]
    if args.store:
        argv += ["--store", args.store]
    if args.no_prefetch:
        argv += ["--no_prefetch"]
    if args.sync_push:
        argv += ["--sync_push"]
    wd_args = wide_deep.parse_args(argv)
    log = io.StringIO()
    return wide_deep.train(wd_args, log=log, data=data)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--data", required=True)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--batch_size", type=int, default=512)
    p.add_argument("--cache_rows", type=int, default=1 << 18)
    p.add_argument("--cache_policy", default="lru")
    p.add_argument("--no_prefetch", action="store_true",
                   help="psdb: no prefetch of the next batch's rows")
    p.add_argument("--sync_push", action="store_true",
                   help="psdb: push in backward() (default: overlapped)")
    p.add_argument("--store", default=None,
                   help="psdb URL (default: a fresh local: store per round)")
    p.add_argument("--threads", type=int, default=0)
    p.add_argument("--json", default=None, help="write the figures here")
    args = p.parse_args()
    if args.threads > 0:
        torch.set_num_threads(args.threads)
    model_args = wide_deep.parse_args(["--data", args.data,
                                       "--checkpoint_dir", "unused"])
    model_args.batch_size = args.batch_size
    data = wide_deep.load_data(args.data)
    train_data, test_data = data[0], data[1]
    print(f"wide_deep_bench: {len(train_data)} train examples, batch "
          f"{args.batch_size}, torch {torch.__version__}, "
          f"{torch.get_num_threads()} torch threads, {os.cpu_count()} CPUs",
          flush=True)
    rounds = []
    with tempfile.TemporaryDirectory(prefix="wd-bench-") as tmp:
        for r in range(args.repeats):
            ps = run_psdb(args, data, os.path.join(tmp, f"round-{r}"))
            pt = run_torch(model_args, train_data, test_data)
            rounds.append({"psdb": ps["samples_per_sec"],
                           "torch": pt["samples_per_sec"],
                           "psdb_auc": ps["auc"], "torch_auc": pt.get("auc"),
                           "cache_hit_rate": ps["cache_hit_rate"]})
            print(f"round {r + 1}: psdb.torch {ps['samples_per_sec']:.0f} "
                  f"samples/s (AUC {ps['auc']:.4f}, cache hit rate "
                  f"{ps['cache_hit_rate'] or 0:.3f}); pure torch "
                  f"{pt['samples_per_sec']:.0f} samples/s (AUC "
                  f"{pt.get('auc', float('nan')):.4f}); ratio "
                  f"{ps['samples_per_sec'] / pt['samples_per_sec']:.2f}",
                  flush=True)
    ratios = [x["psdb"] / x["torch"] for x in rounds]
    summary = {
        "psdb_samples_per_sec": statistics.median(x["psdb"] for x in rounds),
        "torch_samples_per_sec": statistics.median(x["torch"] for x in rounds),
        "ratio_median": statistics.median(ratios),
        "ratio_min": min(ratios), "ratio_max": max(ratios),
        "target": 1.0, "rounds": rounds, "batch_size": args.batch_size,
        "prefetch": not args.no_prefetch, "cache_rows": args.cache_rows,
        "sync_push": args.sync_push,
        "train_examples": len(train_data),
    }
    print(f"psdb.torch / pure torch samples/s: median "
          f"{summary['ratio_median']:.2f} (min {summary['ratio_min']:.2f}, "
          f"max {summary['ratio_max']:.2f}) over {args.repeats} rounds; "
          "target >= 1.0: "
          f"{'met' if summary['ratio_median'] >= 1 else 'missed'}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(summary, f, indent=2)


if __name__ == "__main__":
    main()
