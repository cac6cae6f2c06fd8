#!/usr/bin/env python3
"""GPT-2 124M training (issue 27): examples/gpt2.mdl under `mlc train` against
PyTorch eager and torch.compile, from the same weights on the same tokens.

The PyTorch model is tests/ref/gpt2.py's GPT (llm.c's train_gpt2.py, whose
state_dict names examples/gpt2.mdl keeps), with two changes made here by
subclassing, not by copying it: the positions are made on the input's device
(tests/ref/gpt2.py makes them on the CPU, its only device), and where torch has
F.scaled_dot_product_attention (2.x) the attention goes through it with
is_causal=True, as llm.c's flash path does (--torch-attention math keeps
tests/ref/gpt2.py's masked softmax).

  config     examples/gpt2.mdl's config block: vocab 50257, block_size 1024,
             12 layers, 12 heads, 768 wide, batch 4 x seq 1024 (124,439,808
             parameters); --small: tests/ref/gpt2.py's CFG, B and T.
  precision  what the train block declares: examples/gpt2.mdl has no
             precision(...), so f32 on both sides.  mlc: --f32-matmul's
             default (tf32x3, about f32's accuracy) unless --f32-matmul says;
             PyTorch: torch.set_float32_matmul_precision("highest") (no TF32),
             and --torch-precision high adds TF32.  A bf16 precision(...) in
             the train block would switch PyTorch to bf16 autocast and the
             tolerance to 2e-2.
  optimizer  the train block's AdamW (lr = config's learning_rate, betas, eps,
             weight_decay read from the .mdl), torch.optim.AdamW with the same,
             fused=True on CUDA where torch has it (llm.c's choice).
  data       one token stream (bench/f32_models.py's noisy Markov chain over
             the vocabulary, seed 0, so that the loss moves), written in
             llm.c's .bin format (uint16) for `mlc train --data`; step k trains
             on tokens [k*B*T, (k+1)*B*T] (inputs, and targets shifted by one),
             as mlc's --data reads them.
  weights    one initialisation (tests/ref/gpt2.py's, torch.manual_seed(0)),
             saved as safetensors with PyTorch's names less the attn.bias mask
             buffers; mlc starts from it with --weights, both PyTorch runs from
             copies of the same model.

Checks: every step's loss, mlc against PyTorch eager, within --tol relative
(default 1e-4: tests/ref/gpt2.py's tolerance for its f32 AdamW losses); mlc
against torch.compile and torch.compile against eager are printed too.
Times: mlc's per-step times as `mlc train` prints them (each step's wall time,
synchronised); PyTorch's each step timed with CUDA events (zero_grad,
forward, loss, backward, optimizer step; time.perf_counter on the CPU); both
the median of the steps after the first --warmup (default 3; torch.compile's
first step compiles).  ratio = PyTorch / mlc (> 1: mlc faster).

    python3 bench/gpt2_bench.py --mlc build-gpu/mlc --out $OUT                    # the H200
    /usr/bin/python3 bench/gpt2_bench.py --mlc build/mlc --small --target cpu --device cpu --out /tmp/gpt2

Writes gpt2.md, gpt2.json (metrics) and gpt2_detail.json (every loss and
time) to --out, after each phase, so that a timeout keeps what was done.
Exit status 1 if a check failed or mlc failed.
"""
import argparse
import copy
import datetime
import inspect
import json
import os
import re
import statistics
import subprocess
import sys
import time

import numpy as np
import torch
import torch.nn.functional as F

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests", "ref"))
sys.path.insert(0, os.path.join(ROOT, "bench"))
import gpt2 as ref_gpt2  # noqa: E402  tests/ref/gpt2.py
from f32_models import token_stream  # noqa: E402
from models import write_safetensors  # noqa: E402

MDL = os.path.join(ROOT, "examples", "gpt2.mdl")
MODEL_KEYS = ("vocab_size", "block_size", "n_layer", "n_head", "n_embd")


# ---- what examples/gpt2.mdl declares ----

