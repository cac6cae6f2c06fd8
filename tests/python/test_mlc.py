"""The Python binding (python/mlc) against PyTorch.

The MLP of examples/mlp.mdl (inputs=16 hidden=32 batch=8) is compiled into
an artifact; through `mlc.load` its forward must match torch's within 1e-5
(relative to the largest logit), 5 train steps must follow torch.optim.SGD
(lr 0.01, momentum 0.9) within 1e-5 (absolute, on the loss), a checkpoint
must restore steps, weights and momentum exactly, weights loaded from the
file's bytes in memory must give the file's outputs bit for bit, and each
misuse (a corrupt buffer among them) must raise mlc.Error with the runtime's
exact message.  The same MLP with a decaying
schedule and no steps= (AdamW(lr=1e-2, warmup=2, decay=cosine|linear,
min_lr=1e-3)) refuses a step until schedule_steps is set, then takes the
rates of llm.c's formula step by step (lr within 1e-12, past the end
min_lr), and its losses follow torch.optim.AdamW fed those rates within 1e-5.
GPU tensors through DLPack, as far as a machine without a GPU can check them
(DeviceTensors: a fake CUDA tensor over host memory): the errors, a CPU
model's refusal of device memory without a step taken, and out=.

Usage: test_mlc.py MLC REPO_ROOT WORKDIR"""
import ctypes
import math
import os
import subprocess
import sys
import tempfile
import unittest

import numpy as np
import torch

MLC, ROOT, WORK = sys.argv[1], sys.argv[2], os.path.abspath(sys.argv[3])
sys.path.insert(0, os.path.join(ROOT, "python"))
sys.path.insert(0, os.path.join(ROOT, "tests", "ref"))
import mlc  # noqa: E402
from models import MLP, read_safetensors, write_safetensors  # noqa: E402,F401

ART = os.path.join(WORK, "mlp")


def setUpModule():
    os.makedirs(WORK, exist_ok=True)
    subprocess.run([MLC, "compile", os.path.join(ROOT, "examples", "mlp.mdl"), "--target", "cpu", "-o", ART,
                    "inputs=16", "hidden=32", "batch=8"], check=True, capture_output=True)
    with open(os.path.join(ROOT, "examples", "mlp.mdl")) as f:
        src = f.read()
    old = "optimizer = SGD(lr=0.01, momentum=0.9)"
    assert old in src
    for decay in ("cosine", "linear"):
        mdl = os.path.join(WORK, f"mlp_{decay}.mdl")
        with open(mdl, "w") as f:
            f.write(src.replace(old, f"optimizer = AdamW(lr=1e-2, warmup=2, decay={decay}, min_lr=1e-3)"))
        subprocess.run([MLC, "compile", mdl, "--target", "cpu", "-o", os.path.join(WORK, f"mlp_{decay}"),
                        "inputs=16", "hidden=32", "batch=8"], check=True, capture_output=True)


