#!/usr/bin/env python3
"""End to end: a transformer exported with torch.onnx.export, used from a
.mdl train block as a module (net = onnx("tinygpt_train.onnx")), fine-tuned
for 10 AdamW steps by `mlc train --target cpu`, against PyTorch training the
same model from the same weights on the same batch.

The model is tests/onnx/e2e_transformer.py's decoder (its Block and
CausalSelfAttention: token embedding and learned positions, pre-LayerNorm
blocks, masked_fill causal attention, a GELU MLP, a final LayerNorm and an
LM head tied to the embedding), with both layers of the hand-written
attention: nn.MultiheadAttention's float mask would be an initializer of the
graph, which mlc trains like every float initializer.  It is exported at
opset 14 (LayerNorm as ReduceMean, Sub, Pow, Sqrt, Div: more ops for
autodiff) with do_constant_folding=False, so that the initializers are the
state_dict's tensors under their names.  And again at opset 17, where
LayerNorm is one LayerNormalization node (the IR's layernorm).

Checks, in f32:
- `mlc run` of the .mdl's forward: the logits within 1e-5 of torch's
  (max |mlc - torch| / max |torch|);
- the 10 losses: max |mlc - torch| / |torch| <= 1e-5;
- the weights after the 10 steps (`mlc train --export`): for every tensor,
  |mlc - torch| / |torch's update| <= 1e-4 in 2-norms, the difference
  measured against how far training moved the tensor (an element whose
  gradient is near 0 gets an AdamW step of about lr from rounding noise, so
  the largest elementwise difference says little).  Except the key part
  of each qkv bias: softmax does not change when a query's scores all move
  by one amount, so its true gradient is 0, and what both compute is
  rounding noise that AdamW scales to steps of up to lr.  There the check
  is |mlc - torch| <= 2 * steps * lr;
- the exported names are the ONNX initializer names under the module's
  prefix ("net.tok.weight"), exactly, once each.

Exits 77 (a skip) where torch or onnx is missing.

Usage: train_onnx_module.py --mlc MLC [--work DIR]"""
import argparse
import json
import os
import re
import shutil
import subprocess
import sys

try:
    import numpy as np
    import torch
    import torch.nn as nn
    import torch.nn.functional as F
    import onnx
except ImportError as e:  # pragma: no cover - a machine without torch
    print(f"skipped: {e} (the test exports its model with torch.onnx.export)")
    sys.exit(77)

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from e2e_transformer import Block, CausalSelfAttention  # noqa: E402
from safetensors_file import read_safetensors  # noqa: E402

VOCAB, DIM, HEADS, LAYERS, SEQ, BATCH = 256, 64, 4, 2, 16, 2
STEPS, LR = 10, 1e-3
LOSS_TOL, WEIGHT_TOL, FORWARD_TOL = 1e-5, 1e-4, 1e-5

MDL = f"""# written by tests/onnx/train_onnx_module.py
config {{ batch = {BATCH}  seq = {SEQ} }}

module Tuned {{
    net = onnx("tinygpt_train.onnx")
    forward(idx: i64[batch, seq]) {{
        return net(idx)
    }}
}}

train Tuned {{
    input idx: i64[batch, seq]
    input targets: i64[batch, seq]
    loss = cross_entropy(model(idx), targets)
    optimizer = AdamW(lr={LR})
}}
"""


class TrainGPT(nn.Module):
    def __init__(self):
        super().__init__()
        self.tok = nn.Embedding(VOCAB, DIM)
        self.pos = nn.Embedding(SEQ, DIM)
        self.blocks = nn.ModuleList(Block(DIM, HEADS, CausalSelfAttention) for _ in range(LAYERS))
        self.ln_f = nn.LayerNorm(DIM)
        self.head = nn.Linear(DIM, VOCAB, bias=False)
        self.head.weight = self.tok.weight  # tied

    def forward(self, idx):
        t = idx.shape[1]
        x = self.tok(idx) + self.pos(torch.arange(t, device=idx.device))
        for b in self.blocks:
            x = b(x)
        return self.head(self.ln_f(x))


def fail(msg):
    print("FAIL " + msg)
    return False


