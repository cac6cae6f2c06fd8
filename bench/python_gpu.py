"""The Python binding on a CUDA artifact with torch tensors on the GPU
(issue 26's GPU part), run by bench/h200_python.sh on the H200.

The artifact (bench/artifact_prep.sh: examples/minillm.mdl --target cuda at a
small f32 config, compiled on the CPU machine) is loaded with mlc.load, its
parameters are mlc's seed-0 initialisation (saved as safetensors, for mlc run
and PyTorch), and:
  1. forward from torch CUDA tensors (int32 tokens on cuda:0): the logits come
     back as a torch tensor on cuda:0; they equal the same model's forward from
     numpy arrays (host memory) within 1e-6, and `mlc run --target cuda` on the
     same weights and tokens within 1e-5 (the same kernels: a larger error
     means another path ran), and PyTorch's MiniLLM (tests/ref/models.py, f32
     on the GPU, TF32 off) within 1e-4 (mlc's f32 GEMMs are 3xTF32);
     relative errors are max |a - b| / max |b|;
  2. forward into out= (a torch tensor): written in place, its data_ptr() the
     same before and after, the same values;
  3. two train steps from torch CUDA tokens and targets: each loss equals a
     second model's from numpy arrays within 1e-6, the first PyTorch's
     cross-entropy within 1e-4, and the two models' logits after the steps
     agree within 1e-6;
  4. no copy: torch.profiler (CUPTI, which records every copy in the
     process, the driver calls mlc makes included) over a forward from
     torch tensors shows no copy at all (the runtime binds the tokens and
     the logits in place of its own buffers: MLC_MEMORY_DEVICE_IN_PLACE);
     over the second train step, host copies of at most 8 bytes only (the
     step count and the learning rate the runtime writes, and the 4-byte
     loss read back) and no device-to-device copy.  The same profile over
     a forward from numpy arrays must show the host copies (the control: it
     proves the profiler sees mlc's copies at all).  A token tensor 4 bytes
     off 16-byte alignment (a slice) cannot be bound: it is copied device
     to device (one copy of its size) and gives the same logits;
  5. misuse raises, and nothing crashes: int64 tokens (mlc.Error naming the
     dtypes), a non-contiguous tensor (ValueError), a float64 one (TypeError),
     a tensor said to be on cuda:1 (mlc.Error: the model runs on GPU 0), and
     host memory handed over as device memory (mlc.Error from the driver's
     check of the address).
Prints one line per check and "N passed, M failed"; exit status 1 if any
failed.

Usage: python_gpu.py --model DIR --mlc MLC --root REPO --config "k=v ..." --work DIR"""
import argparse
import ctypes
import json
import os
import subprocess
import sys

import numpy as np
import torch

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "python"))
sys.path.insert(0, os.path.join(ROOT, "tests", "ref"))
import mlc  # noqa: E402
from models import MiniLLM, read_safetensors  # noqa: E402

failed, passed = [], []


def check(ok, what):
    print(("ok   " if ok else "FAIL ") + what, flush=True)
    (passed if ok else failed).append(what)


def rel(a, b):
    a, b = torch.as_tensor(a).double().cpu(), torch.as_tensor(b).double().cpu()
    return float((a - b).abs().max() / b.abs().max())


def copies(fn, work, tag):
    """[(kind, bytes)] of the memory copies CUPTI saw while fn ran."""
    from torch.profiler import ProfilerActivity, profile
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        fn()
        torch.cuda.synchronize()
    path = os.path.join(work, f"trace-{tag}.json")
    prof.export_chrome_trace(path)
    with open(path) as f:
        events = json.load(f)
    events = events["traceEvents"] if isinstance(events, dict) else events
    out = []
    for e in events:
        if e.get("cat") == "gpu_memcpy" or str(e.get("name", "")).startswith("Memcpy"):
            name = e.get("name", "")
            kind = "DtoD" if "DtoD" in name else "HtoD" if "HtoD" in name else "DtoH" if "DtoH" in name else name
            out.append((kind, int(e.get("args", {}).get("bytes", -1))))
    print(f"  {tag}: copies {out}")
    return out