class Binding(unittest.TestCase):
    def setUp(self):
        torch.manual_seed(0)
        self.ref = MLP(16, 32, 10)
        self.weights = os.path.join(WORK, "w.safetensors")
        write_safetensors(self.weights, {k: v.detach() for k, v in self.ref.state_dict().items()}, {"format": "pt"})
        self.m = mlc.load(ART)
        self.m.load_weights(self.weights)
        self.x = torch.randn(8, 16)
        self.y = torch.randint(0, 10, (8,), dtype=torch.int32)

    def tearDown(self):
        self.m.close()

    def test_entries(self):
        self.assertEqual(self.m.entries(), {
            "forward": {"inputs": [("x", "f32", (8, 16))], "outputs": [("output", "f32", (8, 10))]},
            "train": {"inputs": [("x", "f32", (8, 16)), ("labels", "i32", (8,))], "outputs": [("loss", "f32", ())]}})

    def test_forward_matches_torch(self):
        got = self.m.forward(self.x.numpy())
        self.assertEqual((got.shape, got.dtype), ((8, 10), np.float32))
        want = self.ref(self.x).detach().numpy()
        self.assertLessEqual(np.abs(got - want).max() / np.abs(want).max(), 1e-5)
        np.testing.assert_array_equal(self.m.forward(x=self.x.numpy()), got)  # by name

    def test_train_steps_match_torch_sgd(self):
        opt = torch.optim.SGD(self.ref.parameters(), lr=0.01, momentum=0.9)
        for _ in range(5):
            loss = torch.nn.functional.cross_entropy(self.ref(self.x), self.y.long())
            opt.zero_grad()
            loss.backward()
            opt.step()
            self.assertAlmostEqual(self.m.train_step(self.x.numpy(), self.y.numpy()), loss.item(), delta=1e-5)
        self.assertEqual(self.m.steps, 5)
        got = self.m.forward(self.x.numpy())
        want = self.ref(self.x).detach().numpy()
        self.assertLessEqual(np.abs(got - want).max() / np.abs(want).max(), 1e-5)

    def test_checkpoint_round_trip(self):
        x, y = self.x.numpy(), self.y.numpy()
        self.m.train_step(x, y)
        ckpt = os.path.join(WORK, "ckpt")
        self.m.save(ckpt)
        after = [self.m.train_step(x, y) for _ in range(2)]
        with mlc.load(ART) as m2:
            m2.load(ckpt)
            self.assertEqual(m2.steps, 1)
            self.assertEqual([m2.train_step(x, y) for _ in range(2)], after)  # momentum restored too
            np.testing.assert_array_equal(m2.forward(x), self.m.forward(x))
        w = os.path.join(WORK, "w2.safetensors")
        self.m.save_weights(w)
        with mlc.load(ART) as m3:
            m3.load_weights(w)
            np.testing.assert_array_equal(m3.forward(x), self.m.forward(x))

    def test_errors_carry_the_runtime_message(self):
        cases = [
            (lambda: self.m.forward(np.zeros((4, 16), np.float32)), "INVALID_ARGUMENT",
             "mlp_forward: input 'x' is f32[8, 16], got f32[4, 16]"),
            (lambda: self.m.train_step(self.x.numpy(), self.y.numpy().astype(np.int64)), "INVALID_ARGUMENT",
             "mlp_train_step: input 'labels' is i32[8], got i64[8]"),
            (lambda: self.m.load_weights(os.path.join(WORK, "nope.safetensors")), "NOT_FOUND",
             os.path.join(WORK, "nope.safetensors") + ": cannot open: No such file or directory"),
            (lambda: self.m.load(self.weights), "DATA_LOSS",
             self.weights + ": not an mlc checkpoint (its metadata lacks format, step or xxh64)"),
        ]
        for call, code, message in cases:
            with self.assertRaises(mlc.Error) as cm:
                call()
            self.assertEqual((cm.exception.code, str(cm.exception)), (code, message))
        bad = os.path.join(WORK, "bad.safetensors")
        sd = {k: v.detach() for k, v in self.ref.state_dict().items()}
        sd["net.4.weight"] = torch.zeros(10, 31)
        write_safetensors(bad, sd, {"format": "pt"})
        with self.assertRaises(mlc.Error) as cm:
            self.m.load_weights(bad)
        self.assertEqual(str(cm.exception), bad + ": tensor 'net.4.weight' has shape [10, 31], the model needs [10, 32]")

    def test_weights_from_memory(self):
        """The file's bytes give what the file gives, bit for bit, from every kind of buffer."""
        x = self.x.numpy()
        from_file = self.m.forward(x)
        with open(self.weights, "rb") as f:
            blob = f.read()
        with mlc.load(ART) as m2:  # mlc's own initialisation until a load replaces it
            self.assertFalse(np.array_equal(m2.forward(x), from_file))
            for buf in (blob, bytearray(blob), memoryview(blob), np.frombuffer(blob, np.uint8)):
                m2.init_weights(seed=1)
                m2.load_weights(buf)
                np.testing.assert_array_equal(m2.forward(x), from_file, err_msg=type(buf).__name__)
            m2.init_weights(seed=1)
            m2.load_weights(self.weights)  # and the path still works
            np.testing.assert_array_equal(m2.forward(x), from_file)

    def test_corrupt_weights_in_memory(self):
        with open(self.weights, "rb") as f:
            blob = f.read()
        cases = [
            (b"", "weights in memory: safetensors: file is 0 bytes, too short for the 8-byte header length"),
            (blob[:5], "weights in memory: safetensors: file is 5 bytes, too short for the 8-byte header length"),
            (b"\xff" * 8 + blob[8:],
             "weights in memory: safetensors: header length 18446744073709551615 is over the limit of 100000000 bytes"),
            (blob[:-4], "weights in memory: safetensors: tensor 'net.4.weight': data_offsets [6440, 7720] run past "
                        "the end of the 7716-byte data region"),
        ]
        x = self.x.numpy()
        before = self.m.forward(x)
        for buf, message in cases:
            with self.assertRaises(mlc.Error) as cm:
                self.m.load_weights(buf)
            self.assertEqual((cm.exception.code, str(cm.exception)), ("DATA_LOSS", message))
        np.testing.assert_array_equal(self.m.forward(x), before)  # a refused file changes nothing
        with self.assertRaisesRegex(TypeError, r"^load_weights takes a path or the bytes of a safetensors file, got int"):
            self.m.load_weights(5)

    def test_torch_and_numpy_files(self):
        """A torch.save or numpy.savez file, by path or bytes: what it is and the Python that converts it."""
        with tempfile.TemporaryDirectory() as tmp:
            self._torch_and_numpy_files(tmp)

    def _torch_and_numpy_files(self, tmp):
        pt, npz = os.path.join(tmp, "w.pt"), os.path.join(tmp, "w.npz")
        torch.save({"net.0.bias": torch.zeros(3)}, pt)
        np.savez(npz, x=np.zeros(3, np.float32))
        recipe = ("convert it in Python:\n  import torch, safetensors.torch\n"
                  "  state = torch.load(\"{0}\", map_location=\"cpu\")  # or model.state_dict()\n"
                  "  safetensors.torch.save_file(state, \"{1}\")")
        torch_is = "safetensors: this is a PyTorch file (torch.save, zip format), not safetensors; "
        npz_is = "safetensors: this is a NumPy .npz archive (numpy.savez), not safetensors; convert it in Python:\n" \
                 "  import numpy, safetensors.numpy\n  safetensors.numpy.save_file(dict(numpy.load(\"{0}\")), \"{1}\")"
        with open(pt, "rb") as f:
            pt_bytes = f.read()
        with open(npz, "rb") as f:
            npz_bytes = f.read()
        cases = [
            (pt, f"{pt}: {torch_is}" + recipe.format(pt, pt[:-3] + ".safetensors")),
            (pt_bytes, f"weights in memory: {torch_is}" + recipe.format("model.pt", "model.safetensors")),
            (npz, f"{npz}: " + npz_is.format(npz, npz[:-4] + ".safetensors")),
            (npz_bytes, "weights in memory: " + npz_is.format("data.npz", "data.safetensors")),
        ]
        for source, message in cases:
            with self.assertRaises(mlc.Error) as cm:
                self.m.load_weights(source)
            self.assertEqual((cm.exception.code, str(cm.exception)), ("INVALID_ARGUMENT", message))

    def test_cpu_builds(self):
        """The artifact carries x86-64-v2, v3 and v4 kernels; MLC_CPU_MAX caps the one load picks."""
        self.assertIn(self.m.cpu, ("x86-64-v2", "x86-64-v3", "x86-64-v4"))
        x = self.x.numpy()
        best = self.m.forward(x)
        os.environ["MLC_CPU_MAX"] = "x86-64-v2"
        try:
            with mlc.load(ART) as m2:
                m2.load_weights(self.weights)
                self.assertEqual(m2.cpu, "x86-64-v2")
                got = m2.forward(x)  # no FMA, four lanes: not bit for bit
                self.assertLessEqual(np.abs(got - best).max() / np.abs(best).max(), 1e-6)
        finally:
            del os.environ["MLC_CPU_MAX"]

    def test_python_errors(self):
        with self.assertRaisesRegex(TypeError, r"^forward: missing input x$"):
            self.m.forward()
        with self.assertRaisesRegex(TypeError, r"^forward has no input 'y' \(its inputs: x\)$"):
            self.m.forward(y=self.x.numpy())
        with self.assertRaisesRegex(TypeError, r"^forward: input 'x' is a numpy uint8 array, which no mlc dtype matches"):
            self.m.forward(np.zeros((8, 16), np.uint8))
        with self.assertRaisesRegex(FileNotFoundError, "no such folder"):
            mlc.load(os.path.join(WORK, "nowhere"))


