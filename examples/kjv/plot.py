"""The loss curves of an `mlc train` log as an SVG: the training loss of
every step (thin) and the validation loss where it was measured (dots),
in nats, against the step.

Usage: plot.py TRAIN_LOG OUT.svg [TITLE]"""
import re
import sys


def curves(log):
    train, val = [], []
    for line in open(log):
        m = re.match(r"step (\d+): loss ([-0-9.e]+)", line)
        if m:
            train.append((int(m.group(1)), float(m.group(2))))
        m = re.match(r"step (\d+): validation ([-0-9.e]+)", line)
        if m:
            val.append((int(m.group(1)), float(m.group(2))))
    return train, val


def frame(w, h, l, r, t, b, x0, x1, y0, y1, title, ylabel, yfmt=".1f"):
    """An SVG's opening lines: background, title, axes with 6 ticks each and
    their labels, for data in [x0, x1] x [y0, y1] inside the margins l, r, t,
    b.  Returns the lines and the maps X(step), Y(value) to pixels."""
    X = lambda s: l + (s - x0) / (x1 - x0) * (w - l - r)  # noqa: E731
    Y = lambda v: h - b - (v - y0) / (y1 - y0) * (h - t - b)  # noqa: E731
    o = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" font-family="sans-serif" font-size="12">',
         f'<rect width="{w}" height="{h}" fill="white"/>',
         f'<text x="{(l + w - r) / 2}" y="20" text-anchor="middle" font-size="14">{title}</text>',
         f'<line x1="{l}" y1="{h - b}" x2="{w - r}" y2="{h - b}" stroke="black"/>',
         f'<line x1="{l}" y1="{t}" x2="{l}" y2="{h - b}" stroke="black"/>']
    for i in range(6):
        v = y0 + (y1 - y0) * i / 5
        o.append(f'<line x1="{l - 4}" y1="{Y(v):.1f}" x2="{l}" y2="{Y(v):.1f}" stroke="black"/>')
        o.append(f'<text x="{l - 8}" y="{Y(v) + 4:.1f}" text-anchor="end">{v:{yfmt}}</text>')
        s = x0 + (x1 - x0) * i / 5
        o.append(f'<line x1="{X(s):.1f}" y1="{h - b}" x2="{X(s):.1f}" y2="{h - b + 4}" stroke="black"/>')
        o.append(f'<text x="{X(s):.1f}" y="{h - b + 18}" text-anchor="middle">{s:.0f}</text>')
    o.append(f'<text x="{(l + w - r) / 2}" y="{h - 10}" text-anchor="middle">step</text>')
    o.append(f'<text x="15" y="{(t + h - b) / 2}" text-anchor="middle" transform="rotate(-90 15 {(t + h - b) / 2})">'
             f'{ylabel}</text>')
    return o, X, Y


def svg(train, val, title):
    w, h, l, r, t, b = 640, 400, 60, 20, 40, 50
    xs = [s for s, _ in train + val]
    ys = [v for _, v in train + val]
    o, X, Y = frame(w, h, l, r, t, b, 0, max(xs), 0.0, max(ys) * 1.05, title, "loss (nats a byte)")
    pts = " ".join(f"{X(s):.1f},{Y(v):.1f}" for s, v in train)
    o.append(f'<polyline points="{pts}" fill="none" stroke="#1f77b4" stroke-width="1"/>')
    if val:
        pts = " ".join(f"{X(s):.1f},{Y(v):.1f}" for s, v in val)
        o.append(f'<polyline points="{pts}" fill="none" stroke="#d62728" stroke-width="1.5"/>')
        o += [f'<circle cx="{X(s):.1f}" cy="{Y(v):.1f}" r="3" fill="#d62728"/>' for s, v in val]
    o.append(f'<text x="{w - r - 150}" y="{t + 15}" fill="#1f77b4">training (each step)</text>')
    o.append(f'<text x="{w - r - 150}" y="{t + 32}" fill="#d62728">validation (held out)</text>')
    o.append("</svg>")
    return "\n".join(o) + "\n"


if __name__ == "__main__":
    train, val = curves(sys.argv[1])
    if not train:
        raise SystemExit(f"{sys.argv[1]}: no 'step N: loss X' lines")
    title = sys.argv[3] if len(sys.argv) > 3 else "byte-level LM on the King James Bible (mlc, CPU)"
    open(sys.argv[2], "w").write(svg(train, val, title))
    print(f"{len(train)} steps, {len(val)} validation points: {sys.argv[2]}")
