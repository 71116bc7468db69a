#!/usr/bin/python3
"""Binding overhead of the psdb Python package: pulls and Adagrad pushes of
Zipf batches on an embedded store held in memory, through psdb.Client from
Python, against the same batches looped in C++ over the same
ParameterClient (psdb._psdb._bench_loop) in the same run. Rounds alternate
Python and C++ so both see the same machine; rows/s is the median round.

    PYTHONPATH=build/release/python /usr/bin/python3 \\
        tools/bench/python_binding_bench.py [--rows=1048576] [--dim=64] ...

Prints one table: op, Python rows/s, C++ rows/s, ratio (target >= 0.8).
"""

import argparse
import json
import os
import platform
import shutil
import statistics
import sys
import tempfile
import time

import numpy as np

import psdb
from psdb import _psdb


def zipf_batches(rows, alpha, batches, batch_keys, seed):
    """Bounded Zipf(alpha) ranks over `rows` keys, scattered over the id
    space by an odd multiplier (a bijection mod 2^64)."""
    rng = np.random.default_rng(seed)
    weights = 1.0 / np.arange(1, rows + 1, dtype=np.float64) ** alpha
    cdf = np.cumsum(weights)
    cdf /= cdf[-1]
    ranks = np.searchsorted(cdf, rng.random((batches, batch_keys)))
    ranks = np.minimum(ranks, rows - 1).astype(np.uint64)
    return ranks * np.uint64(0x9E3779B97F4A7C15)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=1 << 20)
    parser.add_argument("--dim", type=int, default=64)
    parser.add_argument("--batch_keys", type=int, default=4096)
    parser.add_argument("--batches", type=int, default=128, help="batches per round")
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--alpha", type=float, default=1.05)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--dir", default=None, help="scratch directory (default: a new temp dir)")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()

    scratch = args.dir or tempfile.mkdtemp(prefix="psdb-pybench-")
    batches = zipf_batches(args.rows, args.alpha, args.batches, args.batch_keys, args.seed)
    grads = (np.random.default_rng(args.seed + 1)
             .standard_normal((args.batch_keys, args.dim)).astype(np.float32) * 1e-3)
    table_bytes = args.rows * args.dim * 4 * 3  # values + Adagrad state + headroom
    results = {}
    try:
        with psdb.open(f"local:{scratch}/store", memory_budget_bytes=max(table_bytes, 1 << 30),
                       background_eviction=False) as client:
            client.create_table("t", args.dim, optimizer="adagrad", learning_rate=0.01,
                                seed=args.seed)
            # Create every row the stream can touch before measuring.
            for ids in np.array_split(np.unique(batches), max(1, batches.size // 65536)):
                client.pull("t", ids)
            out = np.empty((args.batch_keys, args.dim), dtype=np.float32)

            def py_pull():
                for ids in batches:
                    client.pull("t", ids)

            def py_pull_out():
                for ids in batches:
                    client.pull("t", ids, out=out)

            def py_push():
                for ids in batches:
                    client.push("t", ids, grads)

            def timed(fn):
                start = time.perf_counter()
                fn()
                return time.perf_counter() - start

            cases = {
                "pull": (py_pull, lambda: _psdb._bench_loop(client, "t", batches, "pull")),
                "pull(out=)": (py_pull_out, lambda: _psdb._bench_loop(client, "t", batches, "pull")),
                "push": (py_push, lambda: _psdb._bench_loop(client, "t", batches, "push", grads)),
            }
            keys = args.batches * args.batch_keys
            for name, (python, cpp) in cases.items():
                python()  # warm-up
                cpp()
                py_rates, cpp_rates = [], []
                for _ in range(args.rounds):
                    py_rates.append(keys / timed(python))
                    cpp_rates.append(keys / cpp())
                py_rate, cpp_rate = statistics.median(py_rates), statistics.median(cpp_rates)
                results[name] = dict(python_rows_per_s=py_rate, cpp_rows_per_s=cpp_rate,
                                     ratio=py_rate / cpp_rate)
    finally:
        if args.dir is None:
            shutil.rmtree(scratch, ignore_errors=True)

    machine = dict(cpus=os.cpu_count(), cpu=platform.processor() or platform.machine(),
                   python=sys.version.split()[0])
    try:
        with open("/proc/cpuinfo") as f:
            machine["cpu"] = next(l.split(":", 1)[1].strip() for l in f if l.startswith("model name"))
    except (OSError, StopIteration):
        pass
    if args.json:
        print(json.dumps(dict(params=vars(args), machine=machine, results=results), indent=2))
        return
    print(f"python binding: {args.rows} rows, dim {args.dim}, {args.batch_keys}-key batches, "
          f"Zipf {args.alpha}, {args.batches} batches x {args.rounds} alternating rounds, "
          f"Adagrad pushes, embedded store in memory")
    print(f"machine: {machine['cpu']}, {machine['cpus']} CPUs, Python {machine['python']}")
    print(f"{'op':<12}{'Python rows/s':>16}{'C++ rows/s':>16}{'ratio':>8}")
    for name, r in results.items():
        print(f"{name:<12}{r['python_rows_per_s']:>16,.0f}{r['cpp_rows_per_s']:>16,.0f}"
              f"{r['ratio']:>8.2f}")


if __name__ == "__main__":
    main()