class _DLManaged(ctypes.Structure):  # DLManagedTensor
    _fields_ = [("t", mlc._DLTensor), ("ctx", ctypes.c_void_p), ("deleter", ctypes.c_void_p)]


_capsule_new = ctypes.pythonapi.PyCapsule_New
_capsule_new.restype, _capsule_new.argtypes = ctypes.py_object, [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]
_DLTENSOR = b"dltensor"  # the capsule keeps a pointer to its name


class FakeGPUTensor:
    """What the binding sees of a CUDA tensor, on a machine without one: an
    object that speaks DLPack and says it is on a device, over a numpy
    buffer (host memory, which the runtime must never be handed as device
    memory unchecked)."""

    def __init__(self, arr, device=(2, 0), dtype=None, lanes=1, strides=None):
        self.arr = arr if arr.flags.c_contiguous else np.ascontiguousarray(arr)  # 0-d stays 0-d
        self.device = device
        code, bits = dtype or {np.dtype(np.float32): (2, 32), np.dtype(np.int32): (0, 32),
                               np.dtype(np.float64): (2, 64)}[self.arr.dtype]
        nd = self.arr.ndim
        self.shape = (ctypes.c_int64 * max(nd, 1))(*self.arr.shape)
        self.strides = (ctypes.c_int64 * max(nd, 1))(*strides) if strides else None
        t = mlc._DLTensor(self.arr.ctypes.data, mlc._DLDevice(*device), nd, mlc._DLDataType(code, bits, lanes),
                          self.shape, self.strides, 0)
        self.managed = _DLManaged(t, None, None)

    def __dlpack_device__(self):
        return self.device

    def __dlpack__(self, stream=None):
        return _capsule_new(ctypes.addressof(self.managed), _DLTENSOR, None)


