"""CPU targets (issue 25): mlc compile --cpu / --triple, and function
multiversioning.

examples/mlp.mdl at batch 2 is compiled several ways and linked into
tests/packaging/cpu_model.c with one cc line each; the app prints the CPU
whose build of the kernels ran (mlpb_cpu):
  - the default for an artifact: kernels for x86-64-v2, x86-64-v3 and
    x86-64-v4 (the objects hold no AVX, AVX2 with FMA, and AVX-512 on zmm);
    create picks the best this host has, which libgcc's
    __builtin_cpu_supports predicts (its own cpuid and xgetbv code; /proc/cpuinfo
    is not enough: some kernels leave "abm", LZCNT, out of its flags);
    MLC_CPU_MAX=x86-64-v2 runs the baseline build, MLC_CPU_MAX=x86-64-v4 on a
    host without AVX-512 still runs v3 (a cap, never a force), and a name
    the artifact has no build for is refused with its list;
  - --cpu baseline and --cpu native: one build each; all of these outputs
    agree within 1e-6 relative (FMA and wider vectors change the rounding, so
    not bit for bit);
  - --cpu sapphirerapids, on a host without one of its features (most
    AMD and pre-2023 Intel CPUs lack AVX-512 FP16): create fails with
    MLC_UNIMPLEMENTED naming a feature /proc/cpuinfo does not list, and
    `mlc run --cpu sapphirerapids` refuses the same way, not with SIGILL.
    On a host with all of them that part is skipped, and says so.
Then the compile errors: an unknown --triple and an unknown --cpu.

Usage: cpu_targets.py MLC REPO_ROOT WORKDIR [LINK_FLAG ...]"""
import os
import re
import shutil
import subprocess
import sys

import numpy as np

from models import run

TOL = 1e-6
# LLVM's feature names where /proc/cpuinfo spells them otherwise.
CPUINFO = {"avx512fp16": "avx512_fp16", "avx512bf16": "avx512_bf16", "avx512vnni": "avx512_vnni",
           "avx512vbmi2": "avx512_vbmi2", "avx512bitalg": "avx512_bitalg", "avx512vpopcntdq": "avx512_vpopcntdq",
           "avx512vp2intersect": "avx512_vp2intersect", "amx-tile": "amx_tile", "amx-int8": "amx_int8",
           "amx-bf16": "amx_bf16", "avxvnni": "avx_vnni", "sse4.1": "sse4_1", "sse4.2": "sse4_2", "sse3": "pni",
           "pclmul": "pclmulqdq", "sahf": "lahf_lm", "lzcnt": "abm", "crc32": "sse4_2", "prfchw": "3dnowprefetch"}

passed = failed = 0


def check(ok, what, detail=""):
    global passed, failed
    print(f"{'ok' if ok else 'FAIL'} {what}{': ' + detail if detail else ''}")
    passed, failed = passed + ok, failed + (not ok)


def host_flags():
    for line in open("/proc/cpuinfo"):
        if line.startswith("flags"):
            return set(line.split(":", 1)[1].split())
    return set()


def host_level(work):
    """The best x86-64 level this CPU and OS run, as libgcc sees it: an
    independent reading of cpuid and xgetbv (GCC 12 knows the level names)."""
    src, exe = os.path.join(work, "level.c"), os.path.join(work, "level")
    with open(src, "w") as f:
        f.write('#include <stdio.h>\nint main(void) {\n  __builtin_cpu_init();\n'
                '  puts(__builtin_cpu_supports("x86-64-v4") ? "x86-64-v4" : __builtin_cpu_supports("x86-64-v3") ? '
                '"x86-64-v3" : "x86-64-v2");\n  return 0;\n}\n')
    run(["cc", src, "-o", exe])
    return run([exe]).strip()