def read_mdl(path):
    """The config block's values and the train block's AdamW and precision."""
    text = open(path).read()
    block = re.search(r"^config\s*\{(.*?)^\}", text, re.M | re.S).group(1)
    config = {}
    for name, val in re.findall(r"^\s*(\w+)\s*=\s*([^\s#]+)", block, re.M):
        config[name] = int(val) if re.fullmatch(r"-?\d+", val) else float(val)
    train = re.search(r"^train\s+\w+\s*\{(.*?)^\}", text, re.M | re.S).group(1)
    opt = re.search(r"AdamW\((.*?)\)\s*$", train, re.M).group(1)
    args = dict(re.findall(r"(\w+)\s*=\s*(\[[^\]]*\]|[^,\s]+)", opt))

    def value(v):
        return config[v] if v in config else float(v)
    adamw = dict(lr=value(args["lr"]), betas=tuple(float(b) for b in args["betas"].strip("[]").split(",")),
                 eps=value(args.get("eps", "1e-8")), weight_decay=value(args.get("weight_decay", "0.01")))
    prec = re.search(r"precision\((.*?)\)", train)
    bf16 = bool(prec and "bf16" in prec.group(1))
    return config, adamw, ("bf16 (" + prec.group(0) + ")") if bf16 else "f32 (no precision(...) in the train block)", bf16


# ---- the PyTorch model: tests/ref/gpt2.py's, two methods replaced ----

