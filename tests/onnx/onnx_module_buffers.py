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
--check fsdp: frozen=["pos_table"] under `shard = fsdp(net)` (passes/fsdp.c):
  5 AdamW steps on 2 * batch rows, unsharded in one process (batch 4), with
  --fsdp in one process, and across 2 ranks under mpirun (batch 2 each;
  saved as a sharded checkpoint, exported by one rank).  Every run's losses
  within 1e-5 (relative) of torch's and of the unsharded run's; pos_table
  and the integer constant bit for bit their starting values in every
  export; the trained parameters within 1e-4 of the unsharded run's and of
  torch's (|a - b| / |the update|, 2-norms).  And `mlc compile --stats` of a
  graph with a large frozen table: the optimizer state under --fsdp is the
  unsharded one's, that of the trainable weight alone.

Exits 77 (a skip) where torch or onnx is missing, and --check fsdp where
mpirun is.

Usage: onnx_module_buffers.py --mlc MLC --check frozen|weights|fsdp [--work DIR]"""
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
    from onnx import TensorProto, helper, numpy_helper
    from safetensors_file import read_safetensors  # this folder's, next to this file
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


def mdl(option, shard=""):
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
    optimizer = AdamW(lr={LR}){shard}
}}
"""


def mlc(args, *cmd, ranks=0):
    """Runs mlc, under `mpirun -np ranks` if ranks."""
    cmd, env = [args.mlc, *cmd], None
    if ranks:
        cmd = ["mpirun", "--allow-run-as-root", "--oversubscribe", "--bind-to", "none", "-np", str(ranks), *cmd]
        # No leak check under mpirun (the ASan build): Open MPI's own
        # allocations cannot be told from mlc's (tests/dist/fsdp_mpi.sh).
        asan = os.environ.get("ASAN_OPTIONS")
        env = dict(os.environ, ASAN_OPTIONS=(asan + ":" if asan else "") + "detect_leaks=0")
    print(" ".join(cmd))
    return subprocess.run(cmd, capture_output=True, text=True, env=env)


def setup(args, rows=BATCH):
    """The model, `rows` rows of data, and the export (its batch axis free where rows differs from BATCH)."""
    torch.manual_seed(0)
    model = Buffered()
    model.eval()
    idx = torch.randint(0, VOCAB, (rows, SEQ), dtype=torch.int64)
    targets = torch.randint(0, VOCAB, (rows, SEQ), dtype=torch.int64)
    p = lambda name: os.path.join(args.work, name)  # noqa: E731
    dynamic = {"idx": {0: "batch"}, "logits": {0: "batch"}} if rows != BATCH else None
    torch.onnx.export(model, (idx,), p("buffered.onnx"), input_names=["idx"], output_names=["logits"],
                      opset_version=14, do_constant_folding=False, dynamic_axes=dynamic)
    np.save(p("idx.npy"), idx.numpy())
    np.save(p("targets.npy"), targets.numpy())
    idx.numpy().tofile(p("idx.bin"))
    return model, idx, targets, p


def torch_train(model, idx, targets):
    """STEPS AdamW steps of torch on the whole batch: the losses (the model is trained in place)."""
    opt = torch.optim.AdamW(model.parameters(), lr=LR)
    want = []
    for _ in range(STEPS):
        opt.zero_grad()
        loss = F.cross_entropy(model(idx).reshape(-1, VOCAB), targets.reshape(-1))
        loss.backward()
        opt.step()
        want.append(loss.item())
    return want


def check_frozen(args):
    model, idx, targets, p = setup(args)
    start = {k: v.clone() for k, v in model.state_dict().items()}
    want = torch_train(model, idx, targets)
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


