#!/usr/bin/env python3
"""An imported graph's buffers and constants, against PyTorch: the tensors
of a torch model that are no nn.Parameter stay fixed in a train block, and a
--weights file that holds only torch's state_dict loads.

The model: an embedding plus a registered float buffer (a position table,
persistent: in the state_dict), a non-persistent int64 buffer that permutes
the features (x[:, :, perm]: a Gather reading an integer initializer at run
time, in no state_dict), LayerNorm and a Linear head.  Exported with
do_constant_folding=False, so that the initializers are torch's tensors
under their names.

--check frozen: `net = onnx("m.onnx", frozen=["pos_table"])`, and again with
  trainable=[the names of model.named_parameters()]; 5 AdamW steps by
  `mlc train --export` against torch's: the losses within 1e-5 (relative),
  the trained weights within 1e-4 of torch's update (2-norms), and
  pos_table exactly its starting value in the export.
--check weights: a safetensors file with exactly torch's state_dict (new
  values, not the ONNX file's) loads with `mlc run --weights`, into the
  .onnx model and into the .mdl module, and gives torch's logits within
  1e-5; without one trainable tensor it is an error naming it.

Exits 77 (a skip) where torch or onnx is missing.

Usage: onnx_module_buffers.py --mlc MLC --check frozen|weights [--work DIR]"""
import argparse
import json
import os
import re
import subprocess
import sys

try:
    import numpy as np
    import torch
    import torch.nn as nn
    import torch.nn.functional as F
    import onnx  # noqa: F401
except ImportError as e:  # pragma: no cover - a machine without torch
    print(f"skipped: {e} (the test exports its model with torch.onnx.export)")
    sys.exit(77)

VOCAB, DIM, SEQ, BATCH = 32, 16, 8, 2
STEPS, LR = 5, 1e-2
LOSS_TOL, WEIGHT_TOL, FORWARD_TOL = 1e-5, 1e-4, 1e-5


class Buffered(nn.Module):
    def __init__(self):
        super().__init__()
        self.tok = nn.Embedding(VOCAB, DIM)
        self.register_buffer("pos_table", torch.randn(SEQ, DIM))
        self.register_buffer("perm", torch.randperm(DIM), persistent=False)
        self.ln = nn.LayerNorm(DIM)
        self.head = nn.Linear(DIM, VOCAB)

    def forward(self, idx):
        x = self.tok(idx) + self.pos_table
        x = x[:, :, self.perm]
        return self.head(self.ln(x))


def write_safetensors(path, tensors):
    dt = {torch.float32: "F32", torch.int64: "I64"}
    header, blobs, at = {}, [], 0
    for k, t in sorted(tensors.items()):
        b = t.contiguous().numpy().tobytes()
        header[k] = {"dtype": dt[t.dtype], "shape": list(t.shape), "data_offsets": [at, at + len(b)]}
        blobs.append(b)
        at += len(b)
    h = json.dumps(header).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(len(h).to_bytes(8, "little") + h + b"".join(blobs))


def read_safetensors(path):
    with open(path, "rb") as f:
        n = int.from_bytes(f.read(8), "little")
        header = json.loads(f.read(n))
        data = f.read()
    dt = {"F32": np.float32, "I64": np.int64, "I32": np.int32, "BOOL": np.bool_}
    out = {}
    for k, v in header.items():
        if k == "__metadata__":
            continue
        a, b = v["data_offsets"]
        out[k] = np.frombuffer(data[a:b], dtype=dt[v["dtype"]]).reshape(v["shape"])
    return out


