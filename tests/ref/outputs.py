"""Several named outputs per entry (issue 27): tests/ref/outputs.mdl returns
`logits, loss, probs * ...`.  Checks, against a PyTorch module with the same
safetensors weights:
- the artifact's C signature names the outputs (logits, loss, output2);
- `mlc run` prints the three in order and writes each with --output NAME=FILE,
  within 1e-5 of torch (f32);
- Python's Model.forward returns the three as a tuple, under those names;
- an unknown --output name is refused, listing the outputs;
- `mlc train`, whose loss is `model(x, y)[1]`, gives torch SGD's 3 losses
  within 1e-5.
Usage: outputs.py MLC REPO_ROOT WORKDIR"""
import os
import re
import subprocess
import sys

import numpy as np
import torch
import torch.nn as nn

from models import write_safetensors

B, D, C = 5, 6, 7
TOL = 1e-5


class Head(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(D, C)

    def forward(self, x):
        logits = self.fc(x)
        return logits, torch.softmax(logits, -1)


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Linear(D, D)
        self.head = Head()

    def forward(self, x, y):
        h = nn.functional.gelu(self.body(x))
        logits, probs = self.head(h)
        loss = nn.functional.cross_entropy(logits, y)
        return logits, loss, probs * self.head(h)[1]


def main():
    mlc, root, work = sys.argv[1], sys.argv[2], os.path.abspath(sys.argv[3])
    os.makedirs(work, exist_ok=True)
    model = os.path.join(root, "tests", "ref", "outputs.mdl")
    p = lambda name: os.path.join(work, name)  # noqa: E731
    torch.manual_seed(0)
    net = Net()
    sd = {k: v.detach() for k, v in net.state_dict().items()}
    write_safetensors(p("w.safetensors"), sd, {"format": "pt"})
    x = torch.randn(B, D)
    y = torch.randint(0, C, (B,))
    x.numpy().tofile(p("x.bin"))
    y.numpy().astype(np.int64).tofile(p("y.bin"))
    np.save(p("x.npy"), x.numpy())
    np.save(p("y.npy"), y.numpy().astype(np.int64))
    failed = 0

    def check(what, ok, detail=""):
        nonlocal failed
        failed += not ok
        print(("ok   " if ok else "FAIL ") + what + ("" if ok else "\n     " + detail))

    r = subprocess.run([mlc, "compile", model, "--target", "cpu", "--cpu", "baseline", "-o", p("out")],
                       capture_output=True, text=True)
    header = open(p("out/net.h")).read() if r.returncode == 0 else r.stderr
    sig = ("mlc_status net_forward(net *m, const float *x, const int64_t *y, float *logits, float *loss, "
           "float *output2);")
    check("the header's forward names its three outputs", sig in header, header[-2000:])
    check("the train step returns the loss only",
          "mlc_status net_train_step(net *m, const float *x, const int64_t *y, float *loss);" in header)

    want = [t.detach().numpy() for t in net(x, y)]
    r = subprocess.run([mlc, "run", model, "--target", "cpu", "--weights", p("w.safetensors"),
                        "--input", f"x={p('x.bin')}", "--input", f"y={p('y.bin')}",
                        "--output", f"logits={p('logits.bin')}", "--output", f"loss={p('loss.bin')}",
                        "--output", f"output2={p('o2.bin')}"], capture_output=True, text=True)
    names = re.findall(r"^(\w+): f32\[", r.stdout, re.M)
    check("mlc run prints logits, loss, output2 in order", r.returncode == 0 and names == ["logits", "loss", "output2"],
          r.stdout + r.stderr)
    for name, file, w in (("logits", "logits.bin", want[0]), ("loss", "loss.bin", want[1]), ("output2", "o2.bin", want[2])):
        got = np.fromfile(p(file), dtype=np.float32) if os.path.exists(p(file)) else np.zeros(0, np.float32)
        err = float(np.abs(got - w.reshape(-1)).max()) if got.size == w.size else float("inf")
        check(f"--output {name}: {w.size} values within {TOL} of torch (max {err:.2e})", err <= TOL)

    if os.environ.get("MLC_SANITIZED") == "1":
        # The binding dlopens the artifact's ASan-instrumented runtime into a
        # python3 without ASan; the build without sanitizers runs this part.
        print("skip Python: Model.forward (sanitizer build)")
    else:
        sys.path.insert(0, os.path.join(root, "python"))
        import mlc as mlcpy
        m = mlcpy.Model(p("out"))
        m.load_weights(p("w.safetensors"))
        outs = m.forward(x.numpy(), y.numpy())
        named = [n for n, _, _ in m.entries()["forward"]["outputs"]]
        err = max(float(np.abs(a - w).max()) for a, w in zip(outs, want)) if len(outs) == 3 else float("inf")
        check(f"Python: Model.forward gives a tuple of 3 within {TOL} of torch (max {err:.2e}), named logits, loss, output2",
              err <= TOL and named == ["logits", "loss", "output2"], f"{named}")

    r = subprocess.run([mlc, "run", model, "--target", "cpu", "--input", f"x={p('x.bin')}", "--input", f"y={p('y.bin')}",
                        "--output", f"probs={p('probs.bin')}"], capture_output=True, text=True)
    msg = f"mlc: --output probs={p('probs.bin')}: forward has no output of that name (it has 'logits', 'loss', 'output2')"
    check("an unknown --output name lists the outputs", r.returncode == 1 and r.stderr.rstrip().endswith(msg), r.stderr)

    opt = torch.optim.SGD(net.parameters(), lr=0.1)
    losses = []
    for _ in range(3):
        opt.zero_grad()
        loss = net(x, y)[1]
        loss.backward()
        opt.step()
        losses.append(loss.item())
    r = subprocess.run([mlc, "train", model, "--target", "cpu", "--weights", p("w.safetensors"), "--steps", "3",
                        "--input", f"x={p('x.npy')}", "--input", f"y={p('y.npy')}"], capture_output=True, text=True)
    got = [float(v) for v in re.findall(r"^step \d+: loss (\S+) ", r.stdout, re.M)]
    err = max(abs(a - b) for a, b in zip(got, losses)) if len(got) == 3 else float("inf")
    check(f"mlc train with loss = model(x, y)[1]: 3 SGD losses within {TOL} of torch (max {err:.2e})", err <= TOL,
          f"got {got}, want {losses}\n{r.stdout}{r.stderr}")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