class SDPAAttention(ref_gpt2.CausalSelfAttention):
    """tests/ref/gpt2.py's attention through F.scaled_dot_product_attention."""

    def forward(self, x):
        b, t, c = x.size()
        q, k, v = self.c_attn(x).split(self.n_embd, dim=2)
        q, k, v = (z.view(b, t, self.n_head, c // self.n_head).transpose(1, 2) for z in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.c_proj(y.transpose(1, 2).contiguous().view(b, t, c))


class DeviceGPT(ref_gpt2.GPT):
    """tests/ref/gpt2.py's GPT with the positions on the input's device."""

    def forward(self, idx):
        pos = torch.arange(0, idx.size(1), dtype=torch.long, device=idx.device)
        x = self.transformer.wte(idx) + self.transformer.wpe(pos)
        for block in self.transformer.h:
            x = block(x)
        return self.lm_head(self.transformer.ln_f(x))


def make_model(cfg, attention):
    torch.manual_seed(0)
    m = ref_gpt2.GPT(cfg)  # its init: llm.c's, LayerNorms and biases moved off ones/zeros
    m.__class__ = DeviceGPT
    if attention == "sdpa":
        for blk in m.transformer.h:
            blk.attn.__class__ = SDPAAttention
    return m


# ---- mlc ----

STEP = re.compile(r"^step (\d+): loss ([-+0-9.eE]+|nan|-?inf)[^(\n]*\(([0-9.]+) ms", re.M)


def mlc_train(args, defines, weights, data, log):
    cmd = [args.mlc, "train", MDL, "--target", args.target, "--steps", str(args.steps), "--weights", weights,
           "--data", data, *defines] + (["--f32-matmul", args.f32_matmul] if args.f32_matmul else [])
    print("$ " + " ".join(cmd), flush=True)
    t0 = time.time()
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=args.mlc_timeout)
        out, rc = r.stdout + r.stderr, r.returncode
    except subprocess.TimeoutExpired as e:
        out = ((e.stdout or b"").decode() if isinstance(e.stdout, bytes) else (e.stdout or "")) + \
              ((e.stderr or b"").decode() if isinstance(e.stderr, bytes) else (e.stderr or ""))
        out += "\n(killed after %d s)\n" % args.mlc_timeout
        rc = 124
    with open(log, "w") as f:
        f.write(" ".join(cmd) + "\n" + out)
    wall = time.time() - t0
    steps = STEP.findall(out)
    print("mlc train: rc %d, %d steps printed, %.1f s in all (compile included)" % (rc, len(steps), wall), flush=True)
    if rc:
        print(out[-3000:], flush=True)
    return [float(l) for _, l, _ in steps], [float(ms) for _, _, ms in steps], rc, wall


# ---- PyTorch ----

def torch_train(model, adamw, batches, dev, bf16, fused):
    opt = torch.optim.AdamW(model.parameters(), **adamw, **({"fused": True} if fused else {}))

    def step(inp, tgt):
        opt.zero_grad(set_to_none=True)
        with torch.autocast(device_type=dev, dtype=torch.bfloat16, enabled=bf16):
            logits = model(inp)
        loss = F.cross_entropy(logits.float().view(-1, logits.size(-1)), tgt.view(-1))
        loss.backward()
        opt.step()
        return loss

    losses, ms = [], []
    for inp, tgt in batches:
        if dev == "cuda":
            a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            torch.cuda.synchronize()
            a.record()
            loss = step(inp, tgt)
            b.record()
            b.synchronize()
            ms.append(a.elapsed_time(b))
        else:
            t0 = time.perf_counter()
            loss = step(inp, tgt)
            ms.append((time.perf_counter() - t0) * 1e3)
        losses.append(loss.item())
    return losses, ms


def worst_rel(a, b):
    if len(a) != len(b) or not a:
        return float("inf")
    return max(abs(x - y) / abs(y) if x == x else float("inf") for x, y in zip(a, b))


def median_after(ms, warmup):
    return statistics.median(ms[warmup:]) if len(ms) > warmup else float("nan")


# ---- the outputs ----

def write_outputs(args, st):
    tag = "gpt2_small" if args.small else "gpt2_124m"
    r = st["runs"]
    mlc = r.get("mlc", {})
    eager = r.get("eager", {})
    comp = r.get("compile", {})
    shape = ", ".join("%s=%s" % kv for kv in st["config"].items())
    opt = "AdamW(lr=%g, betas=%s, eps=%g, weight_decay=%g)%s" % (
        st["adamw"]["lr"], list(st["adamw"]["betas"]), st["adamw"]["eps"], st["adamw"]["weight_decay"],
        ", fused" if st["fused"] else "")
    prec = "bf16 autocast" if st["bf16"] else "f32 (matmul precision %s)" % st["torch_precision"]
    how = "%s, %s attention, %s" % (prec, st["attention"], opt)
    what = "%s, median of steps %d..%d, %s" % (how, args.warmup + 1, args.steps, shape)
    m = {}
    if mlc.get("ms_median") is not None:
        for key, run, name in (("vs_eager", eager, "PyTorch eager"), ("vs_compile", comp, "torch.compile")):
            ref = run.get("ms_median")
            m["train_%s_%s" % (tag, key)] = {
                "mlc": mlc["ms_median"], "ref": ref, "ratio": (ref / mlc["ms_median"]) if ref else None, "unit": "ms",
                "ref_name": ("%s %s" % (name, what)) if ref else "%s: %s" % (name, run.get("skipped", "not run"))}
    if "worst_rel_eager" in st:
        w = st["worst_rel_eager"]
        m["loss_" + tag] = {"mlc": w, "ref": args.tol, "ratio": args.tol / max(w, 1e-12),
                            "unit": "relative loss difference, worst of %d steps" % args.steps,
                            "ref_name": "tolerance (tests/ref/gpt2.py, f32 AdamW losses) against PyTorch eager %s" % prec}
    out = {"commit": st["commit"], "date": st["date"], "hardware": st["hardware"], "command": st["command"], "metrics": m}
    with open(os.path.join(args.out, "gpt2.json"), "w") as f:
        json.dump(out, f, indent=1)
        f.write("\n")
    with open(os.path.join(args.out, "gpt2_detail.json"), "w") as f:
        json.dump(st, f, indent=1)

    lines = ["# %s: examples/gpt2.mdl, mlc --target %s against PyTorch (--device %s)" % (tag, args.target, st["device"]),
             "", "%s; commit %s, %s" % (st["hardware"], st["commit"], st["date"]), "",
             "Config %s (%s parameters); %s; mlc %s; PyTorch %s. ms/step: median of steps %d..%d." % (
                 shape, format(st["params"], ","), st["precision"],
                 "--f32-matmul " + args.f32_matmul if args.f32_matmul else "at its default --f32-matmul",
                 how, args.warmup + 1, args.steps), "",
             "| run | ms/step | tok/s | PyTorch / mlc | worst loss rel. diff. (tol %g) | wall s |" % args.tol,
             "|---|---|---|---|---|---|"]
    tokens = st["config"]["batch"] * st["config"]["seq"]
    for name, run, against in (("mlc", mlc, "eager"), ("PyTorch eager", eager, "mlc"),
                               ("torch.compile", comp, "mlc")):
        if not run or run.get("skipped"):
            lines.append("| %s | skipped: %s | | | | |" % (name, run.get("skipped", "not run") if run else "not run"))
            continue
        ms = run.get("ms_median", float("nan"))
        ratio = "" if name == "mlc" else "%.3f" % (ms / mlc["ms_median"]) if mlc.get("ms_median") else "?"
        w = run.get("worst_rel_vs_" + against)
        ok = "" if w is None else "%.2e%s" % (w, (" ok" if w <= args.tol else " FAIL") if name != "torch.compile" else "")
        lines.append("| %s | %.2f | %.0f | %s | %s (vs %s) | %.1f |" % (name, ms, tokens / ms * 1e3, ratio, ok, against,
                                                                      run.get("wall_s", 0)))
    lines += ["", "| step | mlc | eager | torch.compile | mlc/eager rel. | mlc ms | eager ms | compile ms |",
              "|---|---|---|---|---|---|---|---|"]
    nan = [float("nan")] * args.steps
    cols = [(r.get(k, {}).get("losses") or []) + nan for k in ("mlc", "eager", "compile")]
    tcols = [(r.get(k, {}).get("ms") or []) + nan for k in ("mlc", "eager", "compile")]
    for s in range(args.steps):
        a, b, c = (col[s] for col in cols)
        lines.append("| %d | %.6f | %.6f | %.6f | %.2e | %.2f | %.2f | %.2f |" % (
            s + 1, a, b, c, abs(a - b) / abs(b) if b == b else float("nan"), *(t[s] for t in tcols)))
    with open(os.path.join(args.out, "gpt2.md"), "w") as f:
        f.write("\n".join(lines) + "\n")
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--mlc", required=True)
    ap.add_argument("--target", default="cuda", choices=["cuda", "cpu"], help="mlc's target")
    ap.add_argument("--device", choices=["cuda", "cpu"], help="PyTorch's device (default: the target's)")
    ap.add_argument("--small", action="store_true", help="tests/ref/gpt2.py's small config (a CPU dry run)")
    ap.add_argument("--batch", type=int, help="batch (default: the .mdl's, 4)")
    ap.add_argument("--seq", type=int, help="seq (default: the .mdl's, 1024; at most block_size)")
    ap.add_argument("--steps", type=int, help="steps (default 20, --small 10)")
    ap.add_argument("--warmup", type=int, default=3, help="first steps left out of the medians")
    ap.add_argument("--tol", type=float, help="relative loss tolerance (default 1e-4; 2e-2 for bf16)")
    ap.add_argument("--f32-matmul", help="passed to mlc (default: mlc's own, tf32x3)")
    ap.add_argument("--torch-precision", default="highest", choices=["highest", "high"],
                    help="torch.set_float32_matmul_precision (highest: no TF32)")
    ap.add_argument("--torch-attention", choices=["sdpa", "math"],
                    help="sdpa (default where torch has it) or tests/ref/gpt2.py's masked softmax")
    ap.add_argument("--no-compile", action="store_true", help="skip torch.compile")
    ap.add_argument("--mlc-timeout", type=int, default=300, help="seconds for `mlc train`, its compile included")
    ap.add_argument("--commit", default=os.environ.get("COMMIT"))
    ap.add_argument("--command", help="for the JSON (default: this command line)")
    ap.add_argument("--work", default="/tmp/gpt2_bench")
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    dev = args.device or args.target
    os.makedirs(args.out, exist_ok=True)
    os.makedirs(args.work, exist_ok=True)

    config, adamw, precision, bf16 = read_mdl(MDL)
    if args.small:
        cfg = dict(ref_gpt2.CFG, batch=ref_gpt2.B, seq=ref_gpt2.T)
    else:
        cfg = {k: config[k] for k in MODEL_KEYS + ("batch", "seq")}
    if args.batch:
        cfg["batch"] = args.batch
    if args.seq:
        cfg["seq"] = args.seq
    args.steps = args.steps or (10 if args.small else 20)
    args.tol = args.tol or (2e-2 if bf16 else 1e-4)
    attention = args.torch_attention or ("sdpa" if hasattr(F, "scaled_dot_product_attention") else "math")
    if attention == "sdpa" and not hasattr(F, "scaled_dot_product_attention"):
        ap.error("torch %s has no F.scaled_dot_product_attention" % torch.__version__)
    torch.set_float32_matmul_precision(args.torch_precision)
    fused = dev == "cuda" and "fused" in inspect.signature(torch.optim.AdamW).parameters
    commit = args.commit or subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"],
                                           capture_output=True, text=True).stdout.strip() or "?"
    hardware = "%s, torch %s" % ((torch.cuda.get_device_name() + " (one GPU)") if dev == "cuda" else
                                 "the CPU (%d threads)" % torch.get_num_threads(), torch.__version__)
    st = dict(commit=commit, date=datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d"), hardware=hardware,
              command=args.command or " ".join(["python3"] + sys.argv), config=cfg, adamw=adamw,
              precision=precision, bf16=bf16, torch_precision=args.torch_precision, attention=attention,
              fused=fused, device=dev, target=args.target, steps=args.steps, warmup=args.warmup, tol=args.tol,
              runs={})
    print("%s; %s; config %s; %s; PyTorch on %s, %s attention, AdamW %s%s" % (
        hardware, precision, cfg, "commit " + commit, dev, attention, adamw, " fused" if fused else ""), flush=True)

    # one set of weights, one token stream
    t0 = time.time()
    model = make_model({k: cfg[k] for k in MODEL_KEYS}, attention)
    st["params"] = sum(p.numel() for p in model.parameters())
    weights = os.path.join(args.work, "init.safetensors")
    write_safetensors(weights, {k: v.detach().clone().contiguous() for k, v in model.state_dict().items()
                                if not k.endswith(".attn.bias")}, {"format": "pt"})
    B, T = cfg["batch"], cfg["seq"]
    tok = token_stream(args.steps * B * T + 1, cfg["vocab_size"])
    data = os.path.join(args.work, "tokens.bin")
    header = np.zeros(256, dtype=np.int32)
    header[:3] = (20240520, 1, tok.numel())  # llm.c's .bin: magic, version, token count; then uint16 tokens
    with open(data, "wb") as f:
        f.write(header.tobytes() + tok.numpy().astype(np.uint16).tobytes())
    print("weights (%s parameters) and %d tokens written in %.1f s" % (format(st["params"], ","), tok.numel(),
                                                                       time.time() - t0), flush=True)

    # mlc first, while this process holds no GPU memory
    defines = ["%s=%s" % kv for kv in cfg.items()]
    losses, ms, rc, wall = mlc_train(args, defines, weights, data, os.path.join(args.out, "gpt2_mlc.log"))
    st["runs"]["mlc"] = dict(losses=losses, ms=ms, rc=rc, wall_s=wall, ms_median=median_after(ms, args.warmup)
                             if len(ms) > args.warmup else None)
    write_outputs(args, st)

    batches = [(tok[s * B * T: (s + 1) * B * T].view(B, T).long().to(dev),
                tok[s * B * T + 1: (s + 1) * B * T + 1].view(B, T).long().to(dev)) for s in range(args.steps)]
    runs = [("eager", False)] + ([] if args.no_compile else [("compile", True)])
    if args.no_compile:
        st["runs"]["compile"] = dict(skipped="--no-compile")
    for name, compiled in runs:
        if compiled and not hasattr(torch, "compile"):
            st["runs"][name] = dict(skipped="torch %s has no torch.compile" % torch.__version__)
            print("torch.compile: skipped, torch %s has none" % torch.__version__, flush=True)
            continue
        m = copy.deepcopy(model).to(dev)  # the same initial weights, the tie kept
        if compiled:
            m = torch.compile(m)
        t0 = time.time()
        try:
            l_, ms_ = torch_train(m, adamw, batches, dev, bf16, fused)
        except Exception as e:  # noqa: BLE001  (torch.compile's failures: say so, keep eager's numbers)
            st["runs"][name] = dict(skipped="failed: %s: %s" % (type(e).__name__, str(e)[:300]))
            print("%s failed: %r" % (name, e), flush=True)
            write_outputs(args, st)
            continue
        st["runs"][name] = dict(losses=l_, ms=ms_, wall_s=time.time() - t0, ms_median=median_after(ms_, args.warmup))
        print("%s: %.2f ms/step (median of steps %d..%d), %.1f s in all" % (
            name, st["runs"][name]["ms_median"], args.warmup + 1, args.steps, time.time() - t0), flush=True)
        del m
        if dev == "cuda":
            torch.cuda.empty_cache()
        write_outputs(args, st)

    r = st["runs"]
    eager_l = r["eager"].get("losses", [])
    comp_l = r.get("compile", {}).get("losses")
    r["mlc"]["worst_rel_vs_eager"] = st["worst_rel_eager"] = worst_rel(losses, eager_l)
    r["eager"]["worst_rel_vs_mlc"] = st["worst_rel_eager"]
    if comp_l:
        r["compile"]["worst_rel_vs_mlc"] = worst_rel(losses, comp_l)
        r["compile"]["worst_rel_vs_eager"] = worst_rel(comp_l, eager_l)
    table = write_outputs(args, st)
    print("\n" + table + "\n", flush=True)
    ok = rc == 0 and len(losses) == args.steps and st["worst_rel_eager"] <= args.tol
    print("losses: mlc against PyTorch eager, worst relative difference %.2e (tol %g): %s" % (
        st["worst_rel_eager"], args.tol, "ok" if ok else "FAIL"))
    if comp_l:
        print("torch.compile against eager: worst %.2e (for information)" % r["compile"]["worst_rel_vs_eager"])
    print(json.dumps({k: v["ratio"] for k, v in json.load(open(os.path.join(args.out, "gpt2.json")))["metrics"].items()}))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
