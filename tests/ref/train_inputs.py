"""`mlc train --input NAME=FILE` against PyTorch, and every error path.

1. In order, with --eval-split: a small MLP (examples/mlp.mdl, batch 8) on 45
   random rows; the last 9 are held out (round(0.2 * 45)), the first 36 give
   4 batches an epoch (4 rows unused).  10 SGD steps cross two epochs; each
   loss and the validation loss at steps 5 and 10 (the mean over the one
   held-out batch, rows 36-43, with the weights of that step) must match
   torch.optim.SGD on the same batches within 1e-5 (absolute).
2. Shuffled (--shuffle 7), from safetensors files (x by its name, labels as
   the file's only tensor): the same, with the order recomputed here
   (splitmix64 Fisher-Yates per epoch, driver/dataset.c).
3. Every error of --input, --eval-input and the train flags: the exact
   message (last line of stderr) and exit status (1 for data, 2 for usage).

Usage: train_inputs.py MLC REPO_ROOT WORKDIR"""
import os
import re
import subprocess
import sys

import numpy as np
import torch

from models import MLP, write_safetensors

CFG = ["inputs=16", "hidden=32", "classes=10", "batch=8"]
M64 = (1 << 64) - 1


def splitmix64(state):
    state = (state + 0x9E3779B97F4A7C15) & M64
    z = state
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & M64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & M64
    return state, z ^ (z >> 31)


def perm(n, seed, epoch):
    rng = seed ^ ((epoch * 0xD1B54A32D192ED03) & M64)
    p = list(range(n))
    for i in range(n - 1, 0, -1):
        rng, r = splitmix64(rng)
        j = r % (i + 1)
        p[i], p[j] = p[j], p[i]
    return p


