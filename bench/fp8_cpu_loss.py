"""FP8 training's loss against f32's on real text, on the CPU (issue 30's
numerics, before any GPU kernel exists): examples/gpt2.mdl trained byte by
byte on the King James Bible (examples/kjv/prepare.py), the same init and
batches in every run, with
  f32                 the plain step,
  fp8                 --matmul=fp8 (x, w e4m3; g e5m2; a scale per tensor),
  fp8:grad=e4m3       the same with e4m3 gradients.
The CPU emulates the FP8 GEMMs exactly (tests/ref/fp8.py checks them
against numpy), so these curves are what the recipe does to training; the
H200's step time is another question.

For each run: the training loss at every step and the validation loss
(last 1 % of the text) every 100 steps.  The gap at step S is
(fp8 - f32) / f32 of the training loss averaged over steps S-9..S (to damp
batch noise), and of the validation loss at S.

Usage: fp8_cpu_loss.py MLC ROOT OUTDIR   (writes OUTDIR/*.log, OUTDIR/loss.svg,
OUTDIR/summary.md)"""
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "examples", "kjv"))
from plot import frame  # noqa: E402  (the axes, ticks and labels, as examples/kjv's plot)
from fp8_loss_plot import avg, read  # noqa: E402  (bench/: a log's losses, a 10-step mean)

mlc, root, out = sys.argv[1:4]
os.makedirs(out, exist_ok=True)
data = os.path.join(out, "data")
if not os.path.exists(os.path.join(data, "idx.npy")):
    subprocess.run(["/usr/bin/python3", os.path.join(root, "examples/kjv/prepare.py"), data, "128"], check=True)

CONFIGS = {  # name: (gpt2.mdl config, steps)
    "small": ("vocab_size=256 block_size=128 n_layer=2 n_head=4 n_embd=96 batch=16 seq=128 learning_rate=2e-3", 1000),
    "wide": ("vocab_size=256 block_size=128 n_layer=4 n_head=6 n_embd=192 batch=16 seq=128 learning_rate=1e-3", 400),
}
MODES = {"f32": [], "fp8": ["--matmul=fp8"], "fp8_e4m3grad": ["--matmul=fp8:grad=e4m3"]}


def run(cfg, mode):
    log = os.path.join(out, f"{cfg}.{mode}.log")
    args, steps = CONFIGS[cfg]
    cmd = [mlc, "train", os.path.join(root, "examples/gpt2.mdl"), "--target", "cpu", *args.split(),
           "--input", f"idx={data}/idx.npy", "--input", f"targets={data}/targets.npy", "--eval-split", "0.01",
           "--eval-every", "100", "--steps", str(steps), *MODES[mode]]
    t0 = time.time()
    with open(log, "w") as f:
        f.write("# " + " ".join(cmd) + "\n")
        f.flush()
        subprocess.run(cmd, stdout=f, stderr=subprocess.STDOUT, check=True)
    print(f"{cfg} {mode}: {time.time() - t0:.0f} s", flush=True)
    return read(log)


res = {(c, m): run(c, m) for c in CONFIGS for m in MODES}
lines = ["| model | steps | mode | train loss (mean of last 10) | gap to f32 | validation | gap to f32 | largest gap of the 10-step means |",
         "|---|---|---|---|---|---|---|---|"]
for c, (args, steps) in CONFIGS.items():
    base_t, base_v = res[(c, "f32")]
    for m in MODES:
        t, v = res[(c, m)]
        gt = (avg(t, steps) - avg(base_t, steps)) / avg(base_t, steps)
        gv = (v[steps] - base_v[steps]) / base_v[steps]
        worst = max(abs(avg(t, s) - avg(base_t, s)) / avg(base_t, s) for s in range(10, steps + 1, 10))
        lines.append(f"| {c} | {steps} | {m} | {avg(t, steps):.4f} | {100 * gt:+.2f} % | {v[steps]:.4f} | {100 * gv:+.2f} % | "
                     f"{100 * worst:.2f} % |")
open(os.path.join(out, "summary.md"), "w").write("\n".join(lines) + "\n")
print("\n".join(lines))

# one SVG: each config's curves (10-step means of the training loss), f32 black, fp8 red, fp8 e4m3-grad blue
W, H, L, R, T, B = 760, 420, 60, 150, 40, 50
colors = {"f32": "black", "fp8": "#d62728", "fp8_e4m3grad": "#1f77b4"}
dash = {"small": "", "wide": "5,3"}
ys = [avg(t, s) for (c, m), (t, v) in res.items() for s in range(10, CONFIGS[c][1] + 1, 10)]
xmax = max(steps for _, steps in CONFIGS.values())
y0, y1 = min(ys) * 0.95, max(ys) * 1.02
o, X, Y = frame(W, H, L, R, T, B, 0, xmax, y0, y1, "FP8 (emulated, CPU) vs f32: examples/gpt2.mdl on the KJV bytes",
               "training loss, 10-step mean (nats a byte)", ".2f")
k = 0
for (c, m), (t, v) in res.items():
    pts = " ".join(f"{X(s):.1f},{Y(avg(t, s)):.1f}" for s in range(10, CONFIGS[c][1] + 1, 10))
    o.append(f'<polyline points="{pts}" fill="none" stroke="{colors[m]}" stroke-width="1.2" stroke-dasharray="{dash[c]}"/>')
    o.append(f'<line x1="{W - R + 10}" y1="{T + 14 * k}" x2="{W - R + 30}" y2="{T + 14 * k}" stroke="{colors[m]}" '
             f'stroke-dasharray="{dash[c]}"/><text x="{W - R + 34}" y="{T + 14 * k + 4}">{c} {m}</text>')
    k += 1
o.append("</svg>")
open(os.path.join(out, "loss.svg"), "w").write("\n".join(o) + "\n")
