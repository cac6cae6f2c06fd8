"""The digits MLP trained from Python through the mlc binding: the artifact
of examples/mlp.mdl with inputs=64 hidden=64 (batch 32), PyTorch's default
initialisation (seed 0), 1500 SGD steps over the first 80 % of the rows of
prepare.py's files, reshuffled every epoch, then the accuracy of m.forward
on the held-out fifth.

    mlc compile examples/mlp.mdl --target cpu -o out/digits inputs=64 hidden=64
    python3 examples/digits/prepare.py data/digits
    PYTHONPATH=python python3 examples/digits/train.py out/digits data/digits [W.safetensors]"""
import os
import sys

import numpy as np

import mlc
from accuracy import held_out


def main():
    artifact, datadir = sys.argv[1], sys.argv[2]
    m = mlc.load(artifact)
    m.init_weights(0)
    (batch, _), = [shape for name, _, shape in m.entries()["train"]["inputs"] if name == "x"]
    x, y = np.load(os.path.join(datadir, "x.npy")), np.load(os.path.join(datadir, "y.npy"))
    hx, hy = held_out(datadir)
    n = len(x) - len(hx)  # the rows to train on
    rng = np.random.default_rng(0)
    order = rng.permutation(n)
    for step in range(1500):
        j = step % (n // batch)
        if j == 0 and step:
            order = rng.permutation(n)
        rows = order[j * batch:(j + 1) * batch]
        loss = m.train_step(x[rows], y[rows])
        if (step + 1) % 500 == 0:
            print(f"step {step + 1}: loss {loss:.6f}")
    # forward takes whole batches: pad the last one and drop what the padding gives
    pad = -len(hx) % batch
    px = np.concatenate([hx, np.zeros((pad, hx.shape[1]), np.float32)])
    pred = np.concatenate([m.forward(px[i:i + batch]).argmax(1) for i in range(0, len(px), batch)])[:len(hx)]
    right = int((pred == hy).sum())
    print(f"held-out accuracy: {right / len(hy):.4f} ({right} of {len(hy)})")
    if len(sys.argv) > 3:
        m.save_weights(sys.argv[3])
        np.save(sys.argv[3] + ".pred.npy", pred)


if __name__ == "__main__":
    main()
