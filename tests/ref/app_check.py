"""The artifact as a user links it: compile examples/mlp.mdl for the CPU,
build examples/app against the generated CMake fragment, run it on weights
and inputs from PyTorch, and compare with PyTorch: the logits, the loss of a
training step, and the logits after that step's SGD update (relative error
1e-5 for each).

Usage: app_check.py MLC REPO_ROOT WORKDIR"""
import os
import shutil
import sys

import numpy as np
import torch
import torch.nn.functional as F

from models import mlp_reference, rel_err, run

TOL = 1e-5



def main():
    mlc, root, work = sys.argv[1], sys.argv[2], os.path.abspath(sys.argv[3])
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    model_dir, build = os.path.join(work, "model"), os.path.join(work, "app")
    run([mlc, "compile", os.path.join(root, "examples", "mlp.mdl"), "--target", "cpu", "-o", model_dir])
    run(["cmake", "-S", os.path.join(root, "examples", "app"), "-B", build, "-G", "Ninja", f"-DMODEL_DIR={model_dir}"])
    run(["cmake", "--build", build])

    ref, weights, x, labels = mlp_reference(work)
    out = run([os.path.join(build, "app"), weights, os.path.join(work, "x.bin"), os.path.join(work, "labels.bin"),
               os.path.join(work, "logits.bin")])
    got = torch.from_numpy(np.fromfile(os.path.join(work, "logits.bin"), dtype=np.float32).reshape(2, 32, 10))
    loss = float(out.split()[1])
    with torch.no_grad():
        want0 = ref(x)
    opt = torch.optim.SGD(ref.parameters(), lr=0.01, momentum=0.9)
    want_loss = F.cross_entropy(ref(x), labels.long())
    want_loss.backward()
    opt.step()
    with torch.no_grad():
        want1 = ref(x)
    e0, e1 = rel_err(got[0], want0), rel_err(got[1], want1)
    e_loss = abs(loss - want_loss.item()) / abs(want_loss.item())
    print(f"app: logits relative error {e0:.3g}; loss {loss:.7g} vs torch {want_loss.item():.7g} (relative error "
          f"{e_loss:.3g}); logits after one SGD step {e1:.3g}; tolerance {TOL}")
    sys.exit(0 if max(e0, e1, e_loss) <= TOL else 1)


if __name__ == "__main__":
    main()
