"""mlc from Python: a compiled model's artifact through ctypes.

    import mlc
    m = mlc.load("out/mlp")               # the folder `mlc compile --target cpu -o out/mlp` wrote
    m.load_weights("w.safetensors")       # PyTorch names, dtypes and shapes
    m.load_weights(open("w.safetensors", "rb").read())   # or the file's bytes, from memory
    y = m.forward(x)                      # numpy arrays in, numpy arrays out
    loss = m.train_step(x, labels)        # one optimizer step; the loss before it
    m.save("ckpt")                        # weights, optimizer state and step count

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
import ctypes
import hashlib
import os
import re
import subprocess

import numpy as np

__all__ = ["Error", "Model", "load"]

_MAX_RANK = 6

# The plan's dtype codes (runtime/tensor.h) and their numpy types; bf16 is
# passed as its uint16 bits, as the C API does.
_DTYPES = {"f32": (1, np.float32), "bf16": (2, np.uint16), "f16": (3, np.float16), "i32": (4, np.int32),
           "i64": (5, np.int64), "bool": (6, np.bool_)}
_CODE_OF_NUMPY = {np.dtype(np.float32): 1, np.dtype(np.float16): 3, np.dtype(np.int32): 4, np.dtype(np.int64): 5,
                  np.dtype(np.bool_): 6}


class Error(RuntimeError):
    """An error the mlc runtime reported: str(e) is its message, e.code its
    status code's name ("INVALID_ARGUMENT", "NOT_FOUND", ...)."""

    def __init__(self, message, code):
        super().__init__(message)
        self.code = code


class _Tensor(ctypes.Structure):  # mlc_tensor
    _fields_ = [("dtype", ctypes.c_int), ("rank", ctypes.c_int), ("dims", ctypes.c_int64 * _MAX_RANK),
                ("data", ctypes.c_void_p), ("bytes", ctypes.c_size_t)]


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
        self._cpu = getattr(lib, f"{name}_cpu", None)  # CPU artifacts only
        if self._cpu is not None:
            self._cpu.argtypes, self._cpu.restype = [P], ctypes.c_char_p
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

    def run(self, entry, *args, **kwargs):
        """Runs an entry point on numpy arrays, given in the order of its
        inputs or by name; returns its outputs (one array, or a tuple)."""
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
        keep, tensors = [], []
        for n, dtype, _ in e.inputs:
            a = np.ascontiguousarray(given[n])
            if np.ndim(given[n]) == 0:  # ascontiguousarray makes a scalar 1-d; a scalar input (decode's pos) is 0-d
                a = a.reshape(())
            if a.dtype == np.float64 and dtype in ("f32", "f16"):  # Python floats and np.array([...]) literals
                a = a.astype(_DTYPES[dtype][1])
            code = _CODE_OF_NUMPY.get(a.dtype)
            if a.dtype == np.uint16 and dtype == "bf16":
                code = 2
            if code is None:
                raise TypeError(f"{entry}: input '{n}' is a numpy {a.dtype} array, which no mlc dtype matches "
                                f"(the model takes {dtype})")
            if a.ndim > _MAX_RANK:
                raise TypeError(f"{entry}: input '{n}' has {a.ndim} axes, more than {_MAX_RANK}")
            keep.append(a)
            tensors.append(_Tensor(code, a.ndim, (ctypes.c_int64 * _MAX_RANK)(*a.shape), a.ctypes.data, a.nbytes))
        outs = []
        for n, dtype, shape in e.outputs:
            a = np.empty(shape, dtype=_DTYPES[dtype][1])
            outs.append(a)
            tensors.append(_Tensor(_DTYPES[dtype][0], len(shape), (ctypes.c_int64 * _MAX_RANK)(*shape), a.ctypes.data,
                                   a.nbytes))
        self._check(e.func(self._m, *[ctypes.byref(t) for t in tensors]))
        del keep
        return outs[0] if len(outs) == 1 else tuple(outs)

    def forward(self, *args, **kwargs):
        """The model's forward on numpy arrays; its output."""
        return self.run("forward", *args, **kwargs)

    def train_step(self, *args, **kwargs):
        """One optimizer step on a batch; the loss (of the weights before the step) as a float."""
        loss = self.run("train", *args, **kwargs)
        if self._entries["train"].outputs[0][1] == "bf16":  # 16-bit training's loss comes as bf16 bits
            return float((np.array([loss], dtype=np.uint32) << np.uint32(16)).view(np.float32)[0])
        return float(loss)


    def generate(self, prompt, max_new, temperature=0.0, top_k=0, seed=0):
        """New token ids after `prompt` (token ids), with a decode block's
        prefill and step entries, as `mlc generate` does: the prompt in
        chunks of prefill's length (the last padded), then one step per
        token. temperature 0: greedy (the first largest logit, as the
        CLI); above 0: sampled from softmax(logits / temperature) over the
        top_k largest (0: all) with numpy's generator seeded by `seed`
        (not the CLI's generator: other samples for the same seed)."""
        if "prefill" not in self._entries or "step" not in self._entries:
            raise KeyError(f"{self.name} has no decode entries (prefill, step): add a decode block to the model")
        prompt = [int(t) for t in prompt]
        if not prompt or max_new < 1:
            raise ValueError("generate needs a prompt of at least one token and max_new >= 1")
        (_, _, (batch, chunk)), _ = self._entries["prefill"].inputs
        vocab = self._entries["prefill"].outputs[0][2][2]
        if min(prompt) < 0 or max(prompt) >= vocab:
            raise ValueError(f"prompt tokens must be in [0, {vocab}): got {min(prompt)}..{max(prompt)}")
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
