#!/usr/bin/python3
"""Every op of ir/ops.def, on every target: checked against PyTorch or refused.

    op_coverage.py OP_SUPPORT ROOT [--work DIR]

For each op and each of the targets cpu, cuda, metal and spirv, one of:

- the target's supports_op (driver/target.c, as `mlc compile` asks it;
  OP_SUPPORT prints its answers) says yes, and at least one case of the
  cross-target op check (tests/ops/opcheck.py) that runs on that
  target has the op in its graph;
- supports_op says no, with a message that names the op and the target
  (the one mlc compile prints at the op's file:line:col);
- the op is in EXEMPT below, with the reason.

A case's graph is what the frontend makes of its model (the graph mlc
compile asks supports_op about; OP_SUPPORT prints its ops), or its op for
the gradient cases (GradCase, built by hand).  The cases are read from
opcheck.py without running it: its imports (torch, numpy) are stood in
for, since only the case list is needed and importing torch takes
seconds.  Also a failure: a case that runs
on a target refusing one of its ops (the case could not compile there),
and an exemption no longer needed (the op is covered or refused
everywhere).  Lists every failing op/target pair; exit status 1 if any.
"""
import argparse
import importlib.util
import os
import re
import subprocess
import sys
import tempfile

TARGETS = ("cpu", "cuda", "metal", "spirv")

# Ops that only passes make, which the frontend's graph of a case never has.
# Keep this short: for an op here, this test sees no case, and the reason
# says what checks it instead, or that nothing does.
EXEMPT = {
    "fused": "the fuse pass's groups (GPU targets): opcheck's fused_* cases make them, but only after that pass",
    "adamw_multi": "the fuse pass's one-kernel AdamW (CUDA): the MiniLLM's CUDA train step (tests/gpu/cuda_check.sh)",
    "sgd_multi": "the fuse pass's one-kernel SGD (CUDA): the deep MLP's 20 steps and final weights against "
                 "torch.optim.SGD (bench/f32_models.py, on the GPU)",
    "attention_save": "the attnsave pass (CUDA, 16-bit training graphs): the MiniLLM's CUDA train step",
    "attention_grad_saved": "the attnsave pass, as attention_save",
    "adamw": "the optimizer pass: no opcheck case; ref.train.* check the step against torch.optim on the CPU",
    "sgd": "the optimizer pass, as adamw",
    "view": "the fsdp pass (views of a flat parameter): the dist.fsdp.* tests",
    "all_gather": "the fsdp pass's collective: the dist.fsdp.* tests",
    "reduce_scatter": "the fsdp pass's collective: the dist.fsdp.* tests",
    "all_reduce": "the fsdp pass's collective for clip_grad_norm: dist.fsdp.clip",
    "quant": "the fp8 pass (--matmul=fp8, cpu and cuda): ref.fp8 checks it byte for byte against "
             "tests/ref/fp8_ref.py at every code point and midpoint (with --target cuda on the GPU); metal and "
             "spirv refuse it",
    "quant_both": "the fp8 pass on CUDA (target quant_both): fp8.py --target cuda checks it byte for byte against "
                  "the reference's codes and their transpose, and the CUDA train step against numpy's recipe; "
                  "cpu, metal and spirv refuse it",
    "scaled_mm": "the fp8 pass, as quant: ref.fp8 checks it against numpy's float64 product of the decoded "
                 "operands, and a train step's gradients against numpy's fp8 recipe",
    "qlinear": "the quantize pass (--quantize, cpu and spirv): ref.quant (spirv.quant) checks it against numpy's "
               "dequantised product, ref.quant_ppl on a model trained on real text; cuda and metal refuse it",
}


def ops_def_names(root):
    """The op names of ir/ops.def, in order."""
    names = []
    for line in open(os.path.join(root, "ir", "ops.def")):
        m = re.match(r'\s*X\(\s*\w+\s*,\s*"(\w+)"', line)
        if m:
            names.append(m.group(1))
    return names


