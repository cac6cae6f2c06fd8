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

Usage: artifact_check.py MLC REPO_ROOT WORKDIR [LINK_FLAG ...]
(LINK_FLAG: what a sanitizer build's runtime needs on every link line)."""
import glob
import os
import shutil
import sys

import numpy as np
import torch
import torch.nn.functional as F

from models import mlp_reference, rel_err, run

TOL = 1e-5



def main():
    mlc, root, work = os.path.realpath(sys.argv[1]), os.path.realpath(sys.argv[2]), os.path.abspath(sys.argv[3])
    flags = sys.argv[4:]
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    first, model = os.path.join(work, "first", "mlp"), os.path.join(work, "moved", "mlp")
    run([mlc, "compile", os.path.join(root, "examples", "mlp.mdl"), "--target", "cpu", "-o", first])
    os.makedirs(os.path.dirname(model))
    shutil.move(first, model)
    shutil.rmtree(os.path.join(work, "first"))

    # Relative paths only: no file names the trees or the folder it was written to.
    trees = [root, os.path.dirname(mlc), first]
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

    apps = {}
    for kind, src in (("cmake-c", "app"), ("cmake-cxx", "app_cpp")):
        build = os.path.join(work, kind)
        run(["cmake", "-S", os.path.join(root, "examples", src), "-B", build, "-G", "Ninja", f"-DMODEL_DIR={model}"])
        run(["cmake", "--build", build])
        apps[kind] = os.path.join(build, "app")
    app_c = os.path.join(root, "examples", "app", "app.c")
    env = dict(os.environ, PKG_CONFIG_PATH=model)
    pcflags = run(["pkg-config", "--cflags", "--libs", "mlp"], env=env).split()
    apps["pkg-config"] = os.path.join(work, "app-pc")
    run(["cc", "-std=c11", "-Wall", "-Werror", app_c, "-o", apps["pkg-config"]] + pcflags + flags)
    apps["cc"] = os.path.join(work, "app-cc")
    run(["cc", "-std=c11", app_c, f"-I{model}"] + archives +
        ["-l:libcjson.so.1", "-lpthread", "-lm", "-ldl", "-o", apps["cc"]] + flags)

    ref, weights, x, labels = mlp_reference(work)
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
        out = run([app, weights, os.path.join(work, "x.bin"), os.path.join(work, "labels.bin"), logits])
        got = torch.from_numpy(np.fromfile(logits, dtype=np.float32).reshape(2, 32, 10))
        loss = float(out.split()[1])
        e0, e1 = rel_err(got[0], want0), rel_err(got[1], want1)
        e_loss = abs(loss - want_loss.item()) / abs(want_loss.item())
        bad = max(e0, e1, e_loss) > TOL
        failed += bad
        print(f"{'FAIL' if bad else 'ok'} {kind}: logits relative error {e0:.3g}, loss {e_loss:.3g}, "
              f"after one SGD step {e1:.3g} (tolerance {TOL})")
    print(f"{len(apps) - failed} passed, {failed} failed")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
