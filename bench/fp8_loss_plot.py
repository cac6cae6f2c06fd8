#!/usr/bin/python3
"""The GPU's FP8 loss curve against bf16's (issue 30): two `mlc train` logs
of the same model, init and batches (bench/h200_s25.sh PART=loss: the
MiniLLM on the King James Bible's bytes), bf16 and --matmul=fp8.

Writes OUTDIR/loss.svg (10-step means of the training loss, both runs) and
OUTDIR/summary.md, and prints the summary: at step S (the last), the
relative gap (fp8 - bf16) / bf16 of the training loss's 10-step mean and of
the validation loss; the largest gap of the 10-step means from step 100 on
and over all steps.

Usage: fp8_loss_plot.py BF16_LOG FP8_LOG OUTDIR [TITLE]"""
import os
import re
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "examples", "kjv"))
from plot import frame  # noqa: E402


def read(path):
    train, val = {}, {}
    for line in open(path):
        m = re.match(r"step (\d+): loss ([-0-9.e]+)", line)
        if m:
            train[int(m.group(1))] = float(m.group(2))
        m = re.match(r"step (\d+): validation ([-0-9.e]+)", line)
        if m:
            val[int(m.group(1))] = float(m.group(2))
    return train, val


def avg(t, s):
    return sum(t[k] for k in range(s - 9, s + 1)) / 10


def main():
    b16, f8, out = sys.argv[1:4]
    title = sys.argv[4] if len(sys.argv) > 4 else "FP8 vs bf16 on CUDA: the MiniLLM on the KJV bytes"
    os.makedirs(out, exist_ok=True)
    (tb, vb), (tf, vf) = read(b16), read(f8)
    steps = max(s for s in tb if s in tf)
    gap = lambda a, b: (a - b) / b  # noqa: E731
    gt = gap(avg(tf, steps), avg(tb, steps))
    gv = gap(vf[steps], vb[steps]) if steps in vb and steps in vf else float("nan")
    worst100 = max(abs(gap(avg(tf, s), avg(tb, s))) for s in range(100, steps + 1, 10))
    worst = max(abs(gap(avg(tf, s), avg(tb, s))) for s in range(10, steps + 1, 10))
    lines = [f"| run | train loss, mean of steps {steps - 9}-{steps} | validation at {steps} |", "|---|---|---|",
             f"| bf16 | {avg(tb, steps):.4f} | {vb.get(steps, float('nan')):.4f} |",
             f"| fp8 | {avg(tf, steps):.4f} | {vf.get(steps, float('nan')):.4f} |",
             f"| gap (fp8 - bf16) / bf16 | {100 * gt:+.2f} % | {100 * gv:+.2f} % |", "",
             f"Largest gap of the 10-step means: {100 * worst100:.2f} % from step 100 on, {100 * worst:.2f} % over all "
             f"{steps} steps. Validation at every eval: " +
             ", ".join(f"{s}: {vb[s]:.4f} / {vf[s]:.4f}" for s in sorted(vb) if s in vf) + " (bf16 / fp8)."]
    open(os.path.join(out, "summary.md"), "w").write("\n".join(lines) + "\n")
    print("\n".join(lines))
    W, H, L, R, T, B = 760, 420, 60, 110, 40, 50
    ys = [avg(t, s) for t in (tb, tf) for s in range(10, steps + 1, 10)]
    o, X, Y = frame(W, H, L, R, T, B, 0, steps, 0, max(ys) * 1.02, title, "training loss, 10-step mean (nats a byte)",
                    ".1f")
    for k, (name, t, color) in enumerate((("bf16", tb, "black"), ("fp8", tf, "#d62728"))):
        pts = " ".join(f"{X(s):.1f},{Y(avg(t, s)):.1f}" for s in range(10, steps + 1, 10))
        o.append(f'<polyline points="{pts}" fill="none" stroke="{color}" stroke-width="1.2"/>')
        o.append(f'<line x1="{W - R + 10}" y1="{T + 14 * k}" x2="{W - R + 30}" y2="{T + 14 * k}" stroke="{color}"/>'
                 f'<text x="{W - R + 34}" y="{T + 14 * k + 4}">{name}</text>')
    o.append("</svg>")
    open(os.path.join(out, "loss.svg"), "w").write("\n".join(o) + "\n")


if __name__ == "__main__":
    main()