class FakeDevice:
    """A DLPack tensor over memory it does not describe truly: host memory
    said to be on cuda:0, or a real GPU tensor said to be on cuda:1."""

    class _Managed(ctypes.Structure):
        _fields_ = [("t", mlc._DLTensor), ("ctx", ctypes.c_void_p), ("deleter", ctypes.c_void_p)]

    _new = ctypes.pythonapi.PyCapsule_New
    _new.restype, _new.argtypes = ctypes.py_object, [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]
    _name = b"dltensor"

    def __init__(self, ptr, shape, device_id, keep):
        self.keep, self.device = keep, (2, device_id)
        self.shape = (ctypes.c_int64 * len(shape))(*shape)
        self.m = self._Managed(mlc._DLTensor(ptr, mlc._DLDevice(2, device_id), len(shape), mlc._DLDataType(0, 32, 1),
                                             self.shape, None, 0), None, None)

    def __dlpack_device__(self):
        return self.device

    def __dlpack__(self, stream=None):
        return self._new(ctypes.addressof(self.m), self._name, None)


def raises(call, exc, text, what):
    try:
        call()
    except exc as e:
        print(f"  {type(e).__name__}: {e}")
        check(text in str(e), what)
        return
    except Exception as e:  # noqa: BLE001 (the wrong kind of exception is a failed check)
        print(f"  {type(e).__name__}: {e}")
        check(False, what)
        return
    check(False, what + " (nothing raised)")


