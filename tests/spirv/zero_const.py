#!/usr/bin/python3
"""Float arithmetic with a constant zero on the spirv target, against the cpu target.

    zero_const.py MLC WORKDIR

spirv-opt and lavapipe fold x * 0 to 0, 0 / x to 0, x + 0 to x and 0 - x
to -x, which IEEE arithmetic does not allow for an infinity, a NaN or a
zero x (ONNX's IsInf, built on x * 0, gave all zeros).  Each expression
runs on both targets with such inputs; the results must have the same bits,
any NaN matching any NaN.  Exit status 77 when no Vulkan driver is there.
"""
import os
import struct
import subprocess
import sys

EXPRS = ["x * 0.0", "0.0 * x", "x * -0.0", "0.0 / x", "-0.0 / x", "x + 0.0", "0.0 + x", "0.0 - x", "x - -0.0",
         "x - 0.0", "(x * 0.0) * 2.0"]
XS = [-1.2, float("nan"), float("inf"), 2.8, float("-inf"), 0.0, -0.0, 1e-40]


def words(path):
    data = open(path, "rb").read()
    return struct.unpack("<%dI" % (len(data) // 4), data)


def is_nan(w):
    return (w & 0x7fffffff) > 0x7f800000


def main():
    mlc, work = sys.argv[1], sys.argv[2]
    os.makedirs(work, exist_ok=True)
    x = os.path.join(work, "x.bin")
    open(x, "wb").write(struct.pack("<%df" % len(XS), *XS))
    bad = 0
    for i, e in enumerate(EXPRS):
        mdl = os.path.join(work, "m%d.mdl" % i)
        open(mdl, "w").write("module M() {\n    forward(x: f32[%d]) {\n        return %s\n    }\n}\n" % (len(XS), e))
        out = {}
        for t in ("cpu", "spirv"):
            out[t] = os.path.join(work, "y%d_%s.bin" % (i, t))
            r = subprocess.run([mlc, "run", mdl, "--target", t, "--input", "x=" + x, "--output", "output=" + out[t]],
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
            if r.returncode == 4 and t == "spirv":
                print("SKIP: no Vulkan driver")
                return 77
            if r.returncode:
                print("FAIL %s --target %s: %s" % (e, t, r.stderr.strip()))
                return 1
        a, b = words(out["cpu"]), words(out["spirv"])
        ok = all(p == q or (is_nan(p) and is_nan(q)) for p, q in zip(a, b))
        print("%s %s: cpu %s spirv %s" % ("PASS" if ok else "FAIL", e, " ".join("%08x" % w for w in a),
                                          " ".join("%08x" % w for w in b)))
        bad += not ok
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
