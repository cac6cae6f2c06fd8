"""Dropout (issue 27) on the CPU target, against PyTorch with the masks of
tests/ref/philox.py (an independent Philox4x32-10, checked first against the
generator's known-answer vectors):
- `mlc train`, 4 SGD steps of tests/ref/dropout.mdl: step k (from 1) drops
  with stream 0 and 1's masks at step k; the losses within 1e-5 of torch's,
  so the masks and their gradients are the same;
- a second run gives the same losses to the printed digit (a deterministic
  mask), and they differ from a run without dropout; 2 steps saved and 2
  resumed give the same 4; in bf16 (-D compute=bf16) the losses are f32's
  within 2e-2 (and mlc train prints a bf16 loss as its value);
- the compiled artifact's train_step, through Python, gives torch's losses
  too (the runtime feeds it the step);
- `mlc run` (the forward entry) has no dropout: within 1e-5 of torch's eval.
Usage: dropout.py MLC REPO_ROOT WORKDIR [TARGET]

TARGET (default cpu; ctest runs that) may be cuda: the same checks against
the same masks on the GPU (bench/h200_gpt2.sh runs it with build-gpu/mlc),
except that the artifact's train_step from Python is skipped (the binding
loads CPU artifacts only), `mlc run` compiles with --no-train (the forward
entry alone, so that it is checked even where the train step fails), and
"the same losses" of two runs or of a resumed run means within 1e-6
(the printed digits, less a last-place difference that a GPU's atomic
sums may give), exactly on the CPU."""
import os
import re
import subprocess
import sys

import numpy as np
import torch
import torch.nn as nn

from models import write_safetensors
from philox import check_kat, dropout_mask

B, D, H = 6, 10, 32
TOL = 1e-5


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(D, H)
        self.fc2 = nn.Linear(H, D)

    def forward(self, x, step=None):
        h = torch.relu(self.fc1(x))
        if step is not None:
            h = h * torch.from_numpy(dropout_mask(h.shape, 0.3, step, 0)) * float(np.float32(1 / 0.7))
        y = self.fc2(h)
        if step is not None:
            y = y * torch.from_numpy(dropout_mask(y.shape, 0.5, step, 1, 9)) * 2.0
        return y


