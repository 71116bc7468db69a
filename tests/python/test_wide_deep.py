"""examples/python/wide_deep.py: Wide&Deep in PyTorch over psdb tables.

Runs the example on a tiny Criteo-format set written here (labels from a
hidden logistic model over a few categorical fields, so a model that learns
beats AUC 0.5 by a wide margin) and checks its reports; and checks that
categorical values become the same keys as in ps-train.
"""

import ctypes
import ctypes.util
import json
import os
import re
import sys

import numpy as np
import pytest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..",
                                "examples", "python"))
import psdb  # noqa: E402
import wide_deep  # noqa: E402


def write_criteo(path, rows, rng, weights):
    """`rows` Criteo lines; click probability from the hidden `weights` of
    fields C1..C4 (vocab 20 each); some features missing; one malformed."""
    with open(path, "w") as f:
        for _ in range(rows):
            ids = rng.integers(0, 20, size=26)
            logit = sum(weights[j][ids[j]] for j in range(4))
            label = int(rng.random() < 1 / (1 + np.exp(-logit)))
            ints = [str(int(x)) if rng.random() > 0.1 else ""
                    for x in rng.integers(-2, 100, size=13)]
            cats = [f"{(j << 20) | int(v):08x}" if rng.random() > 0.05 else ""
                    for j, v in enumerate(ids)]
            f.write("\t".join([str(label)] + ints + cats) + "\n")
        f.write("not\ta\tcriteo\tline\n")


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory):
    d = tmp_path_factory.mktemp("criteo")
    rng = np.random.default_rng(3)
    weights = rng.normal(0, 1.5, size=(4, 20))
    write_criteo(d / "train.txt-00000", 1500, rng, weights)
    write_criteo(d / "train.txt-00001", 1500, rng, weights)
    write_criteo(d / "test.txt", 1000, rng, weights)
    return str(d)


@pytest.mark.parametrize("cache_rows,flags", [
    (0, []), (2 * 100 * 26, []), (2 * 100 * 26, ["--sync_push"])])
def test_trains_and_writes_summary(data_dir, tmp_path, capsys, cache_rows,
                                   flags):
    cdir = tmp_path / "ckpt"
    argv = ["--data", data_dir, "--checkpoint_dir", str(cdir),
            "--batch_size", "100", "--epochs", "2", "--log_every", "10",
            "--hidden", "32,16", "--deep_lr", "0.01",
            "--cache_rows", str(cache_rows)] + flags
    assert wide_deep.main(argv) == 0
    with open(cdir / "summary.json") as f:
        summary = json.load(f)
    assert summary["steps"] == 60
    assert summary["samples"] == 6000
    assert summary["malformed_lines"] == 2
    assert summary["samples_per_sec"] > 0
    assert summary["auc"] > 0.65, summary
    assert 0 < summary["logloss"] < 0.7
    assert os.path.isdir(summary["checkpoint"])
    assert summary["store"] == f"local:{cdir / 'store'}"
    if cache_rows:
        assert 0 < summary["cache_hit_rate"] <= 1
    else:
        assert summary["cache_hit_rate"] is None
    with open(cdir / "metrics.csv") as f:
        lines = f.read().splitlines()
    assert lines[0] == ("step,epoch,samples,train_loss,eval_auc,"
                        "eval_logloss,wide_loss,deep_loss")
    assert len(lines) == 1 + 6 + 1  # 6 loss lines, 1 eval line
    # Each loss line is followed by ps-train's per-part line (seed 004's
    # format, float32 in shortest form), whose values are metrics.csv's.
    rows = {int(r.split(",")[0]): r.split(",") for r in lines[1:7]}
    log = capsys.readouterr().out.splitlines()
    parts = [i for i, line in enumerate(log) if ", wide_loss is " in line]
    assert len(parts) == 6, log
    for i in parts:
        head, wide, deep = re.fullmatch(
            r"(epoch: \d+ step: (?:\d+)), wide_loss is ([0-9.e-]+), "
            r"deep_loss is ([0-9.e-]+)", log[i]).groups()
        assert log[i - 1].startswith(head + ", loss is ")
        step = int(head.split()[-1])
        for text, cell in ((wide, rows[step][6]), (deep, rows[step][7])):
            assert str(np.float32(text)) == text  # shortest float32 form
            assert np.float32(float(cell)) == np.float32(text)


