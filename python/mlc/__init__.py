"""mlc from Python: a compiled model's artifact through ctypes.

    import mlc
    m = mlc.load("out/mlp")               # the folder `mlc compile --target cpu -o out/mlp` wrote
    m.load_weights("w.safetensors")       # PyTorch names, dtypes and shapes
    m.load_weights(open("w.safetensors", "rb").read())   # or the file's bytes, from memory
    y = m.forward(x)                      # numpy arrays in, numpy arrays out
    loss = m.train_step(x, labels)        # one optimizer step; the loss before it
    m.save("ckpt")                        # weights, optimizer state and step count

    g = mlc.load("out/minillm_cuda")      # a --target cuda artifact
    logits = g.forward(tokens)            # tokens: a torch CUDA tensor; logits: a new one on that GPU
    g.forward(tokens, out=logits)         # or into the caller's tensor
    loss = g.train_step(tokens, targets)  # torch CUDA tensors in; the loss, a float

numpy arrays on a CPU model are not copied: they go to the C API as host
memory the call may use in place (runtime/tensor.h,
MLC_MEMORY_HOST_IN_PLACE), and the runtime binds each one in place of the
model's own for that call (mlc_session_bind_input, bind_output): the
kernels read the inputs from the caller's arrays and write the outputs
straight into the arrays returned (or given with out=).  Where the runtime
cannot bind one (an array not 16-byte aligned, an input that is also an
output, an output that is a weight), it copies that one, as it does every
array for a GPU model and for an artifact whose runtime predates binding.

Tensors on a GPU come in through DLPack (__dlpack__, __dlpack_device__:
torch, CuPy, JAX), with no torch import here, and their pointers go to the
C API as device memory the call may use in place (runtime/tensor.h,
MLC_MEMORY_DEVICE_IN_PLACE): the runtime checks each address, waits for the
work queued on the GPU before the call (the caller's streams too), and binds
it in place of the arena's, so that the kernels read the inputs from the
caller's tensors and write the outputs into the tensors returned (or given
with out=): no copy at all.  What it cannot bind (a tensor not 16-byte
aligned, such as a slice at an odd offset; an input that is also an output)
it copies device to device, as it copies every tensor for an artifact whose
runtime predates device binding (MLC_MEMORY_DEVICE).

The artifact's C API (<name>.h) is the contract.  Every call goes through
its checked form (<name>_<entry>_tensors), which checks dtype, shape and
buffer size before touching memory, and every error the runtime reports
becomes an mlc.Error carrying the runtime's message and status code.

ctypes loads shared libraries, and the artifact holds a static archive
(lib<name>.a, the model and the whole runtime): the first load links it
into lib<name>.so next to it with the C compiler (`cc`, or $CC), and later
loads reuse that while it is newer than the archive.  Where the folder is
not writable, the library goes under ~/.cache/mlc/python/ instead.

The entry points and their tensors are read from the comment above each
entry point in <name>.h ("in  x  f32[32, 784]"), which mlc generates in
one fixed form.
"""
__version__ = "0.2.0"  # runtime/version.h's (build.install checks that they agree)

import ctypes
import hashlib
import os
import re
import subprocess
import sys

import numpy as np

__all__ = ["Error", "Model", "load"]

_MAX_RANK = 6

# The plan's dtype codes (runtime/tensor.h) and their numpy types; bf16 is
# passed as its uint16 bits, as the C API does.
_DTYPES = {"f32": (1, np.float32), "bf16": (2, np.uint16), "f16": (3, np.float16), "i32": (4, np.int32),
           "i64": (5, np.int64), "bool": (6, np.bool_)}
_CODE_OF_NUMPY = {np.dtype(np.float32): 1, np.dtype(np.float16): 3, np.dtype(np.int32): 4, np.dtype(np.int64): 5,
                  np.dtype(np.bool_): 6}