def reference(sd, x, y, steps, ntrain, batch, order, held=None, eval_every=0):
    """Losses (and validation losses) of torch SGD(lr=0.01, momentum=0.9) on
    batch k = rows order(epoch)[j*batch:(j+1)*batch]."""
    model = MLP(16, 32, 10)
    model.load_state_dict(sd)
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    nb = ntrain // batch
    losses, vals = [], []
    for k in range(steps):
        rows = order(k // nb)[(k % nb) * batch:(k % nb + 1) * batch]
        loss = torch.nn.functional.cross_entropy(model(x[rows]), y[rows].long())
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
        if held is not None and ((k + 1) % eval_every == 0 or k + 1 == steps):
            with torch.no_grad():
                hb = [torch.nn.functional.cross_entropy(model(x[r:r + batch]), y[r:r + batch].long()).item()
                      for r in range(held[0], held[0] + (held[1] // batch) * batch, batch)]
                vals.append(sum(hb) / len(hb))
    return losses, vals


def run(mlc, model, args):
    return subprocess.run([mlc, "train", model, "--target", "cpu", *CFG, *args], capture_output=True, text=True)


def main():
    mlc, root, work = sys.argv[1], sys.argv[2], os.path.abspath(sys.argv[3])
    os.makedirs(work, exist_ok=True)
    model = os.path.join(root, "examples", "mlp.mdl")
    torch.manual_seed(0)
    sd = {k: v.detach() for k, v in MLP(16, 32, 10).state_dict().items()}
    weights = os.path.join(work, "w.safetensors")
    write_safetensors(weights, sd, {"format": "pt"})
    x = torch.randn(45, 16)
    y = torch.randint(0, 10, (45,), dtype=torch.int32)
    p = lambda name: os.path.join(work, name)  # noqa: E731
    np.save(p("x.npy"), x.numpy())
    np.save(p("y.npy"), y.numpy())
    failed = 0

    def check(what, ok, detail=""):
        nonlocal failed
        failed += not ok
        print(("ok   " if ok else "FAIL ") + what + ("" if ok else "\n     " + detail))

    # 1. in order, held-out split, validation every 5 steps
    r = run(mlc, model, ["--weights", weights, "--input", f"x={p('x.npy')}", "--input", f"labels={p('y.npy')}",
                         "--eval-split", "0.2", "--eval-every", "5", "--steps", "10"])
    got = [float(v) for v in re.findall(r"^step \d+: loss (\S+) \([0-9.]+ ms, \d+ samples/s\)$", r.stdout, re.M)]
    gotv = [float(v) for v in re.findall(r"^step \d+: validation (\S+) \(mean over 1 held-out batches of 8\)$", r.stdout, re.M)]
    want, wantv = reference(sd, x, y, 10, 36, 8, lambda e: list(range(36)), held=(36, 9), eval_every=5)
    err = max((abs(a - b) for a, b in zip(got + gotv, want + wantv)), default=1.0)
    check(f"in order, --eval-split 0.2: 10 losses and 2 validation losses within 1e-5 of torch (max {err:.2e})",
          r.returncode == 0 and len(got) == 10 and len(gotv) == 2 and err <= 1e-5, r.stdout + r.stderr)

    # 2. shuffled, from safetensors
    write_safetensors(p("x.safetensors"), {"x": x, "other": torch.zeros(2)}, {})
    write_safetensors(p("y.safetensors"), {"targets": y}, {})
    r = run(mlc, model, ["--weights", weights, "--input", f"x={p('x.safetensors')}",
                         "--input", f"labels={p('y.safetensors')}", "--shuffle", "7", "--steps", "12"])
    got = [float(v) for v in re.findall(r"^step \d+: loss (\S+) ", r.stdout, re.M)]
    want, _ = reference(sd, x, y, 12, 45, 8, lambda e: perm(45, 7, e))
    err = max((abs(a - b) for a, b in zip(got, want)), default=1.0)
    check(f"--shuffle 7 from safetensors: 12 losses (3 epochs of 5 batches) within 1e-5 of torch (max {err:.2e})",
          r.returncode == 0 and len(got) == 12 and err <= 1e-5, r.stdout + r.stderr)

    # 3. errors
    np.save(p("x64.npy"), x.numpy().astype(np.float64))
    np.save(p("y64.npy"), y.numpy().astype(np.int64))
    np.save(p("x15.npy"), x.numpy()[:, :15])
    np.save(p("y2d.npy"), y.numpy().reshape(45, 1))
    np.save(p("x5.npy"), x.numpy()[:5])
    np.save(p("y44.npy"), y.numpy()[:44])
    np.save(p("xf.npy"), np.asfortranarray(x.numpy()))
    with open(p("garbage.npy"), "wb") as f:
        f.write(b"this is not numpy data at all")
    with open(p("x.npy"), "rb") as f:
        whole = f.read()
    with open(p("short.npy"), "wb") as f:
        f.write(whole[:128 + 1000])
    with open(p("x.csv"), "w") as f:
        f.write("1,2,3\n")
    torch.save({"x": x}, p("x.pt"))  # both by content, whatever the name
    np.savez(p("xy.data"), x=x.numpy(), labels=y.numpy())
    write_safetensors(p("two.safetensors"), {"a": x, "b": x}, {})
    write_safetensors(p("x64.safetensors"), {"x": x.double()}, {})
    X, Y = f"x={p('x.npy')}", f"labels={p('y.npy')}"
    data_errors = [
        (["--input", f"x={p('x64.npy')}", "--input", Y],
         f"{p('x64.npy')}: holds float64 ('<f8') data, input 'x' is f32[8, 16]: convert it (numpy: a.astype(numpy.float32))"),
        (["--input", X, "--input", f"labels={p('y64.npy')}"],
         f"{p('y64.npy')}: holds int64 ('<i8') data, input 'labels' is i32[8]: convert it (numpy: a.astype(numpy.int32))"),
        (["--input", f"x={p('x15.npy')}", "--input", Y],
         f"{p('x15.npy')}: holds an array of shape [45, 15], input 'x' is f32[8, 16]: expected [rows, 16], one row (axis 0) per sample"),
        (["--input", X, "--input", f"labels={p('y2d.npy')}"],
         f"{p('y2d.npy')}: holds an array of shape [45, 1], input 'labels' is i32[8]: expected [rows], one row (axis 0) per sample"),
        (["--input", f"x={p('x5.npy')}", "--input", Y], f"{p('x5.npy')}: 5 rows, fewer than one batch of input 'x' (f32[8, 16])"),
        (["--input", X, "--input", f"labels={p('y44.npy')}"],
         f"{p('y44.npy')}: 44 rows (input 'labels'), but {p('x.npy')} has 45 (input 'x'): every input needs one row per sample"),
        (["--input", X], "input 'labels' (i32[8]) needs --input labels=FILE as well: with --input, every input of the train "
                         "block comes from a file"),
        (["--input", X, "--input", Y, "--input", f"z={p('y.npy')}"],
         f"--input z={p('y.npy')}: the train block has no input of that name (its inputs: x, labels)"),
        (["--input", X, "--input", Y, "--input", f"x={p('x.npy')}"], f"--input x={p('x.npy')}: input 'x' is given twice"),
        (["--input", f"x={p('nope.npy')}", "--input", Y], f"{p('nope.npy')}: cannot open: No such file or directory"),
        (["--input", f"x={p('garbage.npy')}", "--input", Y], f"{p('garbage.npy')}: not a .npy file (no \\x93NUMPY magic)"),
        (["--input", f"x={p('short.npy')}", "--input", Y],
         f"{p('short.npy')}: truncated: shape [45, 16] needs 2880 bytes of data, the file holds 1000"),
        (["--input", f"x={p('xf.npy')}", "--input", Y],
         f"{p('xf.npy')}: a Fortran-ordered array; save it C-ordered (numpy.ascontiguousarray)"),
        (["--input", f"x={p('x.csv')}", "--input", Y], f"{p('x.csv')}: input 'x': expected a .npy or .safetensors file"),
        (["--input", f"x={p('x.pt')}", "--input", Y],
         f"{p('x.pt')}: input 'x': this is a PyTorch file (torch.save, zip format), not safetensors; convert it in Python:\n"
         "  import torch, safetensors.torch\n"
         f"  state = torch.load(\"{p('x.pt')}\", map_location=\"cpu\")  # or model.state_dict()\n"
         f"  safetensors.torch.save_file(state, \"{p('x.safetensors')}\")"),
        (["--input", f"x={p('xy.data.npz')}", "--input", Y],
         f"{p('xy.data.npz')}: input 'x': this is a NumPy .npz archive (numpy.savez), not safetensors; convert it in Python:\n"
         "  import numpy, safetensors.numpy\n"
         f"  safetensors.numpy.save_file(dict(numpy.load(\"{p('xy.data.npz')}\")), \"{p('xy.data.safetensors')}\")\n"
         "or save each array as its own .npy, one --input NAME=FILE.npy per input:\n"
         f"  numpy.save(\"x.npy\", numpy.load(\"{p('xy.data.npz')}\")[\"x\"])"),
        (["--input", f"x={p('two.safetensors')}", "--input", Y],
         f"{p('two.safetensors')}: no tensor named 'x' among its 2 (a file of one tensor may name it otherwise)"),
        (["--input", f"x={p('x64.safetensors')}", "--input", Y],
         f"{p('x64.safetensors')}: tensor 'x' holds F64 data, input 'x' is f32[8, 16]: convert it (numpy: a.astype(numpy.float32))"),
        (["--input", X, "--input", Y, "--eval-split", "0.9"],
         "--eval-split 0.9: 41 of the 45 rows held out and 4 left to train on; each needs at least a batch (8 rows)"),
        (["--input", X, "--input", Y, "--eval-input", X, "--eval-input", f"labels={p('y2d.npy')}"],
         f"{p('y2d.npy')}: holds an array of shape [45, 1], input 'labels' is i32[8]: expected [rows], one row (axis 0) per sample"),
        (["--input", X, "--input", Y, "--eval-input", X],
         "input 'labels' (i32[8]) needs --eval-input labels=FILE as well: with --eval-input, every input of the train block "
         "comes from a file"),
    ]
    usage_errors = [
        (["--input", X, "--data", p("x.npy")], "--data and --input are two ways to give the data: use one"),
        (["--shuffle", "3"], "--shuffle needs --input"),
        (["--eval-split", "0.2"], "--eval-split needs --input"),
        (["--eval-input", X], "--eval-input needs --input"),
        (["--input", X, "--input", Y, "--eval-every", "5"],
         "--eval-every needs held-out data: --eval-split FRACTION or --eval-input NAME=FILE"),
        (["--input", X, "--input", Y, "--eval-split", "0.2", "--eval-input", X],
         "--eval-split and --eval-input both give held-out data: use one"),
        (["--save-every", "5"], "--save-every needs --save CKPT (the file it writes)"),
        (["--input", X, "--eval-split", "1.5"], "--eval-split 1.5: expected the share of the rows to hold out, between 0 and 1 (0.2)"),
        (["--input", "x"], "--input x: expected NAME=FILE"),
        (["--input", X, "--shuffle", "-1"], "--shuffle -1: expected a seed (a non-negative integer)"),
    ]
    for status, cases in ((1, data_errors), (2, usage_errors)):
        for args, msg in cases:
            r = run(mlc, model, args + ["--steps", "2"])
            lines = [ln for ln in r.stderr.strip().splitlines() if not ln.startswith("Try ")]
            last = lines[-1] if lines else ""
            err = "\n".join(lines[-(msg.count("\n") + 1):])  # the whole message, of one line or several
            check(f"exit {status}: {last}", r.returncode == status and err == "mlc: " + msg,
                  f"exit {r.returncode}, wanted {status} and: mlc: {msg}")

    # Without data: the warning.
    r = run(mlc, model, ["--steps", "1"])
    warn = "mlc: warning: no --data or --input: every step trains on the same synthetic batch of random numbers, not on data"
    check("synthetic data: the warning on stderr", r.returncode == 0 and warn in r.stderr.splitlines(), r.stderr)
    print(f"{failed} failed")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
