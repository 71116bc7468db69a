"""tools/bench/lr_reference.py: the references ps-train's lr baseline is
checked against (docs/benchmarks/train.md, issue 18). Hand-computed values for the AUC
and for FTRL-Proximal's first updates, closed-form optima for the full-batch
fit, and a real `ps-train gen` directory read end to end."""

import math
import os
import subprocess
import sys

import numpy as np
import pytest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..",
                                "tools", "bench"))
import lr_reference as ref  # noqa: E402


def write_lines(path, rows):
    """rows: (label, {int index: value}, {field: value}) -> Criteo lines."""
    with open(path, "w") as f:
        for label, ints, cats in rows:
            fields = [str(label)]
            fields += [str(ints[j]) if j in ints else ""
                       for j in range(ref.NUM_INTS)]
            fields += [cats.get(c, "") for c in range(ref.NUM_CATS)]
            f.write("\t".join(fields) + "\n")


def test_auc_counts_ties_as_half():
    # Positive-negative pairs: (0.4, 0.1) 1, (0.4, 0.4) 1/2, (0.8, *) 2.
    assert ref.auc([0, 1, 0, 1], [0.1, 0.4, 0.4, 0.8]) == 3.5 / 4
    assert ref.auc([1, 0], [0.2, 0.9]) == 0.0


def test_ftrl_proximal_first_updates_by_hand():
    idx, x = ref.FtrlProximal.features(np.zeros(ref.NUM_INTS),
                                       ["a"] + [""] * (ref.NUM_CATS - 1))
    assert len(idx) == 1 + ref.NUM_INTS + 1  # bias, integers, one value
    model = ref.FtrlProximal(alpha=0.5, beta=1.0, l1=0.0, l2=0.0)
    model.learn(idx, x, 1.0)
    # w = 0, p = 1/2, g = -1/2 on the bias and the value; sigma = (1/2 -
    # 0) / alpha = 1, z = g = -1/2, n = 1/4; then w = -z / ((beta +
    # sqrt(n)) / alpha) = 0.5 / 3 on both, 0 on the integers (x = 0).
    w = model.weights(idx)
    assert w[0] == w[-1] == 0.5 / 3.0
    assert not w[1:1 + ref.NUM_INTS].any()
    assert model.logit(idx, x) == 2 * (0.5 / 3.0)
    # l1 above |z| holds a weight at 0; l2 adds to the denominator.
    sparse = ref.FtrlProximal(0.5, 1.0, 0.6, 0.0)
    sparse.learn(idx, x, 1.0)
    assert not sparse.weights(idx).any()
    shrunk = ref.FtrlProximal(0.5, 1.0, 0.0, 1.0)
    shrunk.learn(idx, x, 1.0)
    assert shrunk.weights(idx)[0] == 0.5 / (3.0 + 1.0)


def test_full_batch_fit_reaches_the_closed_form_optimum(tmp_path):
    torch = pytest.importorskip("torch")
    del torch
    # Nothing but the bias: its optimum is the log-odds of the labels.
    path = str(tmp_path / "bias")
    write_lines(path, [(1, {}, {}), (1, {}, {}), (1, {}, {}), (0, {}, {})])
    rows = ref.Rows([path])
    predict, grad_norm = ref.map_fit(rows, [1.0] * ref.NUM_CATS, 1.0)
    assert grad_norm < 1e-6
    np.testing.assert_allclose(predict(rows), math.log(3.0), rtol=1e-6)
    # One field, value "a" in 2 rows (1 click), "b" in 2 (2 clicks); with a
    # huge penalty on field 0 its weights stay ~0 and the bias is the
    # log-odds of 3 clicks in 4; unseen and missing values score the bias.
    path = str(tmp_path / "field")
    write_lines(path, [(1, {}, {0: "a"}), (0, {}, {0: "a"}),
                       (1, {}, {0: "b"}), (1, {}, {0: "b"})])
    rows = ref.Rows([path])
    predict, grad_norm = ref.map_fit(rows, [1e9] + [1.0] * 25, 1.0)
    assert grad_norm < 1e-6
    np.testing.assert_allclose(predict(rows), math.log(3.0), atol=1e-6)
    # Penalty 0 on field 0: the bias and the two weights fit each value's
    # click rate, which for "b" (all clicks) has no finite optimum; with
    # penalty 1 the stationary point is the optimum, and "a" scores below
    # "b", an unseen value in between (the bias alone).
    predict, grad_norm = ref.map_fit(rows, [1.0] * ref.NUM_CATS, 1.0)
    assert grad_norm < 1e-6
    path = str(tmp_path / "unseen")
    write_lines(path, [(0, {}, {0: "a"}), (0, {}, {0: "c"}), (0, {}, {0: "b"}),
                       (0, {}, {})])
    a, unseen, b, missing = predict(ref.Rows([path]))
    assert a < unseen < b
    assert unseen == missing


def test_reads_a_ps_train_gen_directory(tmp_path):
    binary_dir = os.environ.get("PSDB_BINARY_DIR")
    ps_train = os.path.join(binary_dir or "", "tools", "ps-train")
    if not binary_dir or not os.path.exists(ps_train):
        pytest.skip("no ps-train (PSDB_BINARY_DIR unset or not built)")
    out = str(tmp_path / "data")
    subprocess.run([ps_train, "gen", "--out", out, "--train_rows", "2000",
                    "--test_rows", "500", "--max_vocab", "300"], check=True,
                   stdout=subprocess.DEVNULL)
    train, test = ref.load(out)
    assert len(train.labels) == 2000 and len(test.labels) == 500
    stds = ref.field_weight_std(out)
    assert len(stds) == ref.NUM_CATS
    assert all(0 <= s <= 0.5 for s in stds)  # cat_weight_std 0.5
    # Textbook FTRL-Proximal learns something on 2000 rows.
    assert ref.ftrl_auc(train, test, 0.2, 1.0, 1.0, 1.0) > 0.6
