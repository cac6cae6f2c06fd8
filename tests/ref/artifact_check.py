"""The artifact as a user moves and links it (issue 25): compile
examples/mlp.mdl for the CPU, move the folder, check that none of its text
files names the mlc source tree or the folder of the mlc that wrote it, then
build one program four ways against the moved folder:
  - examples/app (C) with CMake, through mlp.cmake;
  - examples/app_cpp, a C++-only project (project(x CXX)), with CMake;
  - examples/app/app.c with pkg-config (mlp.pc);
  - examples/app/app.c with one cc line over DIR/*.a.
Each runs on weights and inputs from PyTorch and is compared with PyTorch:
the logits, the loss of a training step and the logits after it (relative
error 1e-5 each).

Usage: artifact_check.py MLC REPO_ROOT WORKDIR [OPTION ...] [LINK_FLAG ...]
(LINK_FLAG: what a sanitizer build's runtime needs on every link line).
Options, for a GPU machine (bench/h200_artifact.sh) rather than CI:
  --model=DIR     an artifact compiled elsewhere (bench/artifact_prep.sh), moved
                  here instead of compiling one (MLC is then not run: give -);
  --target=cuda   the tolerance of the CUDA target (1e-4: its f32 GEMMs are
                  3xTF32 on the tensor cores, and its reductions run in
                  another order than PyTorch's CPU kernels);
  --lib-dir=DIR   where libcjson.so.1 is, for a machine without Debian's
                  libcjson1 (build-gpu/lib): on LIBRARY_PATH and LD_LIBRARY_PATH;
  --hide          rename REPO_ROOT (and the folder of MLC) away while the
                  programs are built and run, so nothing can reach into them.
Where pkg-config or a C++ compiler is missing, that build is skipped (and
said so); without Ninja, CMake uses its default generator."""
import glob
import os
import shutil
import sys

import numpy as np
import torch
import torch.nn.functional as F

from models import mlp_reference, rel_err, run

TOLERANCE = {"cpu": 1e-5, "cuda": 1e-4}



class Hidden:
    """While inside it, each of `paths` renamed to PATH.hidden (and back after)."""

    def __init__(self, paths):
        self.paths, self.done = [p for p in dict.fromkeys(paths) if p and os.path.isdir(p)], []

    def __enter__(self):
        for p in self.paths:
            try:
                os.rename(p, p + ".hidden")
                self.done.append(p)
                print(f"hidden: {p}")
            except OSError as e:  # a mount point cannot be renamed; the text check above still holds
                print(f"could not hide {p} ({e.strerror}); its name is checked absent from the artifact's files")
        return self

    def __exit__(self, *exc):
        for p in reversed(self.done):
            os.rename(p + ".hidden", p)


def main():
    args = sys.argv[4:]
    opts = {a.split("=")[0]: a.partition("=")[2] for a in args if a.split("=")[0] in ("--model", "--target", "--lib-dir", "--hide")}
    flags = [a for a in args if a.split("=")[0] not in opts]
    target = opts.get("--target") or "cpu"
    tol = TOLERANCE[target]
    mlc = os.path.realpath(sys.argv[1]) if sys.argv[1] != "-" else None
    root, work = os.path.realpath(sys.argv[2]), os.path.abspath(sys.argv[3])
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    env = dict(os.environ)
    if opts.get("--lib-dir"):
        lib = os.path.abspath(opts["--lib-dir"])
        for var in ("LIBRARY_PATH", "LD_LIBRARY_PATH"):
            env[var] = lib + (":" + env[var] if env.get(var) else "")
    first, model = os.path.join(work, "first", "mlp"), os.path.join(work, "moved", "mlp")
    if opts.get("--model"):
        first = os.path.realpath(opts["--model"])
        shutil.copytree(first, model)
    else:
        run([mlc, "compile", os.path.join(root, "examples", "mlp.mdl"), "--target", target, "-o", first])
        os.makedirs(os.path.dirname(model))
        shutil.move(first, model)
        shutil.rmtree(os.path.join(work, "first"))

    # Relative paths only: no file names the trees or the folder it was written to.
    trees = [root] + ([os.path.dirname(mlc)] if mlc else []) + [first]
    for name in sorted(os.listdir(model)):
        path = os.path.join(model, name)
        if name.endswith((".cmake", ".pc", ".h")):
            text = open(path).read()
            for t in trees:
                if t in text:
                    sys.exit(f"FAIL: {name} names {t}")
    pc = open(os.path.join(model, "mlp.pc")).read()
    libs = [ln for ln in pc.splitlines() if ln.startswith("Libs:")][0]
    if ".c " in libs + " " or "libcjson " in libs + " " or "xxhash" in pc:
        sys.exit(f"FAIL: mlp.pc links sources or development packages: {libs}")
    archives = sorted(glob.glob(os.path.join(model, "*.a")))
    if [os.path.basename(a) for a in archives] != ["libmlp.a"]:
        sys.exit(f"FAIL: expected libmlp.a alone, got {archives}")
    syms = run(["nm", "-g", "--defined-only", archives[0]])
    if " XXH" in syms or " cJSON" in syms:
        sys.exit("FAIL: libmlp.a defines xxHash or cJSON symbols")

    # The applications' sources, copied out of the tree before it is hidden.
    for src in ("app", "app_cpp"):
        shutil.copytree(os.path.join(root, "examples", src), os.path.join(work, "src", src))
    ref, weights, x, labels = mlp_reference(work)
    with Hidden([root, os.path.dirname(mlc) if mlc else None] if "--hide" in opts else []):
        apps = build_apps(work, model, archives, flags, env)
        failed = compare(apps, work, weights, ref, x, labels, tol, env)
    print(f"{len(apps) - failed} passed, {failed} failed")
    sys.exit(1 if failed else 0)


