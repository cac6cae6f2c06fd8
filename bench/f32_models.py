#!/usr/bin/env python3
"""f32 training (issue 20): mlc against PyTorch eager f32 at its default
matmul precision ("highest": no TF32), on two models of our own:

  gpt2like  bench/gpt2like_f32.mdl: vocab 8003, dim 768, 6 layers of 12 heads
            of 64, batch 4 x seq 1000, LayerNorm with bias, tanh GELU, causal
            attention, untied head, AdamW (lr 3e-4)
  mlp       bench/mlp_f32.mdl: 24 Linear(1000, 1000) + ReLU, a head to 10
            classes, batch 2000, cross-entropy, SGD (lr 0.01, momentum 0.9)

For each: the PyTorch model below (the same state_dict names) is initialised,
saved as safetensors and trained for --steps steps on the same data;
`mlc train --weights` starts from that file.  gpt2like reads a token file
(a noisy Markov chain over the vocabulary, so the loss moves); mlp has f32
inputs, so mlc trains on its fixed synthetic batch (driver/train.c,
synthetic_inputs), which synthetic_batch() below recomputes.  Checks:
  - each step's loss within 1e-3 relative of PyTorch's (the f32 tolerance of
    tests/ref/train_minillm.py);
  - mlc's final weights (--export) load into the PyTorch model with
    load_state_dict(strict=True); their distance to PyTorch's is printed.
Times: mlc's is the median of steps 3.. of the same `mlc train` run (the
step's wall time, synchronised); PyTorch's the median of --runs CUDA-event
timings of a whole step (zero_grad, forward, backward, optimizer) after
warm-up.  ratio = PyTorch / mlc (> 1: mlc faster).

    python3 bench/f32_models.py --mlc build-gpu/mlc --out $OUT [--f32-matmul 3xtf32]
    python3 bench/f32_models.py --mlc build/mlc --target cpu --small --out /tmp/f32
    --set gpt2like.layers=4 changes a config value (mlc gets it as layers=4)

Writes f32_models.md and f32_models.json to --out; exit status 1 if a check
failed.
"""
import argparse
import gc
import json
import math
import os
import re
import statistics
import subprocess
import sys
import time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests", "ref"))
from models import read_safetensors, write_safetensors  # noqa: E402

LOSS_TOL = 1e-3  # tests/ref/train_minillm.py, f32

CONFIGS = {
    "gpt2like": dict(vocab=8003, dim=768, heads=12, layers=6, batch=4, seq=1000),
    "mlp": dict(width=1000, depth=24, classes=10, batch=2000),
}
SMALL = {
    "gpt2like": dict(vocab=203, dim=128, heads=2, layers=2, batch=2, seq=37),
    "mlp": dict(width=100, depth=8, classes=10, batch=50),
}
MDL = {"gpt2like": "bench/gpt2like_f32.mdl", "mlp": "bench/mlp_f32.mdl"}


# ---- the PyTorch models ----

