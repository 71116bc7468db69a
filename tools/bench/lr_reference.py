#!/usr/bin/python3
"""References for ps-train's lr baseline on `ps-train gen` data (issue 18).

Logistic regressions on the features ps-train's lr sees (one weight per
categorical value, linear weights on log1p of the 13 integers), written
independently of psdb so its baseline can be checked against them:

  ftrl   FTRL-Proximal (McMahan et al. 2013) as the paper gives it: one
         pass, one example at a time, per-coordinate rates, categorical
         values hashed into 2^22 buckets ("a hashed-feature FTRL-LR").
  l2     the L2-regularized log-likelihood maximized to convergence (full
         batch L-BFGS, float64): what a one-pass LR approaches at best.
  prior  the same with field f's penalty 1 / std_f^2 from meta.json's
         field_weight_std: the MAP estimate under the generator's own
         prior. On the additive kind, whose labels come from exactly this
         model class, it is the learnable ceiling: no model trained on the
         same rows can be expected to rank the test set much better.

Prints one line per run: "DATA RUN AUC". Needs numpy, and torch for l2 and
prior (Debian's python3-numpy, python3-torch).

    /usr/bin/python3 tools/bench/lr_reference.py DATA_DIR \\
        [--ftrl ALPHA,BETA,L1,L2 ...] [--l2 LAMBDA ...] [--prior]
"""

import argparse
import json
import math
import os
import zlib

import numpy as np

NUM_INTS = 13
NUM_CATS = 26
BUCKETS = 1 << 22
# GeneratorOptions::int_weight_std: the integer weights' prior std.
INT_WEIGHT_STD = 0.15


class Rows:
    """Labels, log1p of the integers (0 where missing), categorical
    strings ("" where missing)."""

    def __init__(self, paths):
        labels, ints, cats = [], [], []
        for path in paths:
            with open(path) as f:
                for line in f:
                    p = line.rstrip("\n").split("\t")
                    if len(p) != 1 + NUM_INTS + NUM_CATS:
                        raise ValueError("%s: %d fields, expected %d" %
                                         (path, len(p),
                                          1 + NUM_INTS + NUM_CATS))
                    labels.append(int(p[0]))
                    ints.append([math.log1p(int(x)) if x else 0.0
                                 for x in p[1:1 + NUM_INTS]])
                    cats.append(p[1 + NUM_INTS:])
        self.labels = np.array(labels, np.float64)
        self.ints = np.array(ints, np.float64).reshape(-1, NUM_INTS)
        self.cats = cats


def load(data_dir):
    """(train, test) of a `ps-train gen` directory: train* and test* files."""
    names = sorted(os.listdir(data_dir))
    train = [os.path.join(data_dir, n) for n in names if n.startswith("train")]
    test = [os.path.join(data_dir, n) for n in names if n.startswith("test")]
    if not train or not test:
        raise ValueError("%s: need train* and test* files" % data_dir)
    return Rows(train), Rows(test)


def auc(labels, scores):
    """Area under the ROC curve; tied scores share their mean rank."""
    labels = np.asarray(labels, np.float64)
    scores = np.asarray(scores, np.float64)
    order = np.argsort(scores, kind="mergesort")
    ordered = scores[order]
    starts = np.flatnonzero(np.r_[True, ordered[1:] != ordered[:-1]])
    ends = np.r_[starts[1:], len(scores)]
    ranks = np.empty(len(scores))
    for s, e in zip(starts, ends):
        ranks[order[s:e]] = (s + 1 + e) / 2.0  # mean of ranks s+1 .. e
    pos = labels.sum()
    neg = len(labels) - pos
    return (ranks[labels == 1].sum() - pos * (pos + 1) / 2) / (pos * neg)


class FtrlProximal:
    """Per-example FTRL-Proximal logistic regression (Algorithm 1 of
    McMahan et al. 2013). Coordinate 0 is the bias, 1..13 the integers,
    then the hashed categorical buckets."""

    def __init__(self, alpha, beta, l1, l2):
        self.alpha, self.beta, self.l1, self.l2 = alpha, beta, l1, l2
        self.z = np.zeros(1 + NUM_INTS + BUCKETS)
        self.n = np.zeros(1 + NUM_INTS + BUCKETS)

    @staticmethod
    def features(ints, cats):
        """(coordinates, values) of one example."""
        idx = list(range(1 + NUM_INTS))
        idx += [1 + NUM_INTS + zlib.crc32(b"%d:%s" % (f, v.encode())) % BUCKETS
                for f, v in enumerate(cats) if v]
        x = np.ones(len(idx))
        x[1:1 + NUM_INTS] = ints
        return np.array(idx, np.int64), x

    def weights(self, idx):
        z, n = self.z[idx], self.n[idx]
        w = -(z - np.sign(z) * self.l1) / (
            (self.beta + np.sqrt(n)) / self.alpha + self.l2)
        w[np.abs(z) <= self.l1] = 0.0
        return w

    def logit(self, idx, x):
        return float(self.weights(idx) @ x)

    def learn(self, idx, x, label):
        w = self.weights(idx)
        p = 1.0 / (1.0 + math.exp(-max(min(float(w @ x), 35.0), -35.0)))
        g = (p - label) * x
        n = self.n[idx]
        sigma = (np.sqrt(n + g * g) - np.sqrt(n)) / self.alpha
        np.add.at(self.z, idx, g - sigma * w)
        np.add.at(self.n, idx, g * g)