def main():
    mlc, root, work = os.path.realpath(sys.argv[1]), os.path.realpath(sys.argv[2]), os.path.abspath(sys.argv[3])
    flags = sys.argv[4:]
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    mdl = os.path.join(root, "examples", "mlp.mdl")
    src = os.path.join(root, "tests", "packaging", "cpu_model.c")

    def build(kind, cpu_args):
        out = os.path.join(work, kind)
        r = subprocess.run([mlc, "compile", mdl, "--target", "cpu", "--name", "mlpb", "batch=2", "-o", out] + cpu_args,
                           capture_output=True, text=True)
        if r.returncode:
            sys.exit(f"FAIL: mlc compile {' '.join(cpu_args)}: {r.stderr}")
        log = r.stderr
        app = os.path.join(work, f"app-{kind}")
        run(["cc", "-std=c11", "-Wall", "-Werror", src, f"-I{out}", os.path.join(out, "libmlpb.a"),
             "-l:libcjson.so.1", "-lpthread", "-lm", "-ldl", "-o", app] + flags)
        return app, log

    best = host_level(work)
    have = host_flags()  # for naming the features --cpu sapphirerapids lacks, below

    def run_app(app, kind, env=None):
        """The CPU the app's model ran on, and its output (None when create refused)."""
        path = os.path.join(work, f"y-{kind}.bin")
        r = subprocess.run([app, path], capture_output=True, text=True, env=dict(os.environ, **(env or {})))
        m = re.match(r"cpu: (\S+)\n", r.stdout)
        if r.returncode or not m:
            return r.stdout.strip(), None
        return m.group(1), np.fromfile(path, dtype=np.float32).astype(np.float64)

    outs = {}
    app, log = build("default", [])
    built = re.findall(r"distinct\) for (\S+) in", log)
    check(built == ["x86-64-v2"] * 2 + ["x86-64-v3"] * 2 + ["x86-64-v4"] * 2,
          "an artifact carries builds for x86-64-v2, v3 and v4 unless --cpu says otherwise", " ".join(built))
    asm = {}
    for tag in ("", "v3.", "v4."):
        obj = os.path.join(work, "default", f"mlpb.{tag}forward.o")
        text = run(["objdump", "-d", "--no-show-raw-insn", obj])
        asm[tag or "v2."] = (len(re.findall(r"%ymm", text)), len(re.findall(r"%zmm", text)), "vfmadd" in text)
    check(asm["v2."] == (0, 0, False) and asm["v3."][0] > 0 and asm["v3."][1:] == (0, True) and asm["v4."][1] > 0,
          "the builds' objects: no AVX in v2, AVX2 and FMA in v3, zmm in v4", str(asm))
    cpu, outs["default"] = run_app(app, "default")
    check(cpu == best, "create picks the best build this CPU has", f"{cpu}, libgcc says {best}")
    cpu, outs["capped-v2"] = run_app(app, "capped-v2", {"MLC_CPU_MAX": "x86-64-v2"})
    check(cpu == "x86-64-v2", "MLC_CPU_MAX=x86-64-v2 runs the baseline build", cpu)
    cpu, _ = run_app(app, "capped-v4", {"MLC_CPU_MAX": "x86-64-v4"})
    check(cpu == best, "MLC_CPU_MAX=x86-64-v4 caps, never forces", f"{cpu}, libgcc says {best}")
    cpu, _ = run_app(app, "capped-bad", {"MLC_CPU_MAX": "pentium9"})
    want = ("create: INVALID_ARGUMENT: MLC_CPU_MAX=pentium9: the model 'mlpb' carries no build for that CPU "
            "(it has x86-64-v2, x86-64-v3, x86-64-v4)")
    check(cpu == want, "MLC_CPU_MAX naming no build is refused", cpu)

    for kind, args in (("baseline", ["--cpu", "baseline"]), ("native", ["--cpu", "native"])):
        app, log = build(kind, args)
        built = re.findall(r"distinct\) for (\S+) in", log)
        print(f"  {kind}: compiled for {' '.join(built)}")
        check(len(set(built)) == 1, f"--cpu {args[1]} is one build", " ".join(built))
        cpu, outs[kind] = run_app(app, kind)
        check(outs[kind] is not None and cpu == built[0], f"--cpu {args[1]} runs its build", cpu)
        if kind == "baseline":
            check(cpu == "x86-64-v2", "--cpu baseline is x86-64-v2", cpu)
            cpu, _ = run_app(app, "baseline-capped", {"MLC_CPU_MAX": "x86-64-v3"})
            check(cpu.endswith("carries no build for that CPU (it has x86-64-v2)"),
                  "a one-build artifact has nothing to cap to", cpu)
    n = outs["native"]
    for kind in ("default", "capped-v2", "baseline"):
        if outs[kind] is None:
            check(False, f"{kind} ran")
            continue
        err = float(np.abs(outs[kind] - n).max() / np.abs(n).max())
        check(err <= TOL, f"the {kind} artifact's outputs match the native one's",
              f"relative error {err:.3g} (tolerance {TOL})")
    check(np.array_equal(outs["capped-v2"], outs["baseline"]),
          "the default artifact's baseline build gives --cpu baseline's outputs bit for bit")

    if "avx512_fp16" in have and "amx_tile" in have:
        print("skipped: this CPU has every feature of sapphirerapids, so no artifact for it can fail here")
    else:
        app, _ = build("sapphirerapids", ["--cpu", "sapphirerapids"])
        r = subprocess.run([app, os.path.join(work, "y-spr.bin")], capture_output=True, text=True)
        m = re.search(r"^create: UNIMPLEMENTED: the model 'mlpb' was compiled for the CPU sapphirerapids, and this CPU "
                      r"lacks its feature (\S+?)( \(and \d+ more of its features\))?: compile it again with --cpu "
                      r"native \(this machine\) or --cpu baseline \(any x86-64 since about 2009\)$", r.stdout)
        feature = m.group(1) if m else None
        check(r.returncode == 3 and m is not None and CPUINFO.get(feature, feature) not in have,
              "create refuses an artifact for a CPU feature this one lacks", (r.stdout + r.stderr).strip())
        np.zeros((2, 784), dtype=np.float32).tofile(os.path.join(work, "x.bin"))
        r = subprocess.run([mlc, "run", mdl, "--target", "cpu", "--no-train", "--cpu", "sapphirerapids", "batch=2",
                            "--input", f"x={os.path.join(work, 'x.bin')}"], capture_output=True, text=True)
        check(r.returncode == 4 and f"mlc: the model was compiled for the CPU sapphirerapids, and this CPU lacks its "
              f"feature {feature}" in r.stderr, "mlc run --cpu refuses the same way (exit status 4: not available here)",
              r.stderr.strip().splitlines()[-1])

    for args, want in ((["--triple", "foo-bar-baz"], "mlc: --triple foo-bar-baz: this mlc's LLVM has no target for it"),
                       (["--cpu", "pentium9"], "mlc: --cpu pentium9: not an x86-64 CPU that LLVM knows")):
        r = subprocess.run([mlc, "compile", mdl, "--target", "cpu", "-o", os.path.join(work, "bad")] + args,
                           capture_output=True, text=True)
        line = r.stderr.strip().splitlines()[-1]
        check(r.returncode == 1 and line.startswith(want), f"{args[0]} {args[1]} is a compile error", line)

    print(f"{passed} passed, {failed} failed")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
