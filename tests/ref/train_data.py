"""`mlc train` inputs and initialisation:
  1. the same tokens as an llm.c .bin file (header + u16), a flat u16 file
     and a flat i32 file give identical losses;
  2. the initial parameters (no --weights) follow PyTorch's default
     initialisation: Linear U(-1/sqrt(in), 1/sqrt(in)), Embedding N(0, 1),
     norms ones, MultiheadAttention's in_proj xavier-uniform and biases zero
     (checked by range, mean and standard deviation, 5 sigma bounds);
  3. --seed changes them, and the same seed gives the same ones.
Usage: train_data.py MLC MODEL.mdl WORKDIR"""
import math
import os
import re
import subprocess
import sys

import numpy as np
import torch

from models import Checks, read_safetensors

SMALL = ["vocab=512", "dim=128", "layers=2", "heads=4", "batch=2", "seq=64"]
check = Checks()


def train(mlc, model, *args):
    r = subprocess.run([mlc, "train", model, "--target", "cpu", *SMALL, *args], capture_output=True, text=True)
    if r.returncode != 0:
        print(r.stderr)
    return re.findall(r"loss (\S+)", r.stdout)


def main():
    mlc, model, work = sys.argv[1], sys.argv[2], os.path.abspath(sys.argv[3])
    os.makedirs(work, exist_ok=True)
    tok = np.random.default_rng(0).integers(0, 512, 3 * 128 + 1).astype(np.int32)
    llmc, u16, i32 = (os.path.join(work, n) for n in ("tok.bin", "tok.u16", "tok.i32"))
    header = np.zeros(256, dtype=np.int32)
    header[:3] = [20240520, 1, len(tok)]
    with open(llmc, "wb") as f:
        f.write(header.tobytes() + tok.astype(np.uint16).tobytes())
    tok.astype(np.uint16).tofile(u16)
    tok.tofile(i32)
    a = train(mlc, model, "--data", llmc, "--steps", "3")
    b = train(mlc, model, "--data", u16, "--steps", "3")
    c = train(mlc, model, "--data", i32, "--data-dtype", "i32", "--steps", "3")
    check(len(a) == 3 and a == b == c, f"llm.c, u16 and i32 token files give the same losses {a}")

    # A .npy or torch.save file is refused by content, not read as tokens.
    npy, pt = os.path.join(work, "tok.npy"), os.path.join(work, "tok.pt")
    np.save(npy, tok)
    torch.save(torch.from_numpy(tok), pt)
    for path, what, load, flags, dt in (
            (npy, "a NumPy .npy file", f'numpy.load("{npy}")', [], "uint16"),
            (pt, "a PyTorch file (torch.save)", f'torch.load("{pt}").numpy()', ["--data-dtype", "i32"], "int32")):
        r = subprocess.run([mlc, "train", model, "--target", "cpu", *SMALL, "--data", path, *flags, "--steps", "1"],
                           capture_output=True, text=True)
        want = (f"mlc: --data {path}: this is {what}, not a token file; --data takes llm.c's .bin or raw little-endian "
                f"{dt} tokens; write them in Python:\n  {load}.astype(numpy.{dt}).tofile(\"tokens.bin\")")
        got = "\n".join(r.stderr.strip().splitlines()[-2:])
        ok = r.returncode == 1 and got == want
        check(ok, f"--data {os.path.basename(path)}: refused, with the Python that writes tokens"
              + ("" if ok else f"\n got: {got}\nwant: {want}"))

    ck = os.path.join(work, "init.ckpt")
    subprocess.run([mlc, "train", model, "--target", "cpu", *SMALL, "--steps", "0", "--save", ck], check=True,
                   capture_output=True)
    t, _ = read_safetensors(ck)
    for name, w in t.items():
        if name.startswith("optimizer."):
            check(bool((w == 0).all()), f"{name} starts at zero")
            continue
        w = w.double().flatten()
        n = w.numel()
        if "norm" in name:
            check(bool((w == 1).all()), f"{name}: ones")
        elif name.endswith("bias") and ".attn." in name:
            check(bool((w == 0).all()), f"{name}: zeros")
        elif name == "embed.weight":
            ok = abs(w.mean()) < 5 / math.sqrt(n) and abs(w.std() - 1) < 5 * math.sqrt(0.5 / n)
            check(ok, f"{name}: N(0, 1), mean {w.mean():.4f} std {w.std():.4f}")
        else:
            rows, cols = t[name].shape
            bound = math.sqrt(6 / (rows + cols)) if "in_proj_weight" in name else 1 / math.sqrt(cols)
            sd = bound / math.sqrt(3)
            ok = w.abs().max() <= bound and abs(w.mean()) < 5 * sd / math.sqrt(n) and abs(w.std() - sd) < 5 * sd / math.sqrt(n)
            check(ok, f"{name}: U(-{bound:.4f}, {bound:.4f}), max |w| {w.abs().max():.4f}, std {w.std():.5f} (want {sd:.5f})")
    ck2, ck3 = os.path.join(work, "seed1.ckpt"), os.path.join(work, "seed1b.ckpt")
    for path in (ck2, ck3):
        subprocess.run([mlc, "train", model, "--target", "cpu", *SMALL, "--steps", "0", "--seed", "1", "--save", path],
                       check=True, capture_output=True)
    t2, _ = read_safetensors(ck2)
    t3, _ = read_safetensors(ck3)
    check(not torch.equal(t["head.weight"], t2["head.weight"]), "--seed 1 gives other initial weights than seed 0")
    check(all(torch.equal(t2[k], t3[k]) for k in t2), "the same seed gives the same weights")
    sys.exit(check.finish())


if __name__ == "__main__":
    main()
