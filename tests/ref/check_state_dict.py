"""Checks `mlc compile examples/minillm.mdl --stats` against PyTorch.

Builds the MiniLLM of ../shared/bench/torch_baseline.py in Debian's PyTorch
(1.13: no nn.RMSNorm, so a hand-written one with the same parameter name) on
the meta device, so the 735M parameters cost no memory, and compares the
state_dict's names, order, dtypes and shapes, and the total, with what mlc
prints.  Usage: check_state_dict.py MLC MODEL.mdl [NAME=VALUE ...]
"""
import re
import subprocess
import sys

from models import MiniLLM


def main():
    mlc, model, defines = sys.argv[1], sys.argv[2], sys.argv[3:]
    cfg = dict(vocab=32000, dim=2048, layers=12, heads=16)
    for d in defines:
        k, v = d.split("=")
        if k in cfg:
            cfg[k] = int(v)
    ref = MiniLLM(**cfg, device="meta")
    sd = [(k, "f32", list(v.shape)) for k, v in ref.state_dict().items()]
    total = sum(p.numel() for p in ref.parameters())

    out = subprocess.run([mlc, "compile", model, "--stats", *defines], capture_output=True, text=True)
    if out.returncode != 0:
        sys.exit(f"mlc failed ({out.returncode}):\n{out.stderr}")
    got = []
    m_total = None
    for line in out.stdout.splitlines():
        m = re.match(r"^  (\S+)\s+(\w+)\[([0-9, ]*)\]$", line)
        if m:
            got.append((m.group(1), m.group(2), [int(x) for x in m.group(3).split(",")]))
        m = re.match(r"^total: ([0-9,]+) parameters", line)
        if m:
            m_total = int(m.group(1).replace(",", ""))
    ok = True
    if got != sd:
        ok = False
        for i in range(max(len(got), len(sd))):
            a = got[i] if i < len(got) else None
            b = sd[i] if i < len(sd) else None
            if a != b:
                print(f"mismatch at {i}: mlc {a} torch {b}")
                break
    if m_total != total:
        ok = False
        print(f"total: mlc {m_total} torch {total}")
    print(f"{len(sd)} tensors, {total:,} parameters: {'match' if ok else 'MISMATCH'}")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