def check(args, opset):
    """One export at `opset`, trained by mlc and torch; True if every check passes."""
    print(f"opset {opset}:")
    work = os.path.join(args.work, f"opset{opset}")
    os.makedirs(work, exist_ok=True)
    p = lambda name: os.path.join(work, name)  # noqa: E731
    ok = True

    torch.manual_seed(0)
    model = TrainGPT()
    with torch.no_grad():
        for _, t in model.named_parameters():
            if t.dim() == 1:  # LayerNorm and the biases start at 1 and 0; make them count (and distinct)
                t.add_(torch.randn_like(t) * 0.1)
        model.tok.weight.mul_(0.1)  # GPT-like embeddings: a first loss near log(vocab), not 47
        model.pos.weight.mul_(0.1)
    model.eval()  # no dropout anywhere; eval() only fixes the export's mode
    idx = torch.randint(0, VOCAB, (BATCH, SEQ), dtype=torch.int64)
    targets = torch.randint(0, VOCAB, (BATCH, SEQ), dtype=torch.int64)
    torch.onnx.export(model, (idx,), p("tinygpt_train.onnx"), input_names=["idx"], output_names=["logits"],
                      opset_version=opset, do_constant_folding=False)
    inits = [t.name for t in onnx.load(p("tinygpt_train.onnx")).graph.initializer]
    with open(p("tuned.mdl"), "w") as f:
        f.write(MDL)
    np.save(p("idx.npy"), idx.numpy())
    np.save(p("targets.npy"), targets.numpy())

    start = {k: v.clone() for k, v in model.state_dict().items()}
    # The forward entry first: mlc run on the .mdl gives torch's logits.
    with torch.no_grad():
        logits = model(idx)
    idx.numpy().tofile(p("idx.bin"))
    cmd = [args.mlc, "run", p("tuned.mdl"), "--target", "cpu", "--input", f"idx={p('idx.bin')}",
           "--output", f"output={p('logits.bin')}"]
    r = subprocess.run(cmd, capture_output=True, text=True)
    print(" ".join(cmd))
    if r.returncode != 0:
        return fail(f"mlc run exited {r.returncode}:\n{r.stdout}{r.stderr}")
    got_logits = np.fromfile(p("logits.bin"), dtype=np.float32)
    if got_logits.size != logits.numel():
        return fail(f"mlc run wrote {got_logits.size} logits, torch has {logits.numel()}")
    err = float(np.abs(got_logits.reshape(logits.shape) - logits.numpy()).max() / logits.abs().max().item())
    ok = err <= FORWARD_TOL
    print(f"{'PASS' if ok else 'FAIL'} forward: logits {tuple(logits.shape)}, max |mlc - torch| / max |torch| = "
          f"{err:.3g} (tolerance {FORWARD_TOL})")

    # PyTorch: the same 10 steps from the same weights, on the same batch.
    opt = torch.optim.AdamW(model.parameters(), lr=LR)
    want = []
    for _ in range(STEPS):
        opt.zero_grad()
        loss = F.cross_entropy(model(idx).reshape(-1, VOCAB), targets.reshape(-1))
        loss.backward()
        opt.step()
        want.append(loss.item())

    cmd = [args.mlc, "train", p("tuned.mdl"), "--target", "cpu", "--steps", str(STEPS),
           "--input", f"idx={p('idx.npy')}", "--input", f"targets={p('targets.npy')}", "--export", p("tuned.safetensors")]
    r = subprocess.run(cmd, capture_output=True, text=True)
    print(" ".join(cmd))
    if r.returncode != 0:
        return fail(f"mlc train exited {r.returncode}:\n{r.stdout}{r.stderr}")
    got = [float(v) for v in re.findall(r"^step \d+: loss (\S+)", r.stdout, re.M)]
    if len(got) != STEPS:
        return fail(f"mlc train printed {len(got)} losses, not {STEPS}:\n{r.stdout}{r.stderr}")
    err = max(abs(a - b) / abs(b) for a, b in zip(got, want))
    ok = ok and err <= LOSS_TOL
    print(f"{'PASS' if err <= LOSS_TOL else 'FAIL'} losses: {STEPS} AdamW steps, max |mlc - torch| / |torch| = {err:.3g} "
          f"(tolerance {LOSS_TOL}; torch {want[0]:.6f} -> {want[-1]:.6f}, mlc {got[0]:.6f} -> {got[-1]:.6f})")
    if not ok:
        print(f"  mlc   {got}\n  torch {want}")
    if err <= LOSS_TOL and args.record:  # for tests/onnx/replay.py on another target
        d = os.path.join(args.record, "train", "tinygpt_adamw", "test_data_set_0")
        os.makedirs(d, exist_ok=True)
        for f in ("tuned.mdl", "tinygpt_train.onnx", "idx.npy", "targets.npy"):
            shutil.copyfile(p(f), os.path.join(d, f))
        with open(os.path.join(d, "manifest.json"), "w") as f:
            json.dump({"kind": "train", "model": "tuned.mdl", "outputs": [], "losses": want, "loss_tol": LOSS_TOL,
                       "args": ["--steps", str(STEPS), "--input", "idx=idx.npy", "--input", "targets=targets.npy"]}, f)

    # The float tensors are the initializers; the others are the graph's
    # compile-time constants (a Constant node's mask, the iota that Where
    # gathers with), parameters of the model too, as for `mlc run model.onnx`.
    w = read_safetensors(p("tuned.safetensors"))
    names = sorted(k for k in w if w[k].dtype == np.float32)
    consts = sorted(k for k in w if w[k].dtype != np.float32)
    expect = sorted("net." + n for n in inits)
    if names != expect or not all(k.startswith("net.") for k in consts):
        ok = False
        print(f"FAIL names: the exported f32 weights are {names}, expected the ONNX initializers under 'net.': {expect}")
    else:
        print(f"PASS names: the {len(names)} exported f32 weights are the ONNX initializers under 'net.' "
              f"(and {len(consts)} integer or bool constants of the graph: {', '.join(consts)})")
    sd = model.state_dict()
    worst, worst_name, worst_abs, worst_abs_name = 0.0, "", 0.0, ""
    for n in inits:
        if n not in sd or ("net." + n) not in w:
            ok = False
            print(f"FAIL weights: initializer '{n}' is not in torch's state_dict or mlc's export")
            continue
        ref, got_w, w0 = sd[n].numpy(), w["net." + n], start[n].numpy()
        if n.endswith("attn.qkv.bias"):  # the key bias, [DIM, 2 DIM): gradient 0, AdamW steps of noise
            noise = float(np.abs(got_w[DIM:2 * DIM] - ref[DIM:2 * DIM]).max())
            if noise > 2 * STEPS * LR:
                ok = False
                print(f"FAIL weights: the key bias of '{n}' differs by {noise:.3g}, more than 2 * steps * lr")
            keep = np.r_[0:DIM, 2 * DIM:3 * DIM]
            ref, got_w, w0 = ref[keep], got_w[keep], w0[keep]
        e = float(np.linalg.norm(got_w - ref) / max(np.linalg.norm(ref - w0), 1e-30))
        if e > worst:
            worst, worst_name = e, n
        e = float(np.abs(got_w - ref).max() / np.abs(ref).max())
        if e > worst_abs:
            worst_abs, worst_abs_name = e, n
    wok = worst <= WEIGHT_TOL
    ok = ok and wok
    print(f"{'PASS' if wok else 'FAIL'} weights after {STEPS} steps: max over tensors of |mlc - torch| / "
          f"|torch's update| (2-norms) = {worst:.3g} ({worst_name}; tolerance {WEIGHT_TOL}); max |mlc - torch| / "
          f"max |torch| = {worst_abs:.3g} ({worst_abs_name}); the key biases, whose gradient is 0, within 2 * steps * lr")
    return ok


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--mlc", required=True)
    ap.add_argument("--work", default="train_onnx_module")
    ap.add_argument("--record", help="keep the run for tests/onnx/replay.py (torch's losses, the files) here")
    args = ap.parse_args()
    ok = True
    for opset in (14, 17):
        ok = check(args, opset) and ok
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
