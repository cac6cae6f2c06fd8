"""precision(reduce=bf16) and reduce=f16 under shard = fsdp(net), against PyTorch.

The MLP of fsdp_clip.py (inputs 16, hidden 100, 10 classes; units net.0,
net.2, net.4), f32 parameters and compute, from seeded PyTorch weights,
10 AdamW steps (lr 1e-2) on batches of 16 of 160 random rows, with the
gradients reduced in 16 bits, as FSDP2's MixedPrecisionPolicy(reduce_dtype=...):

- 2 ranks under mpirun, each its 8 rows of the step's 16, against PyTorch
  emulating the MPI path's reduction: each rank's gradient (the mean over
  its rows) rounded to the 16-bit dtype, the ranks' values added in f32 and
  halved, the mean rounded once to the 16-bit dtype (to nearest even), then
  AdamW on it in f32;
- --fsdp in one process: the gradient of the whole batch rounded to the
  16-bit dtype;
- each against its emulation: losses within 1e-5 (relative) and the final
  weights within 5e-5 (the largest over the tensors of mean |mlc - torch| /
  mean |torch|).  Not bit for bit, and not by the largest element: mlc's f32
  gradients differ from torch's in their last bits, so an element close to
  a 16-bit rounding boundary now and then rounds the other way, and where
  the ranks' gradients nearly cancel that moves AdamW's step for the element
  by as much as the 16-bit reduction itself does (both are printed: the
  largest-element distances, for the record);
- and closer to it than to plain f32 AdamW (the same steps with f32
  gradients) by at least 4x, in the same measure: the 16-bit reduction
  happened (measured 2026-12-07: 28x to 90x).

And with bf16 compute (precision(param=bf16)) in one process, whose
gradients are bf16 already: reduce=bf16 must give reduce=f32's losses and
final weights bit for bit (nothing is rounded twice).

With TARGET cuda-nccl (a GPU machine), one run instead: --target cuda-nccl
in one process (NCCL with one rank: the 16-bit packing, NCCL's reduce-scatter
of bf16 or f16, the sharded cast back to f32 on the GPU), f32 products in
IEEE f32 (--f32-matmul ieee), checked as the CPU's --fsdp run.

Skipped (77) without mpirun (cpu) or torch.  Usage: fsdp_reduce.py MLC WORKDIR [TARGET]"""
import os
import re
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "ref"))

try:
    import torch
    from fsdp_clip import command_line, mlc, mlp_data, rel
    from models import MLP, Checks, mlp_mdl, read_safetensors
except ImportError as e:
    print(f"SKIP: {e} (Debian python3-torch)")
    sys.exit(77)

B, STEPS, LR = 16, 10, 1e-2
LOSS_TOL, WEIGHT_TOL, APART = 1e-5, 5e-5, 4.0
LOSS = re.compile(r"^step \d+: loss (\S+)", re.M)


def mean_rel(got, want):
    """The largest over the tensors of mean |got - want| / mean |want|."""
    return max(float((got[k].double() - want[k].double()).abs().mean() / want[k].double().abs().mean()) for k in want)


def reference(sd, x, y, ranks, dt):
    """torch: the losses and final weights when each rank's gradient (over its
    B / ranks rows) is rounded to dt, the ranks' values averaged in f32 and
    the mean rounded to dt (dt None: f32 throughout)."""
    model = MLP(16, 100, 10)
    model.load_state_dict(sd)
    opt = torch.optim.AdamW(model.parameters(), lr=LR)
    params = list(model.parameters())
    r16 = (lambda t: t.to(dt).float()) if dt else (lambda t: t)
    losses = []
    for k in range(STEPS):
        per, total = B // ranks, 0.0
        acc = [torch.zeros_like(p) for p in params]
        for r in range(ranks):
            rows = slice(k * B + r * per, k * B + (r + 1) * per)
            loss = torch.nn.functional.cross_entropy(model(x[rows]), y[rows].long())
            g = torch.autograd.grad(loss, params)
            for a, gi in zip(acc, g):
                a += r16(gi)
            total += loss.item()
        for p, a in zip(params, acc):
            p.grad = r16(a * (1.0 / ranks))
        opt.step()
        losses.append(total / ranks)
    return losses, {k: v.detach() for k, v in model.state_dict().items()}