# DLPack (dlpack.h): device types, and (type code, bits) of the dtypes mlc has.
_DL_CPU, _DL_CUDA, _DL_CUDA_HOST, _DL_CUDA_MANAGED = 1, 2, 3, 13
_DL_DEVICES = {1: "cpu", 2: "cuda", 3: "cuda_host", 4: "opencl", 7: "vulkan", 8: "metal", 10: "rocm", 13: "cuda_managed"}
_DL_DTYPES = {(2, 32): "f32", (4, 16): "bf16", (2, 16): "f16", (0, 32): "i32", (0, 64): "i64", (6, 8): "bool",
              (1, 8): "bool"}  # torch before 2.2 exports bool as uint8
_DL_NAMES = {0: "int", 1: "uint", 2: "float", 4: "bfloat", 5: "complex", 6: "bool"}
# The torch dtypes of the outputs made for torch inputs.
_TORCH_DTYPES = {"f32": "float32", "bf16": "bfloat16", "f16": "float16", "i32": "int32", "i64": "int64", "bool": "bool"}
_MEMORY_HOST, _MEMORY_DEVICE, _MEMORY_HOST_IN_PLACE, _MEMORY_DEVICE_IN_PLACE = 0, 1, 2, 3  # mlc_memory


class _DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class _DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class _DLTensor(ctypes.Structure):  # the head of DLManagedTensor, which the capsule points to
    _fields_ = [("data", ctypes.c_void_p), ("device", _DLDevice), ("ndim", ctypes.c_int32), ("dtype", _DLDataType),
                ("shape", ctypes.POINTER(ctypes.c_int64)), ("strides", ctypes.POINTER(ctypes.c_int64)),
                ("byte_offset", ctypes.c_uint64)]


_capsule_pointer = ctypes.pythonapi.PyCapsule_GetPointer
_capsule_pointer.restype, _capsule_pointer.argtypes = ctypes.c_void_p, [ctypes.py_object, ctypes.c_char_p]


def _dlpack_device(a):
    """(device type, device id) of an object that speaks DLPack, else None."""
    f = getattr(a, "__dlpack_device__", None)
    if f is None:
        return None
    try:
        dev = f()
        return int(dev[0]), int(dev[1])
    except Exception:  # a producer that cannot say: treat it as an array
        return None


def _device_tensor(a, what):
    """(capsule, _DLTensor) of a GPU tensor, its layout checked: C-contiguous,
    one lane, a dtype mlc has.  The capsule keeps the memory alive; it is
    left named "dltensor", so its destructor gives the tensor back."""
    if getattr(a, "requires_grad", False) and hasattr(a, "detach"):  # torch exports no tensor that requires grad
        a = a.detach()
    try:
        capsule = a.__dlpack__()
    except Exception as e:
        raise TypeError(f"{what}: its __dlpack__() failed: {e}") from None
    ptr = _capsule_pointer(capsule, b"dltensor")
    if not ptr:
        raise TypeError(f"{what}: __dlpack__() gave no DLPack tensor capsule")
    t = ctypes.cast(ptr, ctypes.POINTER(_DLTensor)).contents
    code, bits, lanes = t.dtype.code, t.dtype.bits, t.dtype.lanes
    if lanes != 1 or (code, bits) not in _DL_DTYPES:
        raise TypeError(f"{what} is {_DL_NAMES.get(code, f'type code {code} ')}{bits}"
                        f"{f' x{lanes}' if lanes != 1 else ''} on the GPU, which no mlc dtype matches, and mlc "
                        f"converts no GPU tensor (convert it first, e.g. x.float())")
    if t.ndim > _MAX_RANK:
        raise TypeError(f"{what} has {t.ndim} axes, more than {_MAX_RANK}")
    shape = [t.shape[i] for i in range(t.ndim)]
    if t.strides:
        want, step = [], 1
        for d in reversed(shape):
            want.insert(0, step)
            step *= d
        got = [t.strides[i] for i in range(t.ndim)]
        if any(g != w and d != 1 for g, w, d in zip(got, want, shape)):
            raise ValueError(f"{what} is not contiguous (strides {tuple(got)} in elements, shape {tuple(shape)}): "
                             f"pass x.contiguous()")
    return capsule, t, shape