class CausalSelfAttention(nn.Module):
    """nn.MultiheadAttention's parameters and init, causal, through SDPA
    where torch has it (2.x), else written out (torch 1.13)."""

    def __init__(self, dim, heads):
        super().__init__()
        self.heads = heads
        self.in_proj_weight = nn.Parameter(torch.empty(3 * dim, dim))
        self.in_proj_bias = nn.Parameter(torch.zeros(3 * dim))
        self.out_proj = nn.Linear(dim, dim)
        nn.init.xavier_uniform_(self.in_proj_weight)
        nn.init.zeros_(self.out_proj.bias)

    def forward(self, x):
        B, T, C = x.shape
        q, k, v = (t.view(B, T, self.heads, C // self.heads).transpose(1, 2)
                   for t in F.linear(x, self.in_proj_weight, self.in_proj_bias).split(C, -1))
        if hasattr(F, "scaled_dot_product_attention"):
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        else:
            s = q @ k.transpose(-1, -2) / math.sqrt(C // self.heads)
            s = s.masked_fill(torch.ones(T, T, dtype=torch.bool, device=x.device).triu(1), float("-inf"))
            y = s.softmax(-1) @ v
        return self.out_proj(y.transpose(1, 2).reshape(B, T, C))


class MLP(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.c_fc = nn.Linear(dim, 4 * dim)
        self.act = nn.GELU(approximate="tanh")
        self.c_proj = nn.Linear(4 * dim, dim)

    def forward(self, x):
        return self.c_proj(self.act(self.c_fc(x)))


class Block(nn.Module):
    def __init__(self, dim, heads):
        super().__init__()
        self.ln_1 = nn.LayerNorm(dim)
        self.attn = CausalSelfAttention(dim, heads)
        self.ln_2 = nn.LayerNorm(dim)
        self.mlp = MLP(dim)

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class GPT2Like(nn.Module):
    def __init__(self, vocab, dim, heads, layers, seq):
        super().__init__()
        self.wte = nn.Embedding(vocab, dim)
        self.wpe = nn.Embedding(seq, dim)
        self.h = nn.ModuleList([Block(dim, heads) for _ in range(layers)])
        self.ln_f = nn.LayerNorm(dim)
        self.lm_head = nn.Linear(dim, vocab, bias=False)

    def forward(self, idx):
        x = self.wte(idx) + self.wpe.weight[:idx.shape[1]]
        for block in self.h:
            x = block(x)
        return self.lm_head(self.ln_f(x))


class ReLUBlock(nn.Module):
    def __init__(self, width):
        super().__init__()
        self.fc = nn.Linear(width, width)
        self.act = nn.ReLU()

    def forward(self, x):
        return self.act(self.fc(x))


class DeepMLP(nn.Module):
    def __init__(self, width, depth, classes):
        super().__init__()
        self.blocks = nn.ModuleList([ReLUBlock(width) for _ in range(depth)])
        self.head = nn.Linear(width, classes)

    def forward(self, x):
        for b in self.blocks:
            x = b(x)
        return self.head(x)


def make_model(name, cfg):
    """The PyTorch model with its initial weights (seeded), on the CPU."""
    torch.manual_seed(0)
    if name == "gpt2like":
        m = GPT2Like(cfg["vocab"], cfg["dim"], cfg["heads"], cfg["layers"], cfg["seq"])
        with torch.no_grad():  # biases start at zero and norms at one; make them count
            for p in m.parameters():
                if p.dim() == 1:
                    p.add_(torch.randn_like(p) * 0.1)
        opt = lambda ps: torch.optim.AdamW(ps, lr=3e-4)
    else:
        m = DeepMLP(cfg["width"], cfg["depth"], cfg["classes"])
        with torch.no_grad():  # He init, so 24 layers neither vanish nor explode
            for b in m.blocks:
                nn.init.normal_(b.fc.weight, 0, math.sqrt(2 / cfg["width"]))
                b.fc.bias.normal_(0, 0.1)
        opt = lambda ps: torch.optim.SGD(ps, lr=0.01, momentum=0.9)
    return m, opt


# ---- the data ----

def token_stream(n, vocab, seed=0):
    """n tokens of a Markov chain: the next token is perm[token], or a
    uniform one with probability 1/4."""
    g = torch.Generator().manual_seed(seed)
    perm = torch.randperm(vocab, generator=g).tolist()
    jump = (torch.rand(n, generator=g) < 0.25).tolist()
    rand = torch.randint(0, vocab, (n,), generator=g).tolist()
    out, t = [], rand[0]
    for i in range(n):
        t = rand[i] if jump[i] else perm[t]
        out.append(t)
    return torch.tensor(out, dtype=torch.int32)


def synthetic_batch(cfg):
    """What `mlc train` without --data feeds the mlp every step
    (driver/train.c, synthetic_inputs): one 64-bit LCG over the inputs in
    order, r its top 31 bits; x = r / 2^31 - 1 in float32, so in [-1, 0)
    (docs/cli.md says [-1, 1)), labels = r % classes."""
    rng, mask = 0x747261696E, (1 << 64) - 1
    out = []
    for n in (cfg["batch"] * cfg["width"], cfg["batch"]):
        r = np.empty(n, dtype=np.int64)
        for j in range(n):
            rng = (rng * 6364136223846793005 + 1442695040888963407) & mask
            r[j] = rng >> 33
        out.append(r)
    x = r_to_f32(out[0]).reshape(cfg["batch"], cfg["width"])
    labels = (out[1] % cfg["classes"]).astype(np.int32)
    return torch.from_numpy(x), torch.from_numpy(labels)


def r_to_f32(r):
    return r.astype(np.float32) / np.float32(2147483648.0) - np.float32(1.0)


# ---- running both ----

def mlc_train(args, name, cfg, work, weights, data):
    cmd = [args.mlc, "train", os.path.join(ROOT, MDL[name]), "--target", args.target, "--steps", str(args.steps),
           "--weights", weights, "--export", os.path.join(work, "mlc_final.safetensors")]
    if data:
        cmd += ["--data", data, "--data-dtype", "i32"]
    if args.f32_matmul:
        cmd += ["--f32-matmul", args.f32_matmul]
    cmd += ["%s=%s" % kv for kv in cfg.items()]
    print("$ " + " ".join(cmd[1:]), flush=True)
    r = subprocess.run(cmd, capture_output=True, text=True)
    with open(os.path.join(args.out, name + "_mlc.log"), "w") as f:
        f.write(" ".join(cmd) + "\n" + r.stdout + r.stderr)
    if r.returncode:
        raise RuntimeError("mlc train failed (%d):\n%s%s" % (r.returncode, r.stdout, r.stderr[-3000:]))
    steps = re.findall(r"step (\d+): loss (\S+) \(([0-9.]+) ms[,)]", r.stdout)
    return [float(l) for _, l, _ in steps], [float(ms) for _, _, ms in steps]


def mlc_profile(args, name, cfg, weights):
    """mlc's per-kernel table of the train step, for the log."""
    cmd = [args.mlc, "profile", os.path.join(ROOT, MDL[name]), "--target", args.target, "--entry", "train_step",
           "--steps", "5", "--weights", weights] + (["--f32-matmul", args.f32_matmul] if args.f32_matmul else [])
    cmd += ["%s=%s" % kv for kv in cfg.items()]
    r = subprocess.run(cmd, capture_output=True, text=True)
    with open(os.path.join(args.out, name + "_profile.log"), "w") as f:
        f.write(" ".join(cmd) + "\n" + r.stdout + r.stderr)


def median_ms(fn, runs, warmup, dev):
    for _ in range(warmup):
        fn()
    ts = []
    for _ in range(runs):
        if dev == "cuda":
            a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            torch.cuda.synchronize()
            a.record()
            fn()
            b.record()
            b.synchronize()
            ts.append(a.elapsed_time(b))
        else:
            t0 = time.perf_counter()
            fn()
            ts.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(ts)


def run_model(args, name, dev):
    cfg = (SMALL if args.small else CONFIGS)[name]
    work = os.path.join(args.work, name)
    os.makedirs(work, exist_ok=True)
    ref, make_opt = make_model(name, cfg)
    weights = os.path.join(work, "init.safetensors")
    write_safetensors(weights, {k: v.detach().clone().contiguous() for k, v in ref.state_dict().items()}, {"format": "pt"})

    # the data: batches[s] = (input, target) of step s
    if name == "gpt2like":
        B, S = cfg["batch"], cfg["seq"]
        tok = token_stream(args.steps * B * S + 1, cfg["vocab"])
        data = os.path.join(work, "tokens.i32")
        tok.numpy().tofile(data)
        batches = [(tok[s * B * S: (s + 1) * B * S].view(B, S).long(), tok[s * B * S + 1: (s + 1) * B * S + 1].view(B, S).long())
                   for s in range(args.steps)]
    else:
        data = None
        x, labels = synthetic_batch(cfg)
        batches = [(x, labels.long())] * args.steps

    got, ms = mlc_train(args, name, cfg, work, weights, data)
    if args.profile:
        mlc_profile(args, name, cfg, weights)

    ref = ref.to(dev)
    opt = make_opt(ref.parameters())
    batches = [(a.to(dev), b.to(dev)) for a, b in batches]

    def step(inp, tgt):
        opt.zero_grad(set_to_none=True)
        logits = ref(inp)
        loss = F.cross_entropy(logits.view(-1, logits.shape[-1]), tgt.reshape(-1))
        loss.backward()
        opt.step()
        return loss

    want = [step(*batches[s]).item() for s in range(args.steps)]
    worst_rel, worst_abs = 0.0, 0.0
    for s in range(args.steps):
        a = got[s] if s < len(got) else float("nan")
        e_abs = abs(a - want[s]) if a == a else float("inf")
        e_rel = e_abs / abs(want[s])
        worst_rel, worst_abs = max(worst_rel, e_rel), max(worst_abs, e_abs)
        print("  step %2d: mlc %.6f  torch %.6f  rel %.2e" % (s + 1, a, want[s], e_rel))
    ok_loss = len(got) == args.steps and worst_rel <= LOSS_TOL

    # mlc's final weights into the PyTorch model (names and shapes), against PyTorch's
    final, _ = read_safetensors(os.path.join(work, "mlc_final.safetensors"))
    mine = {k: v.detach().cpu() for k, v in ref.state_dict().items()}
    check = make_model(name, cfg)[0]
    try:
        check.load_state_dict(final, strict=True)
        ok_names = True
    except RuntimeError as e:
        print("  load_state_dict(mlc's weights) failed: %s" % e)
        ok_names = False
    w_name, w_err = max(((k, float((final[k].double() - mine[k].double()).abs().max() / mine[k].double().abs().max()))
                         for k in mine if k in final), key=lambda kv: kv[1], default=("", float("nan")))

    # timing: PyTorch eager from here on (the model keeps training), mlc from its run
    torch_ms = median_ms(lambda: step(*batches[0]), args.runs, 3, dev)
    mlc_ms = statistics.median(ms[2:]) if len(ms) > 2 else float("nan")
    tokens = cfg["batch"] * (cfg["seq"] if name == "gpt2like" else 1)
    rec = dict(model=name, config=cfg, steps=args.steps, mlc_losses=got, torch_losses=want,
               worst_rel=worst_rel, worst_abs=worst_abs, loss_tol=LOSS_TOL, ok_loss=ok_loss,
               ok_names=ok_names, weights_worst=w_err, weights_worst_name=w_name,
               mlc_ms=mlc_ms, torch_ms=torch_ms, ratio=torch_ms / mlc_ms, mlc_step_ms=ms,
               params=sum(p.numel() for p in ref.parameters()), samples_per_step=tokens)
    print("%s: losses worst rel %.2e abs %.2e (tol %g): %s; names %s; final weights worst %.2e (%s); "
          "mlc %.2f ms, torch eager %.2f ms, ratio %.2f" % (
              name, worst_rel, worst_abs, LOSS_TOL, "ok" if ok_loss else "FAIL", "ok" if ok_names else "FAIL",
              w_err, w_name, mlc_ms, torch_ms, rec["ratio"]), flush=True)
    return rec


def write_md(path, recs, head):
    with open(path, "w") as f:
        f.write(head + "\n\nPyTorch eager: attention through F.scaled_dot_product_attention(is_causal=True) where torch "
                "has it, AdamW and SGD with torch's defaults otherwise; ms/step: mlc's median of steps 3.. of `mlc train`, "
                "PyTorch's median of CUDA-event timings of whole steps after warm-up.\n\n")
        f.write("| model | params | mlc ms/step | eager ms/step | eager/mlc | loss worst rel (tol) | worst abs | "
                "weights after | names |\n|---|---|---|---|---|---|---|---|---|\n")
        for r in recs:
            f.write("| %s | %.1fM | %.2f | %.2f | %.2f | %.2e (%g) %s | %.2e | %.2e (%s) | %s |\n" % (
                r["model"], r["params"] / 1e6, r["mlc_ms"], r["torch_ms"], r["ratio"], r["worst_rel"], r["loss_tol"],
                "ok" if r["ok_loss"] else "FAIL", r["worst_abs"], r["weights_worst"], r["weights_worst_name"],
                "ok" if r["ok_names"] else "FAIL"))
        for r in recs:
            f.write("\n%s (%s), losses over %d steps:\n\n| step | mlc | PyTorch | rel |\n|---|---|---|---|\n" % (
                r["model"], ", ".join("%s=%s" % kv for kv in r["config"].items()), r["steps"]))
            for s, (a, b) in enumerate(zip(r["mlc_losses"] + [float("nan")] * r["steps"], r["torch_losses"])):
                f.write("| %d | %.6f | %.6f | %.2e |\n" % (s + 1, a, b, abs(a - b) / abs(b)))


def torch_setup(dev):
    """PyTorch f32 at its default precision: no TF32 in matmuls."""
    torch.set_float32_matmul_precision("highest")
    return "torch %s, %s, float32 matmul precision %s" % (
        torch.__version__, torch.cuda.get_device_name() if dev == "cuda" else "CPU", torch.get_float32_matmul_precision())


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--mlc", required=True)
    ap.add_argument("--target", default="cuda", choices=["cuda", "cpu"])
    ap.add_argument("--f32-matmul", help="ieee, 3xtf32 or tf32, passed to mlc (default: mlc's own)")
    ap.add_argument("--small", action="store_true", help="tiny dims (the CPU)")
    ap.add_argument("--models", default="gpt2like,mlp")
    ap.add_argument("--set", action="append", default=[], metavar="MODEL.KEY=N",
                    help="change a config value, e.g. gpt2like.layers=4 (repeatable)")
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--runs", type=int, default=20, help="timed PyTorch steps")
    ap.add_argument("--profile", action="store_true", help="also log `mlc profile --entry train_step`")
    ap.add_argument("--work", default="/tmp/f32_models")
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    for kv in args.set:
        name, _, rest = kv.partition(".")
        key, _, val = rest.partition("=")
        cfg = (SMALL if args.small else CONFIGS).get(name, {})
        if key not in cfg or not val.isdigit():
            ap.error("--set %s: expected MODEL.KEY=N, MODEL one of %s, KEY one of its config" % (kv, ", ".join(CONFIGS)))
        cfg[key] = int(val)
    dev = "cuda" if args.target == "cuda" else "cpu"
    env = torch_setup(dev)
    head = "%s; mlc --target %s --f32-matmul %s%s" % (env, args.target, args.f32_matmul or "(mlc's default)",
                                                        ", small dims" if args.small else "")
    print(head, flush=True)
    recs, errors = [], {}
    for name in args.models.split(","):
        try:
            recs.append(run_model(args, name, dev))
        except RuntimeError as e:  # mlc failed: say so, go on with the next model
            print("FAIL %s: %s" % (name, e), flush=True)
            errors[name] = str(e)[-2000:]
        if dev == "cuda":  # the model's memory back, for mlc's next run
            gc.collect()
            torch.cuda.empty_cache()
        out = dict(torch=torch.__version__, device=torch.cuda.get_device_name() if dev == "cuda" else "cpu",
                   target=args.target, f32_matmul=args.f32_matmul, small=args.small, models={r["model"]: r for r in recs},
                   errors=errors)
        with open(os.path.join(args.out, "f32_models.json"), "w") as f:  # after each model: a timeout keeps it
            json.dump(out, f, indent=1)
        write_md(os.path.join(args.out, "f32_models.md"), recs, head)
    bad = [r["model"] for r in recs if not (r["ok_loss"] and r["ok_names"])] + list(errors)
    print("all checks passed" if not bad else "FAIL: " + ", ".join(bad))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