def mdl(option):
    return f"""config {{ batch = {BATCH}  seq = {SEQ} }}

module Tuned {{
    net = onnx("buffered.onnx"{option})
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


def mlc(args, *cmd):
    cmd = [args.mlc, *cmd]
    print(" ".join(cmd))
    return subprocess.run(cmd, capture_output=True, text=True)


def setup(args):
    torch.manual_seed(0)
    model = Buffered()
    model.eval()
    idx = torch.randint(0, VOCAB, (BATCH, SEQ), dtype=torch.int64)
    targets = torch.randint(0, VOCAB, (BATCH, SEQ), dtype=torch.int64)
    p = lambda name: os.path.join(args.work, name)  # noqa: E731
    torch.onnx.export(model, (idx,), p("buffered.onnx"), input_names=["idx"], output_names=["logits"],
                      opset_version=14, do_constant_folding=False)
    np.save(p("idx.npy"), idx.numpy())
    np.save(p("targets.npy"), targets.numpy())
    idx.numpy().tofile(p("idx.bin"))
    return model, idx, targets, p


def check_frozen(args):
    model, idx, targets, p = setup(args)
    start = {k: v.clone() for k, v in model.state_dict().items()}
    opt = torch.optim.AdamW(model.parameters(), lr=LR)
    want = []
    for _ in range(STEPS):
        opt.zero_grad()
        loss = F.cross_entropy(model(idx).reshape(-1, VOCAB), targets.reshape(-1))
        loss.backward()
        opt.step()
        want.append(loss.item())
    params = [n for n, _ in model.named_parameters()]
    ok = True
    options = [', frozen=["pos_table"]', ", trainable=[" + ", ".join(f'"{n}"' for n in params) + "]"]
    for k, option in enumerate(options):
        with open(p(f"tuned{k}.mdl"), "w") as f:
            f.write(mdl(option))
        out = p(f"tuned{k}.safetensors")
        r = mlc(args, "train", p(f"tuned{k}.mdl"), "--target", "cpu", "--steps", str(STEPS), "--input",
                f"idx={p('idx.npy')}", "--input", f"targets={p('targets.npy')}", "--export", out)
        if r.returncode != 0:
            print(f"FAIL mlc train exited {r.returncode}:\n{r.stdout}{r.stderr}")
            ok = False
            continue
        got = [float(v) for v in re.findall(r"^step \d+: loss (\S+)", r.stdout, re.M)]
        if len(got) != STEPS:
            print(f"FAIL mlc train printed {len(got)} losses, not {STEPS}:\n{r.stdout}")
            ok = False
            continue
        err = max(abs(a - b) / abs(b) for a, b in zip(got, want))
        lok = err <= LOSS_TOL
        print(f"{'PASS' if lok else 'FAIL'} losses ({option[2:20]}...): max |mlc - torch| / |torch| = {err:.3g} "
              f"(tolerance {LOSS_TOL}; torch {want[0]:.6f} -> {want[-1]:.6f}, mlc {got[0]:.6f} -> {got[-1]:.6f})")
        w = read_safetensors(out)
        same = np.array_equal(w["net.pos_table"], start["pos_table"].numpy())
        print(f"{'PASS' if same else 'FAIL'} pos_table (a buffer) after {STEPS} steps: "
              f"{'unchanged' if same else 'changed by %.3g' % float(np.abs(w['net.pos_table'] - start['pos_table'].numpy()).max())}")
        worst, worst_name = 0.0, ""
        for n in params:
            ref, w0 = model.state_dict()[n].numpy(), start[n].numpy()
            e = float(np.linalg.norm(w["net." + n] - ref) / max(np.linalg.norm(ref - w0), 1e-30))
            if e > worst:
                worst, worst_name = e, n
        wok = worst <= WEIGHT_TOL
        print(f"{'PASS' if wok else 'FAIL'} parameters after {STEPS} steps: max |mlc - torch| / |torch's update| = "
              f"{worst:.3g} ({worst_name}; tolerance {WEIGHT_TOL})")
        ok = ok and lok and same and wok
    return ok


def check_weights(args):
    model, idx, _, p = setup(args)
    with torch.no_grad():  # values the ONNX file does not hold
        for t in model.state_dict().values():
            if t.is_floating_point():
                t.add_(torch.randn_like(t) * 0.5)
        logits = model(idx).numpy()
    sd = model.state_dict()
    print(f"state_dict: {', '.join(sorted(sd))} (the ONNX file also holds 'perm', an int64 buffer torch does not save)")
    write_safetensors(p("state_dict.safetensors"), sd)
    write_safetensors(p("state_dict_net.safetensors"), {"net." + k: v for k, v in sd.items()})
    with open(p("tuned.mdl"), "w") as f:
        f.write(mdl(""))
    ok = True
    for model_file, weights in [("buffered.onnx", "state_dict.safetensors"), ("tuned.mdl", "state_dict_net.safetensors")]:
        out_name = "logits" if model_file.endswith(".onnx") else "output"
        r = mlc(args, "run", p(model_file), "--target", "cpu", "--weights", p(weights), "--input", f"idx={p('idx.bin')}",
                "--output", f"{out_name}={p('logits.bin')}")
        if r.returncode != 0:
            print(f"FAIL {model_file} --weights {weights}: mlc run exited {r.returncode}:\n{r.stdout}{r.stderr}")
            ok = False
            continue
        got = np.fromfile(p("logits.bin"), dtype=np.float32).reshape(logits.shape)
        err = float(np.abs(got - logits).max() / np.abs(logits).max())
        fok = err <= FORWARD_TOL
        print(f"{'PASS' if fok else 'FAIL'} {model_file} --weights {weights}: max |mlc - torch| / max |torch| = "
              f"{err:.3g} (tolerance {FORWARD_TOL})")
        ok = ok and fok
    # A trainable tensor missing is still an error, naming it.
    for model_file, prefix in [("buffered.onnx", ""), ("tuned.mdl", "net.")]:
        partial = {prefix + k: v for k, v in sd.items() if k != "head.bias"}
        write_safetensors(p("partial.safetensors"), partial)
        r = mlc(args, "run", p(model_file), "--target", "cpu", "--weights", p("partial.safetensors"), "--input",
                f"idx={p('idx.bin')}")
        want = f"{p('partial.safetensors')}: missing tensor '{prefix}head.bias' (f32), which the model needs"
        eok = r.returncode != 0 and want in r.stderr
        print(f"{'PASS' if eok else 'FAIL'} {model_file} without head.bias: exit {r.returncode}, "
              f"{r.stderr.strip() or r.stdout.strip()}")
        ok = ok and eok
    return ok


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--mlc", required=True)
    ap.add_argument("--check", required=True, choices=["frozen", "weights"])
    ap.add_argument("--work", default="/tmp/mlc_onnx_buffers")
    args = ap.parse_args()
    args.work = os.path.join(os.path.abspath(args.work), args.check)
    os.makedirs(args.work, exist_ok=True)
    ok = check_frozen(args) if args.check == "frozen" else check_weights(args)
    print("PASS" if ok else "FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
