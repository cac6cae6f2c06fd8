"""Held-out accuracy of weights that `mlc train --export` (or the Python
binding's save_weights) wrote for the digits MLP, computed here with numpy
alone: Linear, GELU (exact, erf), Linear, GELU, Linear, argmax, on the rows
`--eval-split 0.2` held out (the last round(0.2 * 1797) = 359).

Usage: accuracy.py W.safetensors DATADIR"""
import json
import math
import os
import struct
import sys

import numpy as np

NP = {"F32": np.float32, "I32": np.int32, "I64": np.int64}


def read_safetensors(path):
    with open(path, "rb") as f:
        data = f.read()
    (n,) = struct.unpack("<Q", data[:8])
    out = {}
    for name, t in json.loads(data[8:8 + n]).items():
        if name != "__metadata__":
            a, b = t["data_offsets"]
            out[name] = np.frombuffer(data[8 + n + a:8 + n + b], dtype=NP[t["dtype"]]).reshape(t["shape"])
    return out


def held_out(datadir, split=0.2):
    x, y = np.load(os.path.join(datadir, "x.npy")), np.load(os.path.join(datadir, "y.npy"))
    n = int(split * len(x) + 0.5)
    return x[len(x) - n:], y[len(y) - n:]


def logits(w, x):
    erf = np.vectorize(math.erf)
    gelu = lambda h: 0.5 * h * (1 + erf(h / math.sqrt(2)))  # noqa: E731
    h = x.astype(np.float64)
    for i in (0, 2, 4):
        h = h @ w[f"net.{i}.weight"].T.astype(np.float64) + w[f"net.{i}.bias"]
        if i < 4:
            h = gelu(h)
    return h


if __name__ == "__main__":
    w = read_safetensors(sys.argv[1])
    x, y = held_out(sys.argv[2])
    right = int((logits(w, x).argmax(1) == y).sum())
    print(f"held-out accuracy: {right / len(y):.4f} ({right} of {len(y)})")