def build_apps(work, model, archives, flags, env):
    """{kind: executable}: the app built each way against the moved folder."""
    apps = {}
    gen = ["-G", "Ninja"] if shutil.which("ninja") else []
    for kind, src in (("cmake-c", "app"), ("cmake-cxx", "app_cpp")):
        if kind == "cmake-cxx" and not (shutil.which("c++") or shutil.which("g++") or os.environ.get("CXX")):
            print("skipped the C++ app: this machine has no C++ compiler")
            continue
        build = os.path.join(work, kind)
        run(["cmake", "-S", os.path.join(work, "src", src), "-B", build, *gen, f"-DMODEL_DIR={model}"], env=env)
        run(["cmake", "--build", build], env=env)
        apps[kind] = os.path.join(build, "app")
    app_c = os.path.join(work, "src", "app", "app.c")
    if shutil.which("pkg-config"):
        pcflags = run(["pkg-config", "--cflags", "--libs", "mlp"], env=dict(env, PKG_CONFIG_PATH=model)).split()
        apps["pkg-config"] = os.path.join(work, "app-pc")
        run(["cc", "-std=c11", "-Wall", "-Werror", app_c, "-o", apps["pkg-config"]] + pcflags + flags, env=env)
    else:
        print("skipped pkg-config: this machine has no pkg-config")
    apps["cc"] = os.path.join(work, "app-cc")
    run(["cc", "-std=c11", app_c, f"-I{model}"] + archives +
        ["-l:libcjson.so.1", "-lpthread", "-lm", "-ldl", "-o", apps["cc"]] + flags, env=env)
    return apps


def compare(apps, work, weights, ref, x, labels, tol, env):
    """Runs each app and compares it with PyTorch; the number that failed."""
    with torch.no_grad():
        want0 = ref(x)
    opt = torch.optim.SGD(ref.parameters(), lr=0.01, momentum=0.9)
    want_loss = F.cross_entropy(ref(x), labels.long())
    want_loss.backward()
    opt.step()
    with torch.no_grad():
        want1 = ref(x)

    failed = 0
    for kind, app in apps.items():
        logits = os.path.join(work, f"logits-{kind}.bin")
        out = run([app, weights, os.path.join(work, "x.bin"), os.path.join(work, "labels.bin"), logits], env=env)
        got = torch.from_numpy(np.fromfile(logits, dtype=np.float32).reshape(2, 32, 10))
        loss = float(out.split()[1])
        e0, e1 = rel_err(got[0], want0), rel_err(got[1], want1)
        e_loss = abs(loss - want_loss.item()) / abs(want_loss.item())
        bad = max(e0, e1, e_loss) > tol
        failed += bad
        print(f"{'FAIL' if bad else 'ok'} {kind}: logits relative error {e0:.3g}, loss {e_loss:.3g}, "
              f"after one SGD step {e1:.3g} (tolerance {tol})")
    return failed


if __name__ == "__main__":
    main()
