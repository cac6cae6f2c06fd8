"""`mlc run` must refuse bad weights and inputs with a clear error naming the
tensor, and exit with status 1.  Each case writes a broken file and checks
the exact message.  Usage: run_errors.py MLC REPO_ROOT WORKDIR"""
import os
import subprocess
import sys

import numpy
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
    # Files users try, told by content whatever their names.
    pt = os.path.join(work, "model.pt")
    torch.save(sd, pt)
    legacy = os.path.join(work, "legacy.bin")
    torch.save(sd, legacy, _use_new_zipfile_serialization=False)
    npz = os.path.join(work, "w.npz")
    numpy.savez(npz, **{k: v.numpy() for k, v in sd.items()})
    xnpy = os.path.join(work, "x.npy")
    numpy.save(xnpy, torch.randn(32, 784).numpy().astype(numpy.float64))
    torch_recipe = ("convert it in Python:\n"
                    "  import torch, safetensors.torch\n"
                    "  state = torch.load(\"{0}\", map_location=\"cpu\")  # or model.state_dict()\n"
                    "  safetensors.torch.save_file(state, \"{1}\")")
    ddp = weights("ddp.safetensors", {"module." + k: v for k, v in sd.items()})
    bare = weights("bare.safetensors", {k[len("net."):]: v for k, v in sd.items()})
    conv1d = weights("conv1d.safetensors", dict(sd, **{"net.0.weight": sd["net.0.weight"].t().contiguous()}))
    exact = [
        # wrong names: a wrapper's prefix in the file, or the model's missing from it; a transposed weight
        (["--weights", ddp, "--input", f"x={x}"],
         f"mlc: {ddp}: missing tensor 'net.0.weight' (f32), which the model needs; the file has 'module.net.0.weight': "
         "its names start with 'module.', which the model's do not; strip it in Python:\n"
         "  state = {k.removeprefix(\"module.\"): v for k, v in state.items()}"),
        (["--weights", bare, "--input", f"x={x}"],
         f"mlc: {bare}: missing tensor 'net.0.weight' (f32), which the model needs; the file has '0.weight': "
         "the model's names start with 'net.', which the file's do not; add it in Python:\n"
         "  state = {\"net.\" + k: v for k, v in state.items()}"),
        (["--weights", conv1d, "--input", f"x={x}"],
         f"mlc: {conv1d}: tensor 'net.0.weight' has shape [784, 256], the model needs [256, 784]: it is stored "
         "transposed ([in, out], as Hugging Face's Conv1D keeps it; Linear keeps [out, in]); transpose it in Python:\n"
         "  state[\"net.0.weight\"] = state[\"net.0.weight\"].t().contiguous()"),
        (["--weights", pt, "--input", f"x={x}"],
         f"mlc: {pt}: safetensors: this is a PyTorch file (torch.save, zip format), not safetensors; "
         + torch_recipe.format(pt, pt[:-3] + ".safetensors")),
        (["--weights", legacy, "--input", f"x={x}"],
         f"mlc: {legacy}: safetensors: this is a PyTorch file (torch.save, legacy pickle format), not safetensors; "
         + torch_recipe.format(legacy, legacy[:-4] + ".safetensors")),
        (["--weights", npz, "--input", f"x={x}"],
         f"mlc: {npz}: safetensors: this is a NumPy .npz archive (numpy.savez), not safetensors; convert it in Python:\n"
         "  import numpy, safetensors.numpy\n"
         f"  safetensors.numpy.save_file(dict(numpy.load(\"{npz}\")), \"{npz[:-4]}.safetensors\")"),
        (["--weights", good, "--input", f"x={xnpy}"],
         f"mlc: --input x={xnpy}: input 'x' is f32[32, 784], 100352 bytes of raw little-endian data; the file has more\n"
         "it is a NumPy .npy file, which has a header; write the raw data in Python:\n"
         f"  numpy.load(\"{xnpy}\").astype(numpy.float32).tofile(\"x.bin\")"),
        (["--weights", good, "--input", f"x={npz}"],
         f"mlc: --input x={npz}: input 'x' is f32[32, 784], 100352 bytes of raw little-endian data; the file has more\n"
         "it is a NumPy .npz archive (numpy.savez); write each input's raw data in Python:\n"
         f"  numpy.load(\"{npz}\")[\"x\"].astype(numpy.float32).tofile(\"x.bin\")"),
        (["--weights", good, "--input", f"x={pt}"],
         f"mlc: --input x={pt}: input 'x' is f32[32, 784], 100352 bytes of raw little-endian data; the file has more\n"
         "it is a PyTorch file (torch.save); write the tensor's raw data in Python:\n"
         f"  torch.load(\"{pt}\").numpy().astype(numpy.float32).tofile(\"x.bin\")  # torch.load(...)[\"x\"] for a dict"),
    ]
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
    for args, want in exact:  # the whole message, of several lines
        r = subprocess.run([mlc, "run", model, "--target", "cpu", *args], capture_output=True, text=True)
        lines = r.stderr.strip().splitlines()
        got = "\n".join(lines[-(want.count("\n") + 1):])
        ok = r.returncode == 1 and got == want
        failed += not ok
        print(("ok   " if ok else "FAIL ") + got + ("" if ok else f"\n     exit {r.returncode}, wanted:\n{want}"))
    print(f"{len(cases) + len(exact) - failed} passed, {failed} failed")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