class Error(RuntimeError):
    """An error the mlc runtime reported: str(e) is its message, e.code its
    status code's name ("INVALID_ARGUMENT", "NOT_FOUND", ...)."""

    def __init__(self, message, code):
        super().__init__(message)
        self.code = code


class _Tensor(ctypes.Structure):  # mlc_tensor (runtime 0.2.0 and later)
    _fields_ = [("dtype", ctypes.c_int), ("rank", ctypes.c_int), ("dims", ctypes.c_int64 * _MAX_RANK),
                ("data", ctypes.c_void_p), ("bytes", ctypes.c_size_t), ("memory", ctypes.c_int), ("device", ctypes.c_int)]


class _Options(ctypes.Structure):  # <name>_options
    _fields_ = [("threads", ctypes.c_int), ("profile", ctypes.c_int), ("device", ctypes.c_int),
                ("alloc", ctypes.c_void_p), ("free", ctypes.c_void_p), ("ctx", ctypes.c_void_p)]  # {0}: malloc


class _Entry:
    """One entry point: its checked C function and its tensors."""

    def __init__(self, name, func, inputs, outputs):
        self.name, self.func, self.inputs, self.outputs = name, func, inputs, outputs


def _parse_header(text, name):
    """[(entry, function, [(name, dtype, shape)] inputs, outputs)] from <name>.h."""
    entries = []
    for m in re.finditer(r"/\* Entry point '(\w+)'\.\n((?: \*   (?:in|out) .*\n)+)(?:.*\n)*?mlc_status (\w+)_tensors\(", text):
        ins, outs = [], []
        for line in m.group(2).splitlines():
            t = re.match(r" \*   (in|out)\s+(\S+)\s+(\w+)\[([0-9, ]*)\]", line)
            if not t or t.group(3) not in _DTYPES:
                raise ValueError(f"{name}.h: cannot read the tensor line '{line.strip()}'")
            shape = tuple(int(d) for d in t.group(4).split(",") if d.strip())
            (ins if t.group(1) == "in" else outs).append((t.group(2), t.group(3), shape))
        entries.append((m.group(1), m.group(3) + "_tensors", ins, outs))
    if not entries:
        raise ValueError(f"{name}.h: no entry points found; is it a header mlc generated?")
    return entries


def _shared_library(folder, name):
    """lib<name>.so linked from lib<name>.a, built when missing or older."""
    archive = os.path.join(folder, f"lib{name}.a")
    if not os.path.exists(archive):
        raise FileNotFoundError(f"{archive}: no such file (a folder `mlc compile --target cpu -o DIR` wrote has it)")
    target = os.path.join(folder, f"lib{name}.so")
    if not os.access(folder, os.W_OK):
        key = hashlib.sha256(os.path.abspath(archive).encode()).hexdigest()[:16]
        cache = os.path.join(os.environ.get("XDG_CACHE_HOME", os.path.expanduser("~/.cache")), "mlc", "python", key)
        os.makedirs(cache, exist_ok=True)
        target = os.path.join(cache, f"lib{name}.so")
    if os.path.exists(target) and os.path.getmtime(target) >= os.path.getmtime(archive):
        return target
    tmp = f"{target}.{os.getpid()}.tmp"
    cmd = [os.environ.get("CC", "cc"), "-shared", "-o", tmp, "-Wl,--whole-archive", archive, "-Wl,--no-whole-archive",
           "-l:libcjson.so.1", "-lpthread", "-lm", "-ldl"]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode:
        raise OSError(f"linking {target} from {archive} failed:\n$ {' '.join(cmd)}\n{r.stderr.strip()}")
    os.replace(tmp, target)  # atomic: a process loading it at the same time sees one or the other
    return target