def main():
    args = command_line()
    if args is None:
        return 77
    exe, work, target = args
    p, sd, x, y = mlp_data(work, 1, B * STEPS)
    check = Checks()
    for name, dt in (("bf16", torch.bfloat16), ("f16", torch.float16)):
        mdl = p(f"reduce_{name}.mdl")
        with open(mdl, "w") as f:
            f.write(mlp_mdl(B, 100, f"    optimizer = AdamW(lr={LR})\n    precision(param=f32, reduce={name})\n"
                                    "    shard = fsdp(net)\n"))
        common = [exe, "train", mdl, "--weights", p("w.safetensors"), "--input", f"x={p('x.npy')}",
                  "--input", f"labels={p('y.npy')}", "--steps", str(STEPS)]
        cpu = ["--threads", "1", "--target", "cpu"]
        runs = {  # name -> (arguments, ranks, world)
            "--fsdp, 1 rank": (cpu + ["--fsdp", f"batch={B}", "--export", p(f"{name}1.safetensors")], 0, 1),
            "2 ranks": (cpu + [f"batch={B // 2}", "--save", p(f"{name}2.ckpt")], 2, 2),
        }
        if target != "cpu":
            runs = {f"{target}, 1 rank": (["--target", target, "--f32-matmul", "ieee", f"batch={B}",
                                           "--export", p(f"{name}1.safetensors")], 0, 1)}
        for run, (extra, ranks, world) in runs.items():
            r = mlc(common + extra, ranks)
            losses = [float(v) for v in LOSS.findall(r.stdout)] if r.returncode == 0 else []
            if ranks and len(losses) == STEPS:  # one process gathers the 2 shards into PyTorch's names
                g = mlc(common[:-2] + cpu + ["--fsdp", f"batch={B // 2}", "--steps", "0", "--resume", p(f"{name}2.ckpt"),
                                       "--export", p(f"{name}2.safetensors")])
                losses = losses if g.returncode == 0 else []
            tag = f"reduce={name}, {run}"
            check(len(losses) == STEPS, f"{tag}: {len(losses)} steps of {STEPS} ran")
            if len(losses) != STEPS:
                continue
            weights = read_safetensors(p(f"{name}{world}.safetensors"))[0]
            want, wsd = reference(sd, x, y, world, dt)
            _, fsd = reference(sd, x, y, world, None)
            el = max(abs(a - b) / abs(b) for a, b in zip(losses, want))
            same = sorted(weights) == sorted(wsd)
            ew, ef = (mean_rel(weights, wsd), mean_rel(weights, fsd)) if same else (1.0, 0.0)
            print(f"  max-norm: {rel(weights, wsd) if same else 1:.2e} to the {name} reduction, "
                  f"{rel(weights, fsd) if same else 1:.2e} to f32")
            check(el <= LOSS_TOL, f"{tag}: losses within {LOSS_TOL} (relative) of torch's {name} reduction (max {el:.2e})")
            check(ew <= WEIGHT_TOL, f"{tag}: weights after {STEPS} steps within {WEIGHT_TOL} (mean relative) of torch's "
                  f"{name} reduction (max {ew:.2e})")
            check(ef >= APART * ew, f"{tag}: the weights are {APART:g}x closer to the {name} reduction than to f32 "
                  f"gradients ({ew:.2e} against {ef:.2e})")
    # bf16 compute (precision(param=bf16)): the gradients are bf16 already, so at one rank packing them
    # in bf16 loses nothing; reduce=bf16 must give reduce=f32's losses and weights bit for bit (the path
    # that packs a bf16 gradient from before its cast to f32)
    got = {}
    for red in ("f32", "bf16"):
        mdl = p(f"bf16c_{red}.mdl")
        with open(mdl, "w") as f:
            f.write(mlp_mdl(B, 100, f"    optimizer = AdamW(lr={LR})\n    precision(param=bf16, reduce={red})\n"
                                    "    shard = fsdp(net)\n"))
        run_target = ["--threads", "1", "--target", "cpu", "--fsdp"] if target == "cpu" else ["--target", target]
        r = mlc([exe, "train", mdl, "--weights", p("w.safetensors"), "--input", f"x={p('x.npy')}",
                 "--input", f"labels={p('y.npy')}", "--steps", str(STEPS), f"batch={B}", *run_target,
                 "--export", p(f"bf16c_{red}.safetensors")])
        losses = LOSS.findall(r.stdout) if r.returncode == 0 else []
        if len(losses) == STEPS:
            got[red] = (losses, read_safetensors(p(f"bf16c_{red}.safetensors"))[0])
    same = len(got) == 2 and got["f32"][0] == got["bf16"][0] and sorted(got["f32"][1]) == sorted(got["bf16"][1]) and \
        all(torch.equal(got["f32"][1][k], got["bf16"][1][k]) for k in got["f32"][1])
    check(same, f"bf16 compute, one rank: reduce=bf16 gives reduce=f32's {STEPS} losses and final weights bit for bit")
    return check.finish()


if __name__ == "__main__":
    sys.exit(main())
