"""numpy arrays in and out of a CPU model without copies (issue 26,
docs/notes/zero-copy-tensors.md): runtime/session.h's mlc_session_bind_input
and bind_output, and the Python binding's use of them.

Two models, as tests/unit/test_bind.c has them: `view`, whose input x is
reshaped before its matmul (a view of the input) and whose first output is
a reshape of the matmul's result (input z is also an output, so it is
copied); and `reuse`, whose output takes the bytes of an earlier value,
dead by then (a reuse, not a view).  Each is compiled into a CPU artifact.
- Through the artifact's own runtime (ctypes on lib<name>.so: a session of
  the plan in <name>.c, kernels found in the library): a numpy input bound,
  then written before the run, is read by the run with its new values,
  which a copy would not have; a numpy output bound is filled by the run,
  with no output_tensor; both are those of the copying path bit for bit.
- Through mlc.load: forward passes numpy arrays as host memory to use in
  place (MLC_MEMORY_HOST_IN_PLACE), and its outputs, new or given with
  out=, are the copying path's (the same artifact with the binding off)
  bit for bit, over several calls; so are those of arrays only 16-byte
  aligned (bound) and of arrays the runtime cannot bind (4 bytes off
  alignment), which it copies.
Skipped (77) under MLC_SANITIZED=1: the binding would dlopen the
artifact's ASan-instrumented runtime into a python3 without ASan.

Usage: zero_copy.py MLC REPO_ROOT WORKDIR"""
import ctypes
import os
import re
import subprocess
import sys

import numpy as np

VIEW = """config { n = 8  d = 16 }
module V(n, d) {
    param w: f32[n, n] = normal(0, 1)
    forward(x: f32[n, d], z: f32[n, d]) {
        h = reshape(x, [d, n])
        y = matmul(h, w)
        zf = reshape(z, [n * d])
        return reshape(y, [n, d]), zf, reshape(w, [n * n])
    }
}
"""

REUSE = """config { n = 32 }
module R(n) {
    forward(x: f32[n, n]) {
        a = matmul(x, x)
        b = matmul(a, x)
        c = matmul(b, x)
        return c
    }
}
"""

failures = 0


def check(what, ok, detail=""):
    global failures
    print(f"{'ok  ' if ok else 'FAIL'} {what}")
    if not ok:
        failures += 1
        if detail:
            print(f"     {detail}")


def aligned(shape, offset=0):
    """A float32 array whose data starts `offset` bytes past a 64-byte boundary."""
    n = int(np.prod(shape)) * 4
    raw = np.zeros(n + 128, np.uint8)
    at = (-raw.ctypes.data) % 64 + offset
    return raw[at:at + n].view(np.float32).reshape(shape)


def same(a, b):
    return a.shape == b.shape and np.array_equal(a.view(np.uint32), b.view(np.uint32))


class Allocator(ctypes.Structure):  # mlc_allocator
    _fields_ = [("alloc", ctypes.c_void_p), ("free", ctypes.c_void_p), ("ctx", ctypes.c_void_p)]


Lookup = ctypes.CFUNCTYPE(ctypes.c_void_p, ctypes.c_void_p, ctypes.c_char_p)  # mlc_symbol_lookup


class SessionOptions(ctypes.Structure):  # mlc_session_options
    _fields_ = [("device", ctypes.c_void_p), ("lookup", Lookup), ("lookup_ctx", ctypes.c_void_p), ("threads", ctypes.c_int),
                ("profile", ctypes.c_bool), ("allocator", Allocator), ("comm", ctypes.c_void_p)]


class Session:
    """A session of the artifact's plan (its baseline build, whose kernels
    lib<name>.so exports under their own names) on the artifact's runtime."""

    def __init__(self, lib, c_source):
        m = re.search(r"plan_bytes0\[(\d+)\] = \{(.*?)\};", c_source, re.S)
        plan = bytes(int(t) for t in m.group(2).split(",") if t.strip())
        assert len(plan) == int(m.group(1))
        self.lib = lib
        V, S, P = ctypes.c_void_p, ctypes.c_size_t, ctypes.c_char_p
        for fn, res, args in (("mlc_allocator_default", Allocator, []),
                              ("mlc_plan_parse", V, [V, S, Allocator, ctypes.POINTER(V)]),
                              ("mlc_session_create", V, [V, ctypes.POINTER(SessionOptions), ctypes.POINTER(V)]),
                              ("mlc_session_init_params", None, [V, ctypes.c_uint64]),
                              ("mlc_session_set_input", V, [V, P, P, V, S]),
                              ("mlc_session_bind_input", V, [V, P, P, V, S]),
                              ("mlc_session_bind_output", V, [V, P, P, V, S]),
                              ("mlc_session_run", V, [V, P]),
                              ("mlc_session_output", V, [V, P, P, ctypes.POINTER(V), ctypes.POINTER(V)]),
                              ("mlc_session_destroy", None, [V]), ("mlc_plan_free", None, [V]),
                              ("mlc_status_message", P, [V]), ("mlc_status_free", None, [V])):
            f = getattr(lib, fn)
            f.restype, f.argtypes = res, args
        self.lookup = Lookup(lambda ctx, sym: ctypes.cast(lib[sym.decode()], ctypes.c_void_p).value)
        self.plan, self.s = ctypes.c_void_p(), ctypes.c_void_p()
        self.ok(lib.mlc_plan_parse(plan, len(plan), lib.mlc_allocator_default(), ctypes.byref(self.plan)))
        opt = SessionOptions(None, self.lookup, None, 1, False, Allocator(), None)
        self.ok(lib.mlc_session_create(self.plan, ctypes.byref(opt), ctypes.byref(self.s)))
        lib.mlc_session_init_params(self.s, 0)

    def ok(self, st):
        if st:
            msg = self.lib.mlc_status_message(st).decode()
            self.lib.mlc_status_free(st)
            raise RuntimeError(msg)

    def set_input(self, name, a):
        self.ok(self.lib.mlc_session_set_input(self.s, b"forward", name.encode(), a.ctypes.data, a.nbytes))

    def bind_input(self, name, a):
        self.ok(self.lib.mlc_session_bind_input(self.s, b"forward", name.encode(), a.ctypes.data, a.nbytes))

    def bind_output(self, name, a):
        self.ok(self.lib.mlc_session_bind_output(self.s, b"forward", name.encode(), a.ctypes.data, a.nbytes))

    def run(self):
        self.ok(self.lib.mlc_session_run(self.s, b"forward"))

    def output(self, name, shape):
        data, sh = ctypes.c_void_p(), ctypes.c_void_p()
        self.ok(self.lib.mlc_session_output(self.s, b"forward", name.encode(), ctypes.byref(data), ctypes.byref(sh)))
        return np.frombuffer(ctypes.string_at(data.value, int(np.prod(shape)) * 4), np.float32).reshape(shape).copy()

    def close(self):
        self.lib.mlc_session_destroy(self.s)
        self.lib.mlc_plan_free(self.plan)


