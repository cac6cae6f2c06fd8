"""The digits data set of Debian's python3-sklearn (1797 8x8 images of the
digits 0-9, from sklearn/datasets/data/digits.csv.gz: 64 pixel values in
0..16, then the label) as the .npy files `mlc train --input` reads:
x.npy f32[1797, 64] (pixels / 16) and y.npy i32[1797], rows in an order
shuffled once with a fixed seed, so that `--eval-split 0.2` holds out a
random fifth (the file lists the writers in turn).

Usage: prepare.py OUTDIR"""
import gzip
import os
import sys

import numpy as np

CSV = "/usr/lib/python3/dist-packages/sklearn/datasets/data/digits.csv.gz"


def load():
    with gzip.open(CSV, "rt") as f:
        a = np.loadtxt(f, delimiter=",")
    order = np.random.default_rng(0).permutation(len(a))
    a = a[order]
    return (a[:, :64] / 16).astype(np.float32), a[:, 64].astype(np.int32)


if __name__ == "__main__":
    out = sys.argv[1] if len(sys.argv) > 1 else "."
    os.makedirs(out, exist_ok=True)
    x, y = load()
    np.save(os.path.join(out, "x.npy"), x)
    np.save(os.path.join(out, "y.npy"), y)
    print(f"{out}/x.npy f32{list(x.shape)}, {out}/y.npy i32{list(y.shape)}")