class DeviceTensors(unittest.TestCase):
    """GPU tensors through DLPack (issue 26), the parts a CPU machine can
    check: each misuse raises a clear exception before any memory is
    touched, a CPU model refuses device memory by name without taking a
    step, and host tensors (numpy, torch's CPU tensors, out=) run as before.
    The GPU side is bench/h200_python.sh's."""

    def setUp(self):
        self.m = mlc.load(ART)
        self.x = np.random.default_rng(0).standard_normal((8, 16)).astype(np.float32)
        self.y = np.arange(8, dtype=np.int32) % 10

    def tearDown(self):
        self.m.close()

    def assertMlcError(self, call, message):
        with self.assertRaises(mlc.Error) as cm:
            call()
        self.assertEqual((cm.exception.code, str(cm.exception)), ("INVALID_ARGUMENT", message))

    def test_cpu_model_refuses_device_memory(self):
        self.assertMlcError(lambda: self.m.forward(FakeGPUTensor(self.x), out=np.empty((8, 10), np.float32)),
                            "input 'x' of forward is in device memory (device 0), but the model runs on the cpu, "
                            "which takes tensors in host memory")
        self.assertMlcError(lambda: self.m.forward(self.x, out=FakeGPUTensor(np.empty((8, 10), np.float32), (2, 1))),
                            "output 'output' of forward is in device memory (device 1), but the model runs on the cpu, "
                            "which takes tensors in host memory")
        self.assertMlcError(lambda: self.m.train_step(FakeGPUTensor(self.x), self.y),
                            "input 'x' of train is in device memory (device 0), but the model runs on the cpu, "
                            "which takes tensors in host memory")
        # An output the step could not write is refused before the step.
        self.assertMlcError(lambda: self.m.run("train", self.x, self.y, out=FakeGPUTensor(np.zeros((), np.float32))),
                            "output 'loss' of train is in device memory (device 0), but the model runs on the cpu, "
                            "which takes tensors in host memory")
        self.assertEqual(self.m.steps, 0)

    def test_layout_and_dtype_errors(self):
        out = np.empty((8, 10), np.float32)
        with self.assertRaisesRegex(ValueError, r"^forward: input 'x' is not contiguous \(strides \(1, 8\) in elements, "
                                                r"shape \(8, 16\)\): pass x.contiguous\(\)$"):
            self.m.forward(FakeGPUTensor(self.x, strides=(1, 8)), out=out)
        with self.assertRaisesRegex(TypeError, r"^forward: input 'x' is float64 on the GPU, which no mlc dtype matches, "
                                               r"and mlc converts no GPU tensor"):
            self.m.forward(FakeGPUTensor(self.x.astype(np.float64)), out=out)
        with self.assertRaisesRegex(TypeError, r"^forward: input 'x' is float32 x4 on the GPU"):
            self.m.forward(FakeGPUTensor(self.x, lanes=4), out=out)
        with self.assertRaisesRegex(TypeError, r"^forward: input 'x' is a tensor on metal:0; mlc takes host arrays and "
                                               r"CUDA tensors$"):
            self.m.forward(FakeGPUTensor(self.x, device=(8, 0)), out=out)
        with self.assertRaisesRegex(TypeError, r"^forward: the inputs are GPU tensors but not torch's; give the outputs "
                                               r"with out=$"):
            self.m.forward(FakeGPUTensor(self.x))
        # A wrong shape or dtype on the device is the runtime's check, as for host memory.
        self.assertMlcError(lambda: self.m.forward(FakeGPUTensor(self.x[:4]), out=out),
                            "mlp_forward: input 'x' is f32[8, 16], got f32[4, 16]")
        self.assertMlcError(lambda: self.m.forward(FakeGPUTensor(self.x.view(np.int32)), out=out),
                            "mlp_forward: input 'x' is f32[8, 16], got i32[8, 16]")

    def test_out_errors(self):
        with self.assertRaisesRegex(TypeError, r"^forward has 1 output \(output\), out= gives 2$"):
            self.m.forward(self.x, out=(np.empty((8, 10), np.float32),) * 2)
        with self.assertRaisesRegex(ValueError, r"^forward: output 'output': the out= array must be C-contiguous and "
                                                r"writable$"):
            self.m.forward(self.x, out=np.empty((10, 8), np.float32).T)
        ro = np.empty((8, 10), np.float32)
        ro.flags.writeable = False
        with self.assertRaisesRegex(ValueError, "C-contiguous and writable"):
            self.m.forward(self.x, out=ro)
        with self.assertRaisesRegex(TypeError, r"^forward: output 'output': out= takes numpy arrays or GPU tensors, "
                                               r"got float$"):
            self.m.forward(self.x, out=0.0)
        with self.assertRaisesRegex(TypeError, r"^forward: output 'output' is a numpy float64 array"):
            self.m.forward(self.x, out=np.empty((8, 10), np.float64))

    def test_host_paths_unchanged(self):
        want = self.m.forward(self.x)
        out = np.full((8, 10), np.nan, np.float32)
        self.assertIs(self.m.forward(self.x, out=out), out)
        np.testing.assert_array_equal(out, want)
        np.testing.assert_array_equal(self.m.forward(torch.from_numpy(self.x)), want)  # torch's CPU tensors: DLPack says cpu
        self.assertEqual(self.m.train_step(torch.from_numpy(self.x), torch.from_numpy(self.y)),
                         mlc.load(ART).train_step(self.x, self.y))