def ftrl_auc(train, test, alpha, beta, l1, l2):
    model = FtrlProximal(alpha, beta, l1, l2)
    for i in range(len(train.labels)):
        idx, x = FtrlProximal.features(train.ints[i], train.cats[i])
        model.learn(idx, x, train.labels[i])
    scores = [model.logit(*FtrlProximal.features(test.ints[i], test.cats[i]))
              for i in range(len(test.labels))]
    return auc(test.labels, scores)


class OneHot:
    """Each field's training values numbered, plus one slot per field,
    held at 0, for missing and unseen values."""

    def __init__(self, train):
        self.vocab = [{} for _ in range(NUM_CATS)]
        for row in train.cats:
            for f, v in enumerate(row):
                if v:
                    self.vocab[f].setdefault(v, len(self.vocab[f]))
        sizes = [len(v) + 1 for v in self.vocab]
        self.offsets = np.cumsum([0] + sizes)
        self.size = int(self.offsets[-1])
        self.field = np.repeat(np.arange(NUM_CATS), sizes)
        self.empty = self.offsets[1:] - 1

    def columns(self, rows):
        out = np.empty((len(rows.cats), NUM_CATS), np.int64)
        for r, row in enumerate(rows.cats):
            for f, v in enumerate(row):
                empty = len(self.vocab[f])
                out[r, f] = self.offsets[f] + (
                    self.vocab[f].get(v, empty) if v else empty)
        return out


def map_fit(train, field_penalty, int_penalty, max_iter=2000):
    """Maximizes sum log-likelihood - sum_f field_penalty[f] / 2 |w_f|^2 -
    int_penalty / 2 |a|^2 (the bias free). Returns (predict, gradient norm
    at the optimum), predict(rows) giving the logits."""
    import torch  # only the full-batch fits need it
    onehot = OneHot(train)
    cols = torch.from_numpy(onehot.columns(train))
    ints = torch.from_numpy(train.ints)
    labels = torch.from_numpy(train.labels)
    keep = torch.ones(onehot.size, dtype=torch.float64)
    keep[torch.from_numpy(onehot.empty)] = 0
    penalty = torch.tensor(field_penalty, dtype=torch.float64)[
        torch.from_numpy(onehot.field)]
    w = torch.zeros(onehot.size, dtype=torch.float64, requires_grad=True)
    a = torch.zeros(NUM_INTS, dtype=torch.float64, requires_grad=True)
    b = torch.zeros(1, dtype=torch.float64, requires_grad=True)
    opt = torch.optim.LBFGS([w, a, b], lr=1, max_iter=max_iter,
                            history_size=20, tolerance_grad=1e-7,
                            tolerance_change=1e-12,
                            line_search_fn="strong_wolfe")

    def objective():
        opt.zero_grad()
        wk = w * keep
        logit = b + ints @ a + wk[cols].sum(1)
        loss = torch.nn.functional.binary_cross_entropy_with_logits(
            logit, labels, reduction="sum")
        loss = (loss + 0.5 * (penalty * wk * wk).sum() +
                0.5 * int_penalty * (a * a).sum())
        loss.backward()
        return loss

    opt.step(objective)
    objective()
    grad_norm = math.sqrt(sum(float((p.grad * p.grad).sum())
                              for p in (w, a, b)))

    def predict(rows):
        with torch.no_grad():
            wk = w * keep
            return (b + torch.from_numpy(rows.ints) @ a +
                    wk[torch.from_numpy(onehot.columns(rows))].sum(1)).numpy()

    return predict, grad_norm


def field_weight_std(data_dir):
    with open(os.path.join(data_dir, "meta.json")) as f:
        meta = json.load(f)
    if "field_weight_std" not in meta:
        raise ValueError("%s/meta.json has no field_weight_std (written by "
                         "an older ps-train gen)" % data_dir)
    return meta["field_weight_std"]


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("data_dir")
    parser.add_argument("--ftrl", action="append", default=[],
                        help="ALPHA,BETA,L1,L2 of one FTRL-Proximal run")
    parser.add_argument("--l2", action="append", type=float, default=[],
                        help="LAMBDA of one fit to convergence")
    parser.add_argument("--prior", action="store_true",
                        help="MAP under meta.json's per-field weight stds")
    args = parser.parse_args()
    name = os.path.basename(os.path.normpath(args.data_dir))
    train, test = load(args.data_dir)
    for spec in args.ftrl:
        alpha, beta, l1, l2 = (float(v) for v in spec.split(","))
        print("%s ftrl(%g,%g,%g,%g) %.4f" %
              (name, alpha, beta, l1, l2,
               ftrl_auc(train, test, alpha, beta, l1, l2)), flush=True)
    fits = [("l2(%g)" % lam, [lam] * NUM_CATS, lam) for lam in args.l2]
    if args.prior:
        # A field whose std is 0 has no weights: an infinite penalty.
        fits.append(("prior",
                     [1.0 / max(s, 1e-9)**2
                      for s in field_weight_std(args.data_dir)],
                     1.0 / INT_WEIGHT_STD**2))
    for run, field_penalty, int_penalty in fits:
        predict, _ = map_fit(train, field_penalty, int_penalty)
        print("%s %s %.4f" % (name, run, auc(test.labels, predict(test))),
              flush=True)


if __name__ == "__main__":
    main()