def main():
    ap = argparse.ArgumentParser()
    for a in ("--model", "--mlc", "--config", "--work"):
        ap.add_argument(a, required=True)
    args = ap.parse_args()
    cfg = dict(kv.split("=") for kv in args.config.split())
    vocab, dim, layers, heads, batch, seq = (int(cfg[k]) for k in ("vocab", "dim", "layers", "heads", "batch", "seq"))
    os.makedirs(args.work, exist_ok=True)
    dev = torch.device("cuda:0")

    m = mlc.load(args.model)
    print(f"loaded {m.name}: {m.entries()}")
    weights = os.path.join(args.work, "w.safetensors")
    m.save_weights(weights)  # mlc's seed-0 initialisation
    g = torch.Generator().manual_seed(0)
    tokens = torch.randint(0, vocab, (batch, seq), dtype=torch.int32, generator=g).to(dev)
    targets = torch.randint(0, vocab, (batch, seq), dtype=torch.int32, generator=g).to(dev)
    tokens.cpu().numpy().tofile(os.path.join(args.work, "tokens.bin"))

    # 1. forward from torch CUDA tensors.
    m.forward(tokens)  # the first run copies the parameters to the GPU and makes the arena
    logits = m.forward(tokens)
    check(isinstance(logits, torch.Tensor) and logits.device == dev and logits.dtype == torch.float32 and
          tuple(logits.shape) == (batch, seq, vocab), f"forward(torch cuda tokens) gives a torch f32 tensor on cuda:0 "
          f"({type(logits).__name__}, {getattr(logits, 'device', None)}, {tuple(logits.shape)})")
    host = m.forward(tokens.cpu().numpy())
    e = rel(logits, host)
    check(e <= 1e-6, f"logits from GPU tensors against the same model from numpy: relative error {e:.3g} (tolerance 1e-6)")
    ref_bin = os.path.join(args.work, "mlc-run-logits.bin")
    cmd = [args.mlc, "run", os.path.join(ROOT, "examples", "minillm.mdl"), "--target", "cuda", *args.config.split(),
           "--weights", weights, "--input", f"idx={os.path.join(args.work, 'tokens.bin')}", "--output",
           f"output={ref_bin}"]
    r = subprocess.run(cmd, capture_output=True, text=True)
    print(f"$ {' '.join(cmd)}\n{r.stdout}{r.stderr}".rstrip())
    if r.returncode == 0:
        want = torch.from_numpy(np.fromfile(ref_bin, dtype=np.float32).reshape(batch, seq, vocab))
        e = rel(logits, want)
        check(e <= 1e-5, f"logits against mlc run --target cuda: relative error {e:.3g} (tolerance 1e-5)")
    else:
        check(False, f"mlc run --target cuda failed ({r.returncode})")
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    ref = MiniLLM(vocab, dim, layers, heads).to(dev)
    ref.load_state_dict({k: v.to(dev) for k, v in read_safetensors(weights)[0].items()})
    with torch.no_grad():
        want = ref(tokens.long())
    e = rel(logits, want)
    check(e <= 1e-4, f"logits against PyTorch's MiniLLM in f32 on the GPU: relative error {e:.3g} (tolerance 1e-4)")

    # 2. out=.
    out = torch.full_like(logits, float("nan"))
    ptr = out.data_ptr()
    got = m.forward(tokens, out=out)
    check(got is out and out.data_ptr() == ptr and torch.equal(out, logits),
          "forward(tokens, out=t) writes t in place (same object, same data_ptr, same values)")

    # 4. (before the step changes the weights) no host copy.
    nbytes = {"tokens": tokens.numel() * 4, "logits": logits.numel() * 4}
    tokens_np, targets_np = tokens.cpu().numpy(), targets.cpu().numpy()  # outside the profiles: torch's own copies
    seen = copies(lambda: m.forward(tokens, out=out), args.work, "forward-torch")
    control = copies(lambda: m.forward(tokens_np), args.work, "forward-numpy")
    saw = any(k in ("HtoD", "DtoH") for k, _ in control)
    check(saw, "the profiler sees mlc's host copies when the inputs are numpy arrays (the control)")
    check(saw and not seen, f"forward from torch tensors into out=: no copy at all ({seen or 'none'})")
    seen = copies(lambda: m.forward(tokens), args.work, "forward-torch-new")
    check(not seen, f"forward from torch tensors, the logits a new tensor: no copy at all ({seen or 'none'})")
    # A slice at 4 bytes: not 16-byte aligned, so copied; the same logits.
    odd = torch.zeros(batch * seq + 1, dtype=torch.int32, device=dev)[1:].view(batch, seq)
    odd.copy_(tokens)
    torch.cuda.synchronize()
    got = {}
    seen = copies(lambda: got.setdefault("logits", m.forward(odd, out=out)), args.work, "forward-odd")
    dtod = sorted(b for k, b in seen if k == "DtoD")
    check(odd.data_ptr() % 16 == 4 and dtod == [nbytes["tokens"]] and torch.equal(got["logits"], logits),
          f"tokens 4 bytes off alignment: copied device to device ({dtod} bytes, want [{nbytes['tokens']}]), "
          f"the same logits")

    # 3. train steps from torch tensors, against a second model's from numpy.
    # The first step makes the optimizer state and the train arena (zeroed on
    # the device); the second is profiled.
    m2 = mlc.load(args.model)
    m2.load_weights(weights)
    loss, loss_np = m.train_step(tokens, targets), m2.train_step(tokens_np, targets_np)
    check(abs(loss - loss_np) <= 1e-6 * abs(loss_np),
          f"step 1 loss from GPU tensors {loss:.7g}, from numpy {loss_np:.7g} (tolerance 1e-6 relative)")
    want_loss = torch.nn.functional.cross_entropy(want.reshape(-1, vocab), targets.long().reshape(-1)).item()
    check(abs(loss - want_loss) <= 1e-4 * abs(want_loss),
          f"step 1 loss {loss:.7g} against PyTorch's cross-entropy {want_loss:.7g} (tolerance 1e-4 relative)")
    step = {}
    seen = copies(lambda: step.setdefault("loss", m.train_step(tokens, targets)), args.work, "train-torch")
    loss, loss_np = step["loss"], m2.train_step(tokens_np, targets_np)
    big = [c for c in seen if c[0] in ("HtoD", "DtoH") and c[1] > 8]
    dtod = sorted(b for k, b in seen if k == "DtoD")
    check(saw and not big and not dtod,
          f"step 2 from torch tensors: no host copy over 8 bytes ({big or 'none'}), no device-to-device copy "
          f"({dtod or 'none'}; all copies: {seen})")
    check(abs(loss - loss_np) <= 1e-6 * abs(loss_np),
          f"step 2 loss from GPU tensors {loss:.7g}, from numpy {loss_np:.7g} (tolerance 1e-6 relative)")
    e = rel(m.forward(tokens), m2.forward(tokens_np))
    check(m.steps == 2 and e <= 1e-6, f"after the steps: {m.steps} steps, the two models' logits agree to {e:.3g} "
          f"(tolerance 1e-6)")

    # 5. misuse.
    raises(lambda: m.forward(tokens.long()), mlc.Error, "is i32[", "int64 tokens on the GPU: mlc.Error naming the dtypes")
    wide = torch.zeros(seq, batch, dtype=torch.int32, device=dev).t()
    raises(lambda: m.forward(wide), ValueError, "not contiguous", "a transposed GPU tensor: ValueError")
    raises(lambda: m.forward(tokens.double()), TypeError, "float64 on the GPU", "a float64 GPU tensor: TypeError")
    raises(lambda: m.forward(FakeDevice(tokens.data_ptr(), (batch, seq), 1, tokens), out=out), mlc.Error,
           "the model runs on GPU 0", "a tensor said to be on cuda:1: mlc.Error")
    arr = np.zeros((batch, seq), np.int32)
    raises(lambda: m.forward(FakeDevice(arr.ctypes.data, (batch, seq), 0, arr), out=out), mlc.Error,
           "not in GPU memory", "host memory said to be on cuda:0: mlc.Error from the driver's check")
    check(torch.equal(m.forward(tokens), m.forward(tokens)), "the model still runs after the refusals")

    print(f"{len(passed)} passed, {len(failed)} failed")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
