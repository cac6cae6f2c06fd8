"""The training loop's schedule, clipping and accumulation against PyTorch.

An MLP (inputs 16, hidden 32, 10 classes) from seeded PyTorch weights, on
320 random rows through `mlc train --input` (step k takes rows 16k..16k+15):

1. AdamW(lr=1e-2, warmup=5, decay=cosine, min_lr=1e-3) with clip_grad_norm
   = 0.5 (low enough to clip every step), 20 steps: each step's loss, learning
   rate and gradient norm against torch.optim.AdamW with a LambdaLR of
   llm.c's schedule and torch.nn.utils.clip_grad_norm_, within 1e-4; the
   rates also against torch's own LinearLR + CosineAnnealingLR, stepped in
   turn (no SequentialLR: 1.13's restarts the cosine), within 1e-7.
2. The same with decay=linear and SGD(momentum=0.9), clip_grad_norm = 1.0.
3. accum = 4 of micro-batches of 4 (--accum 4 batch=4): 10 losses against
   one torch batch of 16, within 1e-4, and the exported weights within 1e-5
   (relative) of torch's.
4. Resume: with steps=20 declared, 12 steps with --save, then --resume with
   8 more gives the losses and rates of steps 13-20 of the uninterrupted run,
   and the same final checkpoint, byte for byte.  Without steps=, the first
   run's length (its --steps) travels in the checkpoint, and a resumed run
   continues that schedule (here at min_lr, past its end).
5. Errors at file:line:col, exactly: a negative warmup, clip_grad_norm <= 0,
   accum 0, min_lr without a decay, steps not past the warmup, an unknown
   decay, and --accum 0.

Usage: train_schedule.py MLC WORKDIR"""
import math
import os
import re
import subprocess
import sys

import numpy as np
import torch

from models import MLP, Checks, mlp_mdl, read_safetensors, write_safetensors

B, STEPS = 16, 20


def llmc_lr(base, warmup, total, min_lr, decay):
    def f(step):  # the rate of the step after `step` steps, as a factor of base
        if step < warmup:
            return (step + 1) / warmup
        if decay == "none":
            return 1.0
        if step >= total:
            return min_lr / base
        r = (step - warmup) / (total - warmup)
        c = 0.5 * (1 + math.cos(math.pi * r)) if decay == "cosine" else 1 - r
        return (min_lr + c * (base - min_lr)) / base
    return f


def reference(sd, x, y, steps, batch, opt_kind, lr, warmup, min_lr, decay, clip):
    model = MLP(16, 32, 10)
    model.load_state_dict(sd)
    if opt_kind == "adamw":
        opt = torch.optim.AdamW(model.parameters(), lr=lr)
    else:
        opt = torch.optim.SGD(model.parameters(), lr=lr, momentum=0.9)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, llmc_lr(lr, warmup, steps, min_lr, decay))
    losses, lrs, norms = [], [], []
    for k in range(steps):
        rows = slice(k * batch, (k + 1) * batch)
        loss = torch.nn.functional.cross_entropy(model(x[rows]), y[rows].long())
        opt.zero_grad()
        loss.backward()
        norms.append(float(torch.nn.utils.clip_grad_norm_(model.parameters(), clip)) if clip else 0.0)
        lrs.append(opt.param_groups[0]["lr"])
        opt.step()
        sched.step()
        losses.append(loss.item())
    return losses, lrs, norms, {k: v.detach() for k, v in model.state_dict().items()}


def torch_scheduler_rates(lr, warmup, steps, min_lr):
    """The same schedule from torch's own schedulers: LinearLR for the warmup
    (start 1/warmup, reaching 1 after warmup - 1 steps), then a fresh
    CosineAnnealingLR over the rest."""
    p = torch.nn.Parameter(torch.zeros(1))
    opt = torch.optim.SGD([p], lr=lr)
    warm = torch.optim.lr_scheduler.LinearLR(opt, start_factor=1 / warmup, end_factor=1.0, total_iters=warmup - 1)
    rates = []
    for _ in range(warmup):
        rates.append(opt.param_groups[0]["lr"])
        opt.step()
        warm.step()
    opt2 = torch.optim.SGD([p], lr=lr)
    cos = torch.optim.lr_scheduler.CosineAnnealingLR(opt2, T_max=steps - warmup, eta_min=min_lr)
    for _ in range(steps - warmup):
        rates.append(opt2.param_groups[0]["lr"])
        opt2.step()
        cos.step()
    return rates


LINE = re.compile(r"^step (\d+): loss (\S+)(?:, lr (\S+))?(?:, grad norm (\S+))? \(", re.M)


def parse(out):
    rows = LINE.findall(out)
    return ([float(r[1]) for r in rows], [float(r[2]) if r[2] else 0.0 for r in rows],
            [float(r[3]) if r[3] else 0.0 for r in rows])