class Model:
    """A compiled model: a session with its parameters (and optimizer state).
    Use mlc.load(folder) to make one."""

    def __init__(self, folder, name=None, threads=0, profile=False, device=0):
        folder = os.path.abspath(folder)
        if not os.path.isdir(folder):
            raise FileNotFoundError(f"{folder}: no such folder (write one with mlc compile --target cpu -o DIR)")
        if name is None:
            archives = sorted(f[3:-2] for f in os.listdir(folder) if f.startswith("lib") and f.endswith(".a"))
            if len(archives) != 1:
                raise ValueError(f"{folder}: {'no' if not archives else 'several'} lib<name>.a "
                                 f"({', '.join(archives) or 'none'}); pass name=")
            name = archives[0]
        with open(os.path.join(folder, f"{name}.h")) as f:
            header = f.read()
        self.name, self.folder = name, folder
        self._lib = ctypes.CDLL(_shared_library(folder, name))
        lib = self._lib
        lib.mlc_status_message.restype = ctypes.c_char_p
        lib.mlc_status_message.argtypes = [ctypes.c_void_p]
        lib.mlc_status_code.restype = ctypes.c_int
        lib.mlc_status_code.argtypes = [ctypes.c_void_p]
        lib.mlc_status_code_name.restype = ctypes.c_char_p
        lib.mlc_status_code_name.argtypes = [ctypes.c_int]
        lib.mlc_status_free.restype = None
        lib.mlc_status_free.argtypes = [ctypes.c_void_p]
        lib.mlc_runtime_version.restype, lib.mlc_runtime_version.argtypes = ctypes.c_int, []
        self.runtime_version = int(lib.mlc_runtime_version())  # MLC_VERSION_NUMBER: 200 is 0.2.0
        P = ctypes.c_void_p
        for fn, args in (("create", [P, P]), ("load_weights", [P, ctypes.c_char_p]), ("save_weights", [P, ctypes.c_char_p]),
                         ("save_checkpoint", [P, ctypes.c_char_p]), ("load_checkpoint", [P, ctypes.c_char_p])):
            f = getattr(lib, f"{name}_{fn}")
            f.restype, f.argtypes = P, args
        f = getattr(lib, f"{name}_load_weights_memory")
        f.restype, f.argtypes = P, [P, ctypes.c_void_p, ctypes.c_size_t]
        getattr(lib, f"{name}_destroy").argtypes = [P]
        getattr(lib, f"{name}_destroy").restype = None
        getattr(lib, f"{name}_init_weights").argtypes = [P, ctypes.c_uint64]
        getattr(lib, f"{name}_init_weights").restype = None
        getattr(lib, f"{name}_steps").argtypes = [P]
        getattr(lib, f"{name}_steps").restype = ctypes.c_uint64
        getattr(lib, f"{name}_set_schedule_steps").argtypes = [P, ctypes.c_uint64]
        getattr(lib, f"{name}_set_schedule_steps").restype = None
        getattr(lib, f"{name}_schedule_steps").argtypes = [P]
        getattr(lib, f"{name}_schedule_steps").restype = ctypes.c_uint64
        getattr(lib, f"{name}_lr").argtypes = [P]
        getattr(lib, f"{name}_lr").restype = ctypes.c_double
        # the runtime's generate loop (artifacts of a decode block, since mlc_generate): the CLI's sampling
        self._generate = getattr(lib, f"{name}_generate", None)
        if self._generate is not None:
            self._generate.restype = P
            self._generate.argtypes = [P, ctypes.POINTER(ctypes.c_int32), ctypes.c_uint32, ctypes.c_uint32, ctypes.c_double,
                                       ctypes.c_uint32, ctypes.c_uint64, ctypes.POINTER(ctypes.c_int32)]
        self._cpu = getattr(lib, f"{name}_cpu", None)  # CPU artifacts only
        if self._cpu is not None:
            self._cpu.argtypes, self._cpu.restype = [P], ctypes.c_char_p
        # numpy arrays bound in place of the arena's, where the runtime has binding (since
        # mlc_session_bind_input) and the model runs on the CPU; the runtime copies what it cannot bind.
        self._in_place = self._cpu is not None and hasattr(lib, "mlc_session_bind_input")
        # GPU tensors bound the same way where the runtime binds device memory (since mlc_session_is_bound)
        self._device_in_place = hasattr(lib, "mlc_session_is_bound")
        self._entries = {}
        for entry, fname, ins, outs in _parse_header(header, name):
            f = getattr(lib, fname)
            f.restype = P
            f.argtypes = [P] + [ctypes.POINTER(_Tensor)] * (len(ins) + len(outs))
            self._entries[entry] = _Entry(entry, f, ins, outs)
        self._m = None
        opt = _Options(threads, int(profile), device)
        handle = ctypes.c_void_p()
        self._check(getattr(lib, f"{name}_create")(ctypes.byref(opt), ctypes.byref(handle)))
        self._m = handle
        # An ONNX model's values, which mlc compile -o wrote beside the artifact (its header names the file).
        given = re.search(r'#define MLC_MODEL_%s_WEIGHTS "([^"]+)"' % re.escape(name), header)
        if given and os.path.exists(os.path.join(folder, given.group(1))):
            self.load_weights(os.path.join(folder, given.group(1)))

    def _check(self, st):
        if st:
            message = self._lib.mlc_status_message(st).decode()
            code = self._lib.mlc_status_code_name(self._lib.mlc_status_code(st)).decode()
            self._lib.mlc_status_free(st)
            raise Error(message, code)

    def close(self):
        """Frees the model (also done when it is garbage-collected)."""
        if self._m:
            getattr(self._lib, f"{self.name}_destroy")(self._m)
            self._m = None

    def __del__(self):
        if getattr(self, "_m", None):
            self.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    # ---- weights and checkpoints ------------------------------------------

    def init_weights(self, seed=0):
        """PyTorch's default initialisation, from mlc's random stream with this seed."""
        getattr(self._lib, f"{self.name}_init_weights")(self._m, seed)

    def load_weights(self, source):
        """safetensors with PyTorch's state_dict names, dtypes and shapes (strict).
        source is a file's path (str or os.PathLike), or the bytes of such a
        file already in memory: bytes, bytearray, memoryview, mmap or any
        C-contiguous buffer (bytes are always contents, never a path).  Both go
        through the same checks (<name>_load_weights, <name>_load_weights_memory);
        the runtime's errors about bytes name them "weights in memory"."""
        if isinstance(source, (str, os.PathLike)):
            self._check(getattr(self._lib, f"{self.name}_load_weights")(self._m, os.fsencode(source)))
            return
        try:
            data = np.frombuffer(source, dtype=np.uint8)  # a view: the C call copies what it keeps
        except (TypeError, ValueError) as e:
            raise TypeError(f"load_weights takes a path or the bytes of a safetensors file, got "
                            f"{type(source).__name__} ({e})") from None
        # An empty buffer still gets a pointer, so the runtime reports a short file, not a NULL one.
        ptr = data.ctypes.data if data.size else ctypes.cast(ctypes.c_char_p(b""), ctypes.c_void_p)
        self._check(getattr(self._lib, f"{self.name}_load_weights_memory")(self._m, ptr, data.size))

    def save_weights(self, path):
        self._check(getattr(self._lib, f"{self.name}_save_weights")(self._m, os.fsencode(path)))

    def save(self, path):
        """A checkpoint: weights, optimizer state and step count, written atomically with a checksum."""
        self._check(getattr(self._lib, f"{self.name}_save_checkpoint")(self._m, os.fsencode(path)))

    def load(self, path):
        """Reads a checkpoint that save (or mlc train --save) wrote, checking its checksum."""
        self._check(getattr(self._lib, f"{self.name}_load_checkpoint")(self._m, os.fsencode(path)))

    @property
    def steps(self):
        """Optimizer steps taken."""
        return int(getattr(self._lib, f"{self.name}_steps")(self._m))

    @property
    def schedule_steps(self):
        """The learning-rate schedule's length in steps: the optimizer's steps=,
        or what was set here (or carried by a loaded checkpoint); 0 if unknown.
        A decaying schedule without steps= needs it before the first train_step."""
        return int(getattr(self._lib, f"{self.name}_schedule_steps")(self._m))

    @schedule_steps.setter
    def schedule_steps(self, steps):
        steps = int(steps)
        if steps < 0:
            raise ValueError(f"schedule_steps must be 0 or more, got {steps}")
        getattr(self._lib, f"{self.name}_set_schedule_steps")(self._m, steps)

    @property
    def lr(self):
        """The learning rate the next train_step takes (the train block's schedule at this step)."""
        return float(getattr(self._lib, f"{self.name}_lr")(self._m))

    @property
    def cpu(self):
        """The CPU whose build of the kernels runs ("x86-64-v3"): the best of the
        artifact's builds this machine has the features of, picked at load
        (MLC_CPU_MAX=NAME in the environment caps it); None for a GPU model."""
        return self._cpu(self._m).decode() if self._cpu is not None else None

    # ---- entry points -----------------------------------------------------

    def entries(self):
        """{entry: {"inputs": [(name, dtype, shape)], "outputs": [...]}}"""
        return {e.name: {"inputs": list(e.inputs), "outputs": list(e.outputs)} for e in self._entries.values()}

    def run(self, entry, *args, out=None, **kwargs):
        """Runs an entry point, its inputs given in order or by name; returns
        its outputs (one, or a tuple).  Inputs are numpy arrays (or anything
        numpy takes), or tensors on the GPU the model runs on through DLPack
        (a CUDA artifact; torch, CuPy).  Outputs are new numpy arrays when
        every input is in host memory, new torch tensors on the inputs' GPU
        when a torch tensor came from there; out= gives them instead (a
        tensor, or a sequence, one per output: numpy arrays or GPU tensors,
        written in place and returned).  An input named "out" is given by
        position."""
        if entry not in self._entries:
            raise KeyError(f"{self.name} has no entry point '{entry}' (it has {', '.join(self._entries)})")
        e = self._entries[entry]
        names = [n for n, _, _ in e.inputs]
        if len(args) > len(names):
            raise TypeError(f"{entry} takes {len(names)} inputs ({', '.join(names)}), got {len(args)}")
        given = dict(zip(names, args))
        for k, v in kwargs.items():
            if k not in names:
                raise TypeError(f"{entry} has no input '{k}' (its inputs: {', '.join(names)})")
            if k in given:
                raise TypeError(f"{entry}: input '{k}' given twice")
            given[k] = v
        missing = [n for n in names if n not in given]
        if missing:
            raise TypeError(f"{entry}: missing input{'s' if len(missing) > 1 else ''} {', '.join(missing)}")
        keep, tensors, gpu = [], [], None  # gpu: (device id, a torch tensor or None) of the first GPU input
        for n, dtype, _ in e.inputs:
            t, held, dev = self._tensor(given[n], f"{entry}: input '{n}'", dtype, True)
            keep.append(held)
            tensors.append(t)
            if dev is not None and gpu is None:
                gpu = dev
        outs = self._outputs(entry, e, out, gpu)
        for (n, dtype, _), o in zip(e.outputs, outs):
            t, held, _ = self._tensor(o, f"{entry}: output '{n}'", dtype, False)
            keep.append(held)
            tensors.append(t)
        self._check(e.func(self._m, *[ctypes.byref(t) for t in tensors]))
        del keep  # the capsules and arrays, alive until the call is done
        return outs[0] if len(outs) == 1 else tuple(outs)

    def _tensor(self, a, what, dtype, is_input):
        """(mlc_tensor, what keeps its memory alive, (device id, torch tensor or None) or None)."""
        dev = _dlpack_device(a)
        if dev is not None and dev[0] not in (_DL_CPU, _DL_CUDA_HOST):
            if dev[0] not in (_DL_CUDA, _DL_CUDA_MANAGED):
                raise TypeError(f"{what} is a tensor on {_DL_DEVICES.get(dev[0], f'DLPack device type {dev[0]}')}:{dev[1]}; "
                                f"mlc takes host arrays and CUDA tensors")
            if self.runtime_version < 200:  # its mlc_tensor has no memory field: it would read the GPU address as host memory
                v = self.runtime_version
                raise TypeError(f"{what} is on the GPU, but {self.name} was compiled by mlc {v // 10000}.{v // 100 % 100}."
                                f"{v % 100}, whose runtime takes no GPU tensors: compile it again with mlc 0.2.0 or later")
            capsule, t, shape = _device_tensor(a, what)
            code = 2 if dtype == "bf16" and (t.dtype.code, t.dtype.bits) == (1, 16) else \
                _DTYPES[_DL_DTYPES[(t.dtype.code, t.dtype.bits)]][0]
            nbytes = t.dtype.bits // 8
            for d in shape:
                nbytes *= d
            data = (t.data or 0) + t.byte_offset
            torch_like = a if type(a).__module__.split(".")[0] == "torch" else None
            memory = _MEMORY_DEVICE_IN_PLACE if self._device_in_place else _MEMORY_DEVICE
            return (_Tensor(code, t.ndim, (ctypes.c_int64 * _MAX_RANK)(*shape), data, nbytes, memory,
                            t.device.device_id), capsule, (t.device.device_id, torch_like))
        if is_input:
            arr = np.ascontiguousarray(a)
            if np.ndim(a) == 0:  # ascontiguousarray makes a scalar 1-d; a scalar input (decode's pos) is 0-d
                arr = arr.reshape(())
            if arr.dtype == np.float64 and dtype in ("f32", "f16"):  # Python floats and np.array([...]) literals
                arr = arr.astype(_DTYPES[dtype][1])
        else:
            arr = a
            if not isinstance(arr, np.ndarray):
                raise TypeError(f"{what}: out= takes numpy arrays or GPU tensors, got {type(a).__name__}")
            if not arr.flags.c_contiguous or not arr.flags.writeable:
                raise ValueError(f"{what}: the out= array must be C-contiguous and writable")
        code = _CODE_OF_NUMPY.get(arr.dtype)
        if arr.dtype == np.uint16 and dtype == "bf16":
            code = 2
        if code is None:
            raise TypeError(f"{what} is a numpy {arr.dtype} array, which no mlc dtype matches (the model takes {dtype})")
        if arr.ndim > _MAX_RANK:
            raise TypeError(f"{what} has {arr.ndim} axes, more than {_MAX_RANK}")
        memory = _MEMORY_HOST_IN_PLACE if self._in_place else _MEMORY_HOST
        return (_Tensor(code, arr.ndim, (ctypes.c_int64 * _MAX_RANK)(*arr.shape), arr.ctypes.data, arr.nbytes,
                        memory, 0), arr, None)

    def _outputs(self, entry, e, out, gpu):
        """The output buffers: out= as given, or new ones where the inputs are."""
        if out is not None:
            outs = list(out) if isinstance(out, (list, tuple)) else [out]
            if len(outs) != len(e.outputs):
                raise TypeError(f"{entry} has {len(e.outputs)} output{'s' if len(e.outputs) != 1 else ''} "
                                f"({', '.join(n for n, _, _ in e.outputs)}), out= gives {len(outs)}")
            return outs
        if gpu is None:
            return [np.empty(shape, dtype=_DTYPES[dtype][1]) for _, dtype, shape in e.outputs]
        device, like = gpu
        if like is None:
            raise TypeError(f"{entry}: the inputs are GPU tensors but not torch's; give the outputs with out=")
        torch = sys.modules["torch"]
        return [torch.empty(shape, dtype=getattr(torch, _TORCH_DTYPES[dtype]), device=like.device)
                for _, dtype, shape in e.outputs]

    def forward(self, *args, **kwargs):
        """The model's forward on numpy arrays; its output."""
        return self.run("forward", *args, **kwargs)

    def train_step(self, *args, **kwargs):
        """One optimizer step on a batch; the loss (of the weights before the step) as a float.
        With GPU tensors in, the loss alone comes back to the host (4 bytes)."""
        if "train" not in self._entries:
            raise KeyError(f"{self.name} has no train entry (compiled without a train block?)")
        _, dtype, shape = self._entries["train"].outputs[0]
        loss = self.run("train", *args, out=np.empty(shape, dtype=_DTYPES[dtype][1]), **kwargs)
        if dtype == "bf16":  # 16-bit training's loss comes as bf16 bits
            return float((np.array([loss], dtype=np.uint32) << np.uint32(16)).view(np.float32)[0])
        return float(loss)


    def generate(self, prompt, max_new, temperature=0.0, top_k=0, seed=0):
        """New token ids after `prompt` (token ids), with a decode block's
        prefill and step entries, as `mlc generate` does: the prompt in
        chunks of prefill's length (the last padded), then one step per
        token. temperature 0: greedy (the first largest logit, as the
        CLI); above 0: sampled from softmax(logits / temperature) over the
        top_k largest (0: all), seeded by `seed`.  Artifacts that have
        <name>_generate run the runtime's loop, the CLI's: the same tokens
        as `mlc generate --seed` for a seed; older ones run it here, with
        numpy's generator (other samples for the same seed)."""
        if "prefill" not in self._entries or "step" not in self._entries:
            raise KeyError(f"{self.name} has no decode entries (prefill, step): add a decode block to the model")
        prompt = [int(t) for t in prompt]
        if not prompt or max_new < 1:
            raise ValueError("generate needs a prompt of at least one token and max_new >= 1")
        (_, _, (batch, chunk)), _ = self._entries["prefill"].inputs
        vocab = self._entries["prefill"].outputs[0][2][2]
        if min(prompt) < 0 or max(prompt) >= vocab:
            raise ValueError(f"prompt tokens must be in [0, {vocab}): got {min(prompt)}..{max(prompt)}")
        if self._generate is not None:
            p = np.ascontiguousarray(prompt, np.int32)
            out = np.zeros(max_new, np.int32)
            ptr = ctypes.POINTER(ctypes.c_int32)
            self._check(self._generate(self._m, p.ctypes.data_as(ptr), len(prompt), max_new, float(temperature),
                                       int(top_k), int(seed), out.ctypes.data_as(ptr)))
            return [int(t) for t in out]
        rng = np.random.default_rng(seed)

        def pick(logits):
            if temperature <= 0:
                return int(np.argmax(logits))
            z = logits.astype(np.float64) / temperature
            if 0 < top_k < vocab:
                z[z < np.sort(z)[-top_k]] = -np.inf
            p = np.exp(z - z.max())
            return int(rng.choice(vocab, p=p / p.sum()))

        for at in range(0, len(prompt), chunk):
            part = prompt[at:at + chunk]
            tok = np.zeros((batch, chunk), np.int32)
            tok[:, :len(part)] = part
            logits = self.run("prefill", tok, np.array(at, np.int32))[0, len(part) - 1]
        out = [pick(logits)]
        for k in range(1, max_new):
            tok = np.full((batch, 1), out[-1], np.int32)
            out.append(pick(self.run("step", tok, np.array(len(prompt) + k - 1, np.int32))[0, 0]))
        return out


def load(folder, name=None, threads=0, profile=False, device=0):
    """The model in an artifact folder (mlc compile --target cpu -o FOLDER).
    name: which lib<name>.a, where the folder holds several."""
    return Model(folder, name=name, threads=threads, profile=profile, device=device)
