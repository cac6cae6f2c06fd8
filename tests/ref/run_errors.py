"""`mlc run` must refuse bad weights and inputs with a clear error naming the
tensor, and exit with status 1.  Each case writes a broken file and checks
the exact message.  Usage: run_errors.py MLC REPO_ROOT WORKDIR"""
import os
import subprocess
import sys

import torch

from models import MLP, write_safetensors

CASES = []


def case(fn):
    CASES.append(fn)
    return fn


def main():
    mlc, root, work = sys.argv[1], sys.argv[2], os.path.abspath(sys.argv[3])
    os.makedirs(work, exist_ok=True)
    model = os.path.join(root, "examples", "mlp.mdl")
    torch.manual_seed(0)
    sd = {k: v.detach() for k, v in MLP().state_dict().items()}
    x = os.path.join(work, "x.bin")
    torch.randn(32, 784).numpy().tofile(x)
    short = os.path.join(work, "short.bin")
    torch.randn(32, 700).numpy().tofile(short)

    def weights(name, tensors):
        path = os.path.join(work, name)
        write_safetensors(path, tensors, {"format": "pt"})
        return path

    missing = dict(sd)
    del missing["net.2.bias"]
    wrong_shape = dict(sd, **{"net.4.weight": torch.zeros(10, 255)})
    wrong_dtype = dict(sd, **{"net.0.bias": sd["net.0.bias"].to(torch.float16)})
    extra = dict(sd, **{"net.9.weight": torch.zeros(3)})
    garbage = os.path.join(work, "garbage.safetensors")
    with open(garbage, "wb") as f:
        f.write(b"\x10\x00\x00\x00\x00\x00\x00\x00{not json at all}")
    good = weights("good.safetensors", sd)
    cases = [
        (["--weights", weights("missing.safetensors", missing), "--input", f"x={x}"],
         "missing tensor 'net.2.bias' (f32), which the model needs"),
        (["--weights", weights("shape.safetensors", wrong_shape), "--input", f"x={x}"],
         "tensor 'net.4.weight' has shape [10, 255], the model needs [10, 256]"),
        (["--weights", weights("dtype.safetensors", wrong_dtype), "--input", f"x={x}"],
         "tensor 'net.0.bias' is F16, the model needs F32"),
        (["--weights", weights("extra.safetensors", extra), "--input", f"x={x}"],
         "unexpected tensor 'net.9.weight': the model has no parameter of that name"),
        (["--weights", garbage, "--input", f"x={x}"], garbage),
        (["--weights", os.path.join(work, "nope.safetensors"), "--input", f"x={x}"], "nope.safetensors"),
        (["--weights", good], "input 'x' (f32[32, 784], 100352 bytes) needs --input x=FILE"),
        (["--weights", good, "--input", f"x={short}"],
         "input 'x' is f32[32, 784], 100352 bytes of raw little-endian data; the file has fewer"),
        (["--weights", good, "--input", f"y={x}"], "--input y=" + x + ": forward has no input of that name"),
        (["--weights", good, "--input", f"x={x}", "--output", "logits=/tmp/o.bin"],
         "--output logits=/tmp/o.bin: forward has no output of that name (it has 'output')"),
    ]
    failed = 0
    for args, want in cases:
        r = subprocess.run([mlc, "run", model, "--target", "cpu", *args], capture_output=True, text=True)
        last = r.stderr.strip().splitlines()[-1] if r.stderr.strip() else ""
        ok = r.returncode == 1 and want in last and last.startswith("mlc: ")
        failed += not ok
        print(("ok   " if ok else "FAIL ") + last + ("" if ok else f"\n     exit {r.returncode}, wanted: {want}"))
    print(f"{len(cases) - failed} passed, {failed} failed")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