def schedule_lr(step, lr, min_lr, warmup, total, decay):
    """llm.c's get_lr, step from 0, written out apart from runtime/plan.c."""
    if step < warmup:
        return lr * (step + 1) / warmup
    if step >= total:
        return min_lr
    r = (step - warmup) / (total - warmup)
    coeff = 0.5 * (1.0 + math.cos(math.pi * r)) if decay == "cosine" else 1.0 - r
    return min_lr + coeff * (lr - min_lr)


class Schedule(unittest.TestCase):
    """A decaying schedule without steps=: its length given from Python."""

    def run_schedule(self, decay):
        torch.manual_seed(1)
        ref = MLP(16, 32, 10)
        w = os.path.join(WORK, f"w_{decay}.safetensors")
        write_safetensors(w, {k: v.detach() for k, v in ref.state_dict().items()}, {"format": "pt"})
        x, y = torch.randn(8, 16), torch.randint(0, 10, (8,), dtype=torch.int32)
        with mlc.load(os.path.join(WORK, f"mlp_{decay}")) as m:
            m.load_weights(w)
            self.assertEqual(m.schedule_steps, 0)
            with self.assertRaises(mlc.Error) as cm:
                m.train_step(x.numpy(), y.numpy())
            self.assertIn("the run's length is unknown", str(cm.exception))
            self.assertEqual(m.steps, 0)
            total = 6
            m.schedule_steps = total
            self.assertEqual(m.schedule_steps, total)
            opt = torch.optim.AdamW(ref.parameters(), lr=1e-2)  # weight_decay 0.01, as mlc's default
            for k in range(total + 2):
                want = schedule_lr(k, 1e-2, 1e-3, 2, total, decay)
                self.assertAlmostEqual(m.lr, want, delta=1e-12, msg=f"{decay}: lr before step {k + 1}")
                for g in opt.param_groups:
                    g["lr"] = want
                loss = torch.nn.functional.cross_entropy(ref(x), y.long())
                opt.zero_grad()
                loss.backward()
                opt.step()
                self.assertAlmostEqual(m.train_step(x.numpy(), y.numpy()), loss.item(), delta=1e-5,
                                       msg=f"{decay}: loss of step {k + 1}")
            self.assertEqual(m.steps, total + 2)
            self.assertEqual(m.lr, 1e-3)  # past the end: min_lr
            with self.assertRaises(ValueError):
                m.schedule_steps = -1

    def test_cosine(self):
        self.run_schedule("cosine")

    def test_linear(self):
        self.run_schedule("linear")


if __name__ == "__main__":
    unittest.main(argv=sys.argv[:1], verbosity=2)