def run_op_support(op_support, models):
    """{target: {op: (yes, why)}}, and {model: set of ops}, from OP_SUPPORT's lines."""
    r = subprocess.run([op_support] + models, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if r.returncode != 0:
        raise RuntimeError("%s failed:\n%s" % (op_support, r.stderr))
    table, graphs = {}, {}
    for line in r.stdout.splitlines():
        f = line.split(" ")
        if f[0] == "support":
            why = line.split(" ", 4)[4] if f[3] == "no" else ""
            table.setdefault(f[1], {})[f[2]] = (f[3] == "yes", why)
        elif f[0] == "graph":
            graphs[f[1]] = set(f[2:])
    return table, graphs


class _Anything:
    """Stands in for torch, numpy and what is reached through them: any
    attribute, call or arithmetic gives another one.  opcheck.py only
    touches them at import in constants and class definitions."""

    def __init__(self, *a, **k):
        pass

    def __getattr__(self, name):
        return _Anything()

    def __call__(self, *a, **k):
        return _Anything()

    def __float__(self):
        return 1.0

    def __mro_entries__(self, bases):  # class RMSNorm(nn.Module)
        return (object,)


def opcheck_cases(path):
    """opcheck.py's CASES, imported with torch and numpy stood in for."""
    stand_in = _Anything()
    saved = {}
    for name in ("numpy", "torch", "torch.nn", "torch.nn.functional"):
        saved[name] = sys.modules.get(name)
        sys.modules[name] = stand_in
    try:
        spec = importlib.util.spec_from_file_location("opcheck_cases", path)
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
    finally:
        for name, m in saved.items():
            if m is None:
                del sys.modules[name]
            else:
                sys.modules[name] = m
    return mod.CASES


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("op_support")
    ap.add_argument("root")
    ap.add_argument("--work", help="where the cases' models go (default: a temporary directory)")
    ap.add_argument("--opcheck", help="the case list (default ROOT/tests/ops/opcheck.py)")
    args = ap.parse_args()

    ops = ops_def_names(args.root)
    cases = opcheck_cases(args.opcheck or os.path.join(args.root, "tests", "ops", "opcheck.py"))
    with tempfile.TemporaryDirectory() as tmp:
        work = args.work or tmp
        models = {}  # a case's model, or None for a hand-built op
        for c in cases:
            if not getattr(c, "op", None):
                d = os.path.join(work, c.name)
                os.makedirs(d, exist_ok=True)
                models[c.name] = c.model(d)
        table, by_model = run_op_support(args.op_support, list(models.values()))
    graphs = [{c.op} if getattr(c, "op", None) else by_model[models[c.name]] for c in cases]

    problems = []
    unknown = set(EXEMPT) - set(ops)
    problems += ["EXEMPT names %s, which ir/ops.def does not have" % op for op in sorted(unknown)]
    covered = {t: {} for t in TARGETS}  # target -> op -> a case that has it
    for c, g in zip(cases, graphs):
        for op in g:
            if op not in ops:
                problems.append("case %s: op '%s' is not in ir/ops.def" % (c.name, op))
            for t in c.targets:
                covered.setdefault(t, {}).setdefault(op, c.name)
    targets = [t for t in TARGETS if t in table]
    for t in TARGETS:
        if t not in table:
            print("note: target %s is not built into this mlc; not checked" % t)
    exempt_used = set()
    for op in ops:
        for t in targets:
            yes, why = table[t][op]
            case = covered[t].get(op)
            if not yes:
                if case:
                    problems.append("%s on %s: case %s runs there, but supports_op refuses it (%s)" % (op, t, case, why))
                elif op not in why or t not in why.lower():
                    problems.append("%s on %s: refused, but the message does not name the op and the target: '%s'"
                                    % (op, t, why))
            elif not case:
                if op in EXEMPT:
                    exempt_used.add(op)
                else:
                    problems.append("%s on %s: supports_op says yes, but no case of opcheck.py runs it there" % (op, t))
    for op in sorted(set(EXEMPT) - unknown - exempt_used):
        problems.append("%s: exempt, but covered or refused on every target; take it off EXEMPT" % op)

    checked = len(ops) * len(targets)
    if problems:
        for p in problems:
            print("FAIL " + p)
        print("%d problem(s) in %d op/target pairs (%d cases)" % (len(problems), checked, len(cases)))
        return 1
    n_ref = sum(not table[t][op][0] for op in ops for t in targets)
    n_ex = sum(table[t][op][0] and op not in covered[t] for op in ops for t in targets)
    print("PASS %d ops x %d targets: %d covered by opcheck.py's %d cases, %d refused by supports_op, %d exempt"
          % (len(ops), len(targets), checked - n_ref - n_ex, len(cases), n_ref, n_ex))
    return 0


if __name__ == "__main__":
    sys.exit(main())