def main():
    mlc, work = sys.argv[1], os.path.abspath(sys.argv[2])
    os.makedirs(work, exist_ok=True)
    p = lambda name: os.path.join(work, name)  # noqa: E731
    torch.manual_seed(0)
    sd = {k: v.detach() for k, v in MLP(16, 32, 10).state_dict().items()}
    write_safetensors(p("w.safetensors"), sd, {"format": "pt"})
    x = torch.randn(B * STEPS, 16) * 3
    y = torch.randint(0, 10, (B * STEPS,), dtype=torch.int32)
    np.save(p("x.npy"), x.numpy())
    np.save(p("y.npy"), y.numpy())
    data = ["--weights", p("w.safetensors"), "--input", f"x={p('x.npy')}", "--input", f"labels={p('y.npy')}"]
    check = Checks()

    def train(name, opt, extra, args, batch=B):
        path = p(name + ".mdl")
        with open(path, "w") as f:
            f.write(mlp_mdl(batch, 32, f"    optimizer = {opt}\n{extra}"))
        r = subprocess.run([mlc, "train", path, "--target", "cpu", *data, *args], capture_output=True, text=True)
        if r.returncode:
            print(r.stdout + r.stderr)
        return r

    # 1. AdamW, warmup + cosine, clipping
    r = train("cosine", "AdamW(lr=1e-2, warmup=5, decay=cosine, min_lr=1e-3)", "    clip_grad_norm = 0.5\n",
              ["--steps", str(STEPS), "--export", p("cosine.safetensors")])
    got, glr, gnorm = parse(r.stdout)
    want, wlr, wnorm, wsd = reference(sd, x, y, STEPS, B, "adamw", 1e-2, 5, 1e-3, "cosine", 0.5)
    el = max((abs(a - b) for a, b in zip(got, want)), default=1.0)
    er = max((abs(a - b) / b for a, b in zip(glr, wlr)), default=1.0)
    en = max((abs(a - b) for a, b in zip(gnorm, wnorm)), default=1.0)
    check(r.returncode == 0 and len(got) == STEPS and el <= 1e-4,
          f"AdamW warmup 5 + cosine to 1e-3 + clip 0.5: {len(got)} losses within 1e-4 of torch (max {el:.2e})")
    check(len(glr) == STEPS and er <= 1e-4, f"  its printed rates within 1e-4 (relative; 5 digits printed) of LambdaLR's (max {er:.2e})")
    check(len(gnorm) == STEPS and en <= 1e-4 and min(wnorm) > 0.5,
          f"  its gradient norms within 1e-4 of clip_grad_norm_'s, every step clipped (max {en:.2e}, least norm {min(wnorm):.3f})")
    tr = torch_scheduler_rates(1e-2, 5, STEPS, 1e-3)
    et = max(abs(a - b) for a, b in zip(tr, wlr))
    check(et <= 1e-7, f"  LambdaLR's rates match torch's LinearLR + CosineAnnealingLR (max {et:.2e})")
    g = read_safetensors(p("cosine.safetensors"))[0]
    ew = max(float((g[k].double() - wsd[k].double()).abs().max() / wsd[k].double().abs().max()) for k in wsd)
    check(ew <= 1e-5, f"  the weights after 20 steps within 1e-5 (relative) of torch's (max {ew:.2e})")

    # 2. SGD, warmup + linear decay, clip 1.0
    r = train("linear", "SGD(lr=0.05, momentum=0.9, warmup=3, decay=linear, min_lr=0.005)", "    clip_grad_norm = 1.0\n",
              ["--steps", str(STEPS)])
    got, glr, gnorm = parse(r.stdout)
    want, wlr, wnorm, _ = reference(sd, x, y, STEPS, B, "sgd", 0.05, 3, 0.005, "linear", 1.0)
    el = max((abs(a - b) for a, b in zip(got, want)), default=1.0)
    en = max((abs(a - b) for a, b in zip(gnorm, wnorm)), default=1.0)
    check(r.returncode == 0 and len(got) == STEPS and el <= 1e-4 and en <= 1e-4,
          f"SGD warmup 3 + linear decay + clip 1.0: losses (max {el:.2e}) and norms (max {en:.2e}) within 1e-4 of torch")

    # 3. accumulation: 4 micro-batches of 4 = one batch of 16
    r = train("accum", "AdamW(lr=1e-2)", "", ["--accum", "4", "--steps", "10", "--export", p("accum.safetensors")], batch=4)
    got, _, _ = parse(r.stdout)
    want, _, _, wsd = reference(sd, x, y, 10, 16, "adamw", 1e-2, 0, 0, "none", 0)
    el = max((abs(a - b) for a, b in zip(got, want)), default=1.0)
    g = read_safetensors(p("accum.safetensors"))[0] if r.returncode == 0 else {}
    ew = max((float((g[k].double() - wsd[k].double()).abs().max() / wsd[k].double().abs().max()) for k in wsd if k in g),
             default=1.0)
    check(r.returncode == 0 and len(got) == 10 and el <= 1e-4 and ew <= 1e-5,
          f"--accum 4 of batch 4: 10 losses within 1e-4 of one torch batch of 16 (max {el:.2e}), weights within 1e-5 (max {ew:.2e})")
    r = train("accum_block", "AdamW(lr=1e-2, warmup=2, decay=cosine)", "    accum = 4\n    clip_grad_norm = 0.5\n",
              ["--steps", "10"], batch=4)
    got, _, gnorm = parse(r.stdout)
    want, _, wnorm, _ = reference(sd, x, y, 10, 16, "adamw", 1e-2, 2, 0, "cosine", 0.5)
    el = max((abs(a - b) for a, b in zip(got + gnorm, want + wnorm)), default=1.0)
    check(r.returncode == 0 and len(got) == 10 and el <= 1e-4,
          f"accum = 4 in the block, with a schedule and clipping: losses and norms within 1e-4 of torch's batch of 16 (max {el:.2e})")

    # 4. resume continues the schedule: its length declared (steps=20), or carried by the checkpoint
    opt = "AdamW(lr=1e-2, warmup=5, decay=cosine, min_lr=1e-3, steps=20)"
    full = train("resume", opt, "    clip_grad_norm = 0.5\n", ["--steps", "20", "--save", p("full.ckpt")])
    first = train("resume", opt, "    clip_grad_norm = 0.5\n", ["--steps", "12", "--save", p("part.ckpt")])
    rest = train("resume", opt, "    clip_grad_norm = 0.5\n", ["--steps", "8", "--resume", p("part.ckpt"), "--save", p("part.ckpt")])
    fl, flr, _ = parse(full.stdout)
    sl, slr, _ = parse(first.stdout + rest.stdout)
    same = open(p("full.ckpt"), "rb").read() == open(p("part.ckpt"), "rb").read()
    check(full.returncode == 0 and rest.returncode == 0 and fl == sl and flr == slr and len(fl) == 20 and same,
          "steps=20: 12 steps, save, --resume 8 more: the same 20 losses and rates as one run, and a byte-identical checkpoint")
    opt = "AdamW(lr=1e-2, warmup=5, decay=cosine, min_lr=1e-3)"
    first = train("carry", opt, "", ["--steps", "12", "--save", p("carry.ckpt")])
    rest = train("carry", opt, "", ["--steps", "8", "--resume", p("carry.ckpt")])
    _, lr1, _ = parse(first.stdout)
    _, lr2, _ = parse(rest.stdout)
    meta = read_safetensors(p("carry.ckpt"))[1]
    wl = [llmc_lr(1e-2, 5, 12, 1e-3, "cosine")(k) * 1e-2 for k in range(20)]
    er = max((abs(a - b) / b for a, b in zip(lr1 + lr2, wl)), default=1.0)
    check(rest.returncode == 0 and meta.get("schedule_steps") == "12" and len(lr1 + lr2) == 20 and er <= 1e-4,
          f"without steps=: the checkpoint carries the first run's length (12), and the resumed run keeps it (rates max {er:.2e})")

    # 5. errors
    cases = [
        ("AdamW(lr=1e-3, warmup=-5)", "", [], "neg_warmup.mdl:10:32: error: warmup (steps) must be between 0 and 1099511627776, got -5"),
        ("AdamW(lr=1e-3)", "    clip_grad_norm = 0\n", [],
         "clip0.mdl:11:22: error: clip_grad_norm is the largest gradient norm and must be positive, got 0"),
        ("AdamW(lr=1e-3)", "    accum = 0\n", [], "accum0.mdl:11:13: error: accum (micro-batches per step) must be between 1 and 65536, got 0"),
        ("AdamW(lr=1e-3, min_lr=1e-4)", "", [],
         "minlr.mdl:10:32: error: min_lr is where the rate decays to: it needs decay=cosine or decay=linear"),
        ("AdamW(lr=1e-3, warmup=10, decay=linear, steps=10)", "", [],
         "short.mdl:10:57: error: steps (10) must be more than warmup (10): the rate decays between them"),
        ("AdamW(lr=1e-3, decay=cosin)", "", [], "cosin.mdl:10:38: error: decay must be cosine, linear or none"),
        ("AdamW(lr=1e-3)", "", ["--accum", "0"], "mlc: --accum 0: expected a number of micro-batches, 1 to 65536"),
    ]
    names = ["neg_warmup", "clip0", "accum0", "minlr", "short", "cosin", "accum_flag"]
    for (opt, extra, args, msg), name in zip(cases, names):
        r = train(name, opt, extra, ["--steps", "1", *args])
        lines = [ln.replace(work + "/", "") for ln in r.stderr.splitlines() if "error" in ln or ln.startswith("mlc: --")]
        check(r.returncode != 0 and lines[:1] == [msg], f"error: {msg}" + ("" if lines[:1] == [msg] else f"\n     got {lines[:1]}"))
    return check.finish()


if __name__ == "__main__":
    sys.exit(main())