def test_same_run_same_tables(data_dir, tmp_path):
    """Two runs with the same seed train the same model."""

    def run(sub, flags=()):
        cdir = tmp_path / sub
        assert wide_deep.main(["--data", data_dir, "--checkpoint_dir",
                               str(cdir), "--batch_size", "200",
                               "--hidden", "8", "--cache_rows", "20000",
                               *flags]) == 0
        with open(cdir / "summary.json") as f:
            auc = json.load(f)["auc"]
        with psdb.open(f"local:{cdir / 'store'}") as c:
            keys = wide_deep.CriteoData(
                [os.path.join(data_dir, "train.txt-00000")]).keys[:50]
            return auc, c.pull("deep", keys.reshape(-1), serving=True)

    # Overlapped pushes (the default) give the rows of synchronous ones.
    (auc_a, deep_a), (auc_b, deep_b) = run("a"), run("b", ["--sync_push"])
    np.testing.assert_array_equal(deep_a, deep_b)
    assert auc_a == auc_b


def test_bad_arguments_exit_with_usage(data_dir, tmp_path, capsys):
    with pytest.raises(SystemExit):
        wide_deep.main(["--data", data_dir, "--checkpoint_dir",
                        str(tmp_path), "--cache_rows", "10"])
    assert "too small" in capsys.readouterr().err
    assert wide_deep.main(["--data", str(tmp_path / "none"),
                           "--checkpoint_dir", str(tmp_path)]) == 1


# train/criteo_reader.cc: CategoricalKey(field, value, present) =
# HashKey(present ? value : 0, kCatSeedBase + 2 * field + !present), and
# util/hash.cc HashKey(key, seed) = XXH3_64bits_withSeed(8 LE bytes of key).
CAT_SEED_BASE = 0x7073646263617400  # "psdbcat\0"


def test_criteo_keys_are_ps_trains():
    """psdb.criteo_keys (the C++ CategoricalKey the example uses) against
    libxxhash's XXH3 with the reader's seeds, when libxxhash is installed."""
    name = ctypes.util.find_library("xxhash")
    if name is None:
        pytest.skip("libxxhash is not installed")
    lib = ctypes.CDLL(name)
    lib.XXH3_64bits_withSeed.restype = ctypes.c_uint64
    lib.XXH3_64bits_withSeed.argtypes = [ctypes.c_char_p, ctypes.c_size_t,
                                         ctypes.c_uint64]
    rng = np.random.default_rng(1)
    values = rng.integers(0, 2**64 - 1, size=(8, 26), dtype=np.uint64,
                          endpoint=True)
    values[0, :3] = [0, 1, 2**64 - 1]
    present = rng.random((8, 26)) < 0.8
    keys = psdb.criteo_keys(values, present)
    assert keys.shape == (8, 26) and keys.dtype == np.uint64
    for i in range(8):
        for f in range(26):
            if present[i, f]:
                want = lib.XXH3_64bits_withSeed(
                    int(values[i, f]).to_bytes(8, "little"), 8,
                    CAT_SEED_BASE + 2 * f)
            else:
                want = lib.XXH3_64bits_withSeed(bytes(8), 8,
                                                CAT_SEED_BASE + 2 * f + 1)
            assert keys[i, f] == want, (i, f)
    # A slice of fields keeps its field numbers.
    np.testing.assert_array_equal(
        psdb.criteo_keys(values[:, 5:9], present[:, 5:9], first_field=5),
        keys[:, 5:9])
    with pytest.raises(ValueError):
        psdb.criteo_keys(values, present[:, :3])
    with pytest.raises(ValueError):
        psdb.criteo_keys(values[:, :4], present[:, :4], first_field=23)


def test_auc_matches_mann_whitney():
    scores = np.array([0.1, 0.4, 0.35, 0.8, 0.4], np.float32)
    labels = np.array([0, 0, 1, 1, 1], np.float32)
    # Positive/negative pairs won: (0.35>0.1), (0.8>both), 0.4 vs 0.4 tie
    # (1/2), 0.4 > 0.1: 1 + 2 + 1.5 = 4.5 of 6.
    assert wide_deep.auc(scores, labels) == pytest.approx(4.5 / 6)