def main():
    mlc, root, work = sys.argv[1], sys.argv[2], os.path.abspath(sys.argv[3])
    if os.environ.get("MLC_SANITIZED") == "1":
        print("skip: the Python binding under the sanitizers (it would dlopen an ASan-instrumented runtime)")
        return 77
    sys.path.insert(0, os.path.join(root, "python"))
    import mlc as mlcpy
    os.makedirs(work, exist_ok=True)
    arts = {}
    for name, src in (("view", VIEW), ("reuse", REUSE)):
        path = os.path.join(work, f"{name}.mdl")
        with open(path, "w") as f:
            f.write(src)
        out = os.path.join(work, name)
        r = subprocess.run([mlc, "compile", path, "--target", "cpu", "-o", out], capture_output=True, text=True)
        if r.returncode:
            print(r.stderr)
            return 1
        arts[name] = out
    rng = np.random.default_rng(0)
    x0, x1, z = (rng.standard_normal((8, 16)).astype(np.float32) for _ in range(3))

    # The artifact's own runtime, through ctypes: bind, then write, then run.
    m = mlcpy.load(arts["view"])  # links libv.so
    with open(os.path.join(arts["view"], "v.c")) as f:
        s = Session(m._lib, f.read())
    s.set_input("x", x1), s.set_input("z", z), s.run()
    ref1 = s.output("output0", (8, 16))
    s.set_input("x", x0), s.run()  # the arena holds x0 from here on
    ref0 = s.output("output0", (8, 16))
    xb, ob = aligned((8, 16)), aligned((8, 16))
    xb[...] = x0
    s.bind_input("x", xb)
    xb[...] = x1  # after the binding: a copy would not see it
    s.bind_output("output0", ob)
    s.run()
    check("view: a numpy input bound, then written, is read by the run as written (output0 = the copying path's "
          "for the new values, bit for bit)", same(ob, ref1) and not same(ref0, ref1))
    check("view: the bound numpy output is filled by the run, no output_tensor", same(ob, ref1))
    s.run()  # the bindings lasted one run: the arena's x0 again, the arena's output
    check("view: the bindings last one run", same(s.output("output0", (8, 16)), ref0) and same(ob, ref1))
    s.close()

    # mlc.load: bound where the runtime can, against the same artifact with the binding off.
    copy = mlcpy.load(arts["view"])
    copy._in_place = False
    t = m._tensor(xb, "x", "f32", True)[0]
    check("Model passes numpy arrays to a CPU model as host memory to use in place (MLC_MEMORY_HOST_IN_PLACE)",
          m._in_place and t.memory == 2, f"_in_place {m._in_place}, memory {t.memory}")
    ok, detail = True, ""
    for k, x in enumerate((x0, x1, x0 * 3)):
        xa, za = aligned(x.shape), aligned(z.shape)
        xa[...], za[...] = x, z
        got, want = m.forward(xa, za), copy.forward(x, z)
        outs = [aligned((8, 16)), aligned((128,)), aligned((64,))]
        given = m.forward(xa, za, out=outs)
        ok &= all(same(g, w) for g, w in zip(got, want)) and all(a is b for a, b in zip(given, outs)) and \
            all(same(g, w) for g, w in zip(given, want))
        odd = aligned(x.shape, offset=4)  # not 16-byte aligned: copied
        odd[...] = x
        ok &= all(same(g, w) for g, w in zip(m.forward(odd, za), want))
        x16, o16 = aligned(x.shape, offset=16), aligned((8, 16), offset=16)  # 16 bytes, no more: bound
        x16[...] = x
        ok &= same(m.forward(x16, za, out=[o16, aligned((128,)), aligned((64,))])[0], want[0])
        ok &= same(m.forward(xa, za)[1], z.reshape(-1))  # zf: z, which is also an output, copied
    check("view: forward's outputs (new arrays, out=, inputs 4 and 16 bytes off a 64-byte boundary) are the copying "
          "path's bit for bit, 3 calls",
          ok, detail)

    m, copy = mlcpy.load(arts["reuse"]), mlcpy.load(arts["reuse"])
    copy._in_place = False
    ok = True
    for k in range(3):
        x = aligned((32, 32))
        x[...] = rng.standard_normal((32, 32)).astype(np.float32) * 0.3
        out = aligned((32, 32))
        ok &= same(m.forward(x), copy.forward(x)) and same(m.forward(x, out=out), copy.forward(x))
    check("reuse: the output, bound over bytes an earlier value used, is the copying path's bit for bit, 3 calls", ok)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