def check_fsdp(args):
    if not shutil.which("mpirun"):
        print("skipped: mpirun not installed (Debian openmpi-bin)")
        sys.exit(77)
    model, idx, targets, p = setup(args, rows=2 * BATCH)
    # The starting values: the graph's initializers, and its Constant nodes'
    # tensors (the permutation, in no state_dict, is one).
    graph = onnx.load(p("buffered.onnx")).graph
    start = {t.name: numpy_helper.to_array(t) for t in graph.initializer}
    start.update({n.output[0]: numpy_helper.to_array(a.t) for n in graph.node if n.op_type == "Constant"
                  for a in n.attribute if a.name == "value"})
    want = torch_train(model, idx, targets)
    trained = {n: t.detach().numpy() for n, t in model.named_parameters()}
    with open(p("sharded.mdl"), "w") as f:
        f.write(mdl(', frozen=["pos_table"]', "\n    shard = fsdp(net)"))
    data = ["--input", f"idx={p('idx.npy')}", "--input", f"targets={p('targets.npy')}"]
    common = ["train", p("sharded.mdl"), "--target", "cpu", "--steps", str(STEPS), "--threads", "1", *data]
    # The runs: name -> (extra arguments, ranks).  Each rank of the 2 takes
    # its BATCH rows of the 2 * BATCH a step, the one process all of them.
    runs = {
        "unsharded": ([f"batch={2 * BATCH}", "--export", p("unsharded.safetensors")], 0),
        "fsdp world 1": (["--fsdp", f"batch={2 * BATCH}", "--export", p("fsdp1.safetensors")], 0),
        "fsdp world 2": ([f"batch={BATCH}", "--save", p("fsdp2.ckpt")], 2),
    }
    ok, losses = True, {}
    for name, (extra, ranks) in runs.items():
        r = mlc(args, *common, *extra, ranks=ranks)
        got = [float(v) for v in re.findall(r"^step \d+: loss (\S+)", r.stdout, re.M)]
        if r.returncode == 0 and len(got) == STEPS and ranks:  # one process gathers the shards into PyTorch's names
            r = mlc(args, "train", p("sharded.mdl"), "--target", "cpu", "--fsdp", f"batch={BATCH}", "--steps", "0",
                    *data, "--resume", p("fsdp2.ckpt"), "--export", p("fsdp2.safetensors"))
        if r.returncode != 0 or len(got) != STEPS:
            print(f"FAIL {name}: mlc exited {r.returncode} with {len(got)} losses of {STEPS}:\n{r.stdout}{r.stderr}")
            ok = False
            continue
        losses[name] = got
    if "unsharded" not in losses:
        return False
    exports = {"unsharded": "unsharded", "fsdp world 1": "fsdp1", "fsdp world 2": "fsdp2"}
    weights = {name: read_safetensors(p(f"{exports[name]}.safetensors")) for name in losses}
    fixed = sorted(k for k in weights["unsharded"] if k[len("net."):] not in trained)
    if "net.pos_table" not in fixed or len(fixed) != 2:
        print(f"FAIL the tensors not trained are {fixed}: expected net.pos_table and the permutation")
        return False
    for name, got in losses.items():
        e_torch = max(abs(a - b) / abs(b) for a, b in zip(got, want))
        e_ref = max(abs(a - b) / abs(b) for a, b in zip(got, losses["unsharded"]))
        lok = max(e_torch, e_ref) <= LOSS_TOL
        print(f"{'PASS' if lok else 'FAIL'} {name} losses: max relative difference from torch {e_torch:.3g}, from the "
              f"unsharded run {e_ref:.3g} (tolerance {LOSS_TOL}; mlc {got[0]:.6f} -> {got[-1]:.6f})")
        w = weights[name]
        for k in fixed:  # pos_table, and the int64 permutation
            w0 = start[k[len("net."):]]
            same = k in w and w[k].dtype == w0.dtype and np.array_equal(w[k], w0)
            print(f"{'PASS' if same else 'FAIL'} {name}: {k} (not trained) bit for bit its starting value"
                  + ("" if same or k not in w else f" (changed by up to {np.abs(w[k] - w0).max():.3g})"))
            ok = ok and same
        worst, worst_name = 0.0, ""
        for n, ref in trained.items():
            for against, b in (("torch", ref), ("unsharded", weights["unsharded"]["net." + n])):
                e = float(np.linalg.norm(w["net." + n] - b) / max(np.linalg.norm(ref - start[n]), 1e-30))
                if e > worst:
                    worst, worst_name = e, f"{n} against {against}"
        wok = worst <= WEIGHT_TOL
        print(f"{'PASS' if wok else 'FAIL'} {name} parameters: max |mlc - ref| / |torch's update| = {worst:.3g} "
              f"({worst_name}; tolerance {WEIGHT_TOL})")
        ok = ok and lok and wok
    return check_fsdp_stats(args, p) and ok


def check_fsdp_stats(args, p):
    """--stats with and without --fsdp: optimizer state for the trainable weight alone, not the frozen table."""
    # x [batch, 256] @ w [256, 256] (trained: 16 rows of a flat, 0.26 MB)
    # @ table [256, 4096] (frozen: 4.2 MB).  Sizes in whole rows of 4096
    # elements, so that the flat has no padding and the two runs' state agree exactly.
    rng = np.random.default_rng(0)
    init = [numpy_helper.from_array(rng.normal(size=s).astype(np.float32), n)
            for n, s in (("w", (256, 256)), ("table", (256, 4096)))]
    nodes = [helper.make_node("MatMul", ["x", "w"], ["h"]), helper.make_node("MatMul", ["h", "table"], ["logits"])]
    g = helper.make_graph(nodes, "frozen_table", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [BATCH, 256])],
                          [helper.make_tensor_value_info("logits", TensorProto.FLOAT, [BATCH, 4096])], init)
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]), p("table.onnx"))
    with open(p("table.mdl"), "w") as f:
        f.write(f"""config {{ batch = {BATCH} }}
module Tabled {{
    net = onnx("table.onnx", frozen=["table"])
    forward(x: f32[batch, 256]) {{
        return net(x)
    }}
}}
train Tabled {{
    input x: f32[batch, 256]
    input y: i64[batch]
    loss = cross_entropy(model(x), y)
    optimizer = AdamW(lr={LR})
    shard = fsdp(net)
}}
""")
    state = {}
    for flag in ("", "--fsdp"):
        r = mlc(args, "compile", p("table.mdl"), "--stats", *([flag] if flag else []))
        m = re.search(r"^optimizer state: (\d+) tensors \(([0-9.]+) MB\)", r.stdout, re.M)
        if r.returncode != 0 or not m:
            print(f"FAIL mlc compile --stats {flag} exited {r.returncode}, no optimizer state line:\n{r.stdout}{r.stderr}")
            return False
        state[flag or "unsharded"] = float(m.group(2))
    ok = state["--fsdp"] == state["unsharded"] == 0.5  # exp_avg and exp_avg_sq of w: 2 * 256 * 256 * 4 bytes
    print(f"{'PASS' if ok else 'FAIL'} --stats optimizer state with a frozen 4.2 MB table: {state['unsharded']} MB "
          f"unsharded, {state['--fsdp']} MB with --fsdp (expected 0.5 MB, w's alone)")
    return ok


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--mlc", required=True)
    ap.add_argument("--check", required=True, choices=["frozen", "weights", "fsdp"])
    ap.add_argument("--work", default="/tmp/mlc_onnx_buffers")
    args = ap.parse_args()
    args.work = os.path.join(os.path.abspath(args.work), args.check)
    os.makedirs(args.work, exist_ok=True)
    ok = {"frozen": check_frozen, "weights": check_weights, "fsdp": check_fsdp}[args.check](args)
    print("PASS" if ok else "FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
