"""The PyTorch reference models, written by hand for Debian's torch 1.13
(which has no nn.RMSNorm): the MiniLLM of ../shared/bench/torch_baseline.py
and the MLP of examples/mlp.mdl.  Parameter names match mlc's."""
import os
import sys

import torch
import torch.nn as nn

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "runtime", "tests"))
from make_reference_st import read_safetensors, write_safetensors  # noqa: E402,F401


class RMSNorm(nn.Module):
    """torch.nn.RMSNorm with eps=None: eps is finfo(dtype).eps."""

    def __init__(self, dim, device=None):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim, device=device))

    def forward(self, x):
        eps = torch.finfo(x.dtype).eps
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * self.weight


class TransformerBlock(nn.Module):
    def __init__(self, dim, n_heads, device=None):
        super().__init__()
        self.norm1 = RMSNorm(dim, device)
        self.attn = nn.MultiheadAttention(dim, n_heads, batch_first=True, device=device)
        self.norm2 = RMSNorm(dim, device)
        self.ffn = nn.Sequential(nn.Linear(dim, dim * 4, bias=False, device=device), nn.SiLU(),
                                 nn.Linear(dim * 4, dim, bias=False, device=device))

    def forward(self, x):
        h = self.norm1(x)
        a, _ = self.attn(h, h, h, need_weights=False)
        x = x + a
        return x + self.ffn(self.norm2(x))


class MiniLLM(nn.Module):
    def __init__(self, vocab, dim, layers, heads, device=None):
        super().__init__()
        self.embed = nn.Embedding(vocab, dim, device=device)
        self.layers = nn.ModuleList([TransformerBlock(dim, heads, device) for _ in range(layers)])
        self.head = nn.Linear(dim, vocab, bias=False, device=device)

    def forward(self, idx):
        x = self.embed(idx)
        for layer in self.layers:
            x = layer(x)
        return self.head(x)


class MLP(nn.Module):
    def __init__(self, inputs=784, hidden=256, classes=10):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(inputs, hidden), nn.GELU(), nn.Linear(hidden, hidden), nn.GELU(),
                                 nn.Linear(hidden, classes))

    def forward(self, x):
        return self.net(x)


def mlp_mdl(batch, hidden, train):
    """MLP(16, hidden, 10) above as a .mdl, for the tests that train it
    against torch: `train` is its train block's lines after the inputs and
    the loss (the optimizer and whatever follows it), each ending in a newline."""
    return f"""config {{ batch = {batch}  inputs = 16  hidden = {hidden}  classes = 10 }}
module MLP(inputs, hidden, classes) {{
    net = Sequential(Linear(inputs, hidden), GELU(), Linear(hidden, hidden), GELU(), Linear(hidden, classes))
    forward(x: f32[batch, inputs]) {{ return net(x) }}
}}
train MLP {{
    input x:      f32[batch, inputs]
    input labels: i32[batch]
    loss      = cross_entropy(model(x), labels)
{train}}}
"""


def rel_err(got, ref):
    """max |got - ref| / max |ref|: the error measure every reference test states."""
    return float((got.double() - ref.double()).abs().max() / ref.double().abs().max())


class Checks:
    """Named pass/fail checks for the scripted tests: prints each, then the
    count, and gives the exit status."""

    def __init__(self):
        self.failed = []

    def __call__(self, ok, what):
        print(("ok   " if ok else "FAIL ") + what)
        if not ok:
            self.failed.append(what)

    def finish(self):
        print(f"{'all' if not self.failed else len(self.failed)} checks {'passed' if not self.failed else 'failed'}")
        return 1 if self.failed else 0


def run(cmd, **kw):
    """Runs cmd; exits the test with its output if it fails.  Returns its standard output."""
    import subprocess
    r = subprocess.run(cmd, capture_output=True, text=True, **kw)
    if r.returncode != 0:
        sys.exit(f"FAIL ({r.returncode}): {' '.join(cmd)}\n{r.stdout}\n{r.stderr}")
    return r.stdout


def run_entry(exe, mdl, work, weights, inputs, extra=()):
    """Runs tests/ref/train_entry.c (exe) on mdl with the weights and the inputs ({name: raw file}), its outputs
    written to work; raises RuntimeError if it fails.  Returns {output name: f32 tensor}."""
    import subprocess
    import numpy as np
    cmd = [exe, mdl, work, "--weights", weights]
    for name, path in inputs.items():
        cmd += ["--input", f"{name}={path}"]
    cmd += list(extra)
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(f"train_entry failed ({r.returncode}): {' '.join(cmd)}\n{r.stderr}")
    outs = {}
    with open(os.path.join(work, "outputs.txt")) as f:
        for line in f:
            name, file, dtype, *dims = line.split()
            assert dtype == "f32", line
            outs[name] = torch.from_numpy(np.fromfile(os.path.join(work, file), dtype=np.float32).reshape(
                [int(d) for d in dims]))
    return outs


def optimizer_losses(model, opt, loss_of, inputs, targets, batch, steps):
    """torch's side of an `mlc train` run: `steps` steps of opt on model, step k on rows [k*batch, (k+1)*batch)
    of inputs and targets, loss_of(model, inputs, targets) the loss.  Returns the losses before each update."""
    losses = []
    for k in range(steps):
        loss = loss_of(model, inputs[k * batch:(k + 1) * batch], targets[k * batch:(k + 1) * batch])
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses


def mlp_reference(work):
    """The apps' reference: PyTorch's MLP (seed 1), its weights as mlp.safetensors, and a batch of 32
    (x.bin, labels.bin) in work.  Returns (model, weights path, x, labels)."""
    torch.manual_seed(1)
    ref = MLP().eval()
    weights = os.path.join(work, "mlp.safetensors")
    write_safetensors(weights, {k: v.detach() for k, v in ref.state_dict().items()}, {"format": "pt"})
    x = torch.randn(32, 784)
    labels = torch.randint(0, 10, (32,), dtype=torch.int32)
    x.numpy().tofile(os.path.join(work, "x.bin"))
    labels.numpy().tofile(os.path.join(work, "labels.bin"))
    return ref, weights, x, labels