def main():
    mlc, root, work = sys.argv[1], sys.argv[2], os.path.abspath(sys.argv[3])
    target = sys.argv[4] if len(sys.argv) > 4 else "cpu"
    print(f"target {target}")
    os.makedirs(work, exist_ok=True)
    model = os.path.join(root, "tests", "ref", "dropout.mdl")
    p = lambda name: os.path.join(work, name)  # noqa: E731
    failed = 0

    def check(what, ok, detail=""):
        nonlocal failed
        failed += not ok
        print(("ok   " if ok else "FAIL ") + what + ("" if ok else "\n     " + detail))

    err = check_kat()
    check("the reference Philox4x32-10 gives the known-answer vectors", err is None, err or "")
    torch.manual_seed(0)
    net = Net()
    sd = {k: v.detach().clone() for k, v in net.state_dict().items()}
    write_safetensors(p("w.safetensors"), sd, {"format": "pt"})
    x, y = torch.randn(B, D), torch.randn(B, D)
    np.save(p("x.npy"), x.numpy())
    np.save(p("y.npy"), y.numpy())
    x.numpy().tofile(p("x.bin"))

    def train(extra=("--weights", p("w.safetensors"), "--steps", "4")):
        r = subprocess.run([mlc, "train", model, "--target", target,
                            "--input", f"x={p('x.npy')}", "--input", f"y={p('y.npy')}", *extra],
                           capture_output=True, text=True)
        return [float(v) for v in re.findall(r"^step \d+: loss (\S+) ", r.stdout, re.M)], r.stdout + r.stderr

    opt = torch.optim.SGD(net.parameters(), lr=0.1)
    want = []
    for step in range(1, 5):
        opt.zero_grad()
        loss = ((net(x, step) - y) ** 2).mean()
        loss.backward()
        opt.step()
        want.append(loss.item())

    def same(a, b):  # exactly on the CPU; on a GPU to the printed digits, less the last place
        return len(a) == len(b) == 4 and (a == b if target == "cpu" else max(abs(u - v) for u, v in zip(a, b)) <= 1e-6)

    got, log = train()
    err = max(abs(a - b) for a, b in zip(got, want)) if len(got) == 4 else float("inf")
    check(f"mlc train: 4 SGD losses with dropout within {TOL} of torch (max {err:.2e})", err <= TOL,
          f"got {got}, want {want}\n{log}")
    again, _ = train()
    check("a second run draws the same masks (the same losses)", same(again, got), f"{again} against {got}")
    half, log = train(("--weights", p("w.safetensors"), "--steps", "4", "compute=bf16"))
    err = max(abs(a - b) / abs(b) for a, b in zip(half, want)) if len(half) == 4 else float("inf")
    check(f"in bf16 (precision(param=bf16), the loss printed from its bf16 value) the same masks: 4 losses within "
          f"2e-2 relative of torch's f32 (max {err:.2e})", err <= 2e-2, f"{half} against {want}\n{log}")
    first, _ = train(("--weights", p("w.safetensors"), "--steps", "2", "--save", p("two.ckpt")))
    rest, log = train(("--resume", p("two.ckpt"), "--steps", "2"))
    check("2 steps, then 2 more resumed from a checkpoint: the 4 steps' losses (the step count goes on)",
          same(first + rest, got), f"{first} + {rest} against {got}\n{log}")
    if os.environ.get("MLC_SANITIZED") == "1":
        # The binding dlopens the artifact's ASan-instrumented runtime into a
        # python3 without ASan; the build without sanitizers runs this part.
        print("skip the artifact's train_step from Python (sanitizer build)")
    elif target != "cpu":
        print(f"skip the artifact's train_step from Python (the binding loads CPU artifacts, not {target})")
    else:
        r = subprocess.run([mlc, "compile", model, "--target", "cpu", "--cpu", "baseline", "-o", p("out")],
                           capture_output=True, text=True)
        sys.path.insert(0, os.path.join(root, "python"))
        import mlc as mlcpy
        m = mlcpy.Model(p("out"))
        m.load_weights(p("w.safetensors"))
        steps = [m.train_step(x.numpy(), y.numpy()) for _ in range(4)]
        err = max(abs(a - b) for a, b in zip(steps, want))
        check(f"the artifact's train_step (Python) draws the same masks: 4 losses within {TOL} of torch (max {err:.2e})",
              err <= TOL, f"{steps}")
        r = subprocess.run([mlc, "compile", model, "--target", "cpu", "--cpu", "baseline", "-o", p("out_bf16"),
                            "compute=bf16"], capture_output=True, text=True)
        m = mlcpy.Model(p("out_bf16"))
        m.load_weights(p("w.safetensors"))
        steps = [round(m.train_step(x.numpy(), y.numpy()), 6) for _ in range(4)]
        check("in bf16, Python's train_step gives mlc train's losses (a bf16 loss as its value)", steps == half,
              f"{steps} against {half}")
    net.load_state_dict(sd)
    plain = ((net(x) - y) ** 2).mean().item()
    check(f"the first loss is not the loss without dropout ({plain:.6f})", len(got) > 0 and abs(got[0] - plain) > 1e-3)

    r = subprocess.run([mlc, "run", model, "--target", target, *([] if target == "cpu" else ["--no-train"]),
                        "--weights", p("w.safetensors"),
                        "--input", f"x={p('x.bin')}", "--output", f"output={p('out.bin')}"], capture_output=True, text=True)
    out = np.fromfile(p("out.bin"), dtype=np.float32) if r.returncode == 0 else np.zeros(0, np.float32)
    ref = net(x).detach().numpy().reshape(-1)
    err = float(np.abs(out - ref).max()) if out.size == ref.size else float("inf")
    check(f"mlc run: the forward entry has no dropout, within {TOL} of torch (max {err:.2e})", err <= TOL, r.stderr)
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
