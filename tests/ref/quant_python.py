"""--quantize through an artifact: `mlc compile --quantize int4 -o` of
examples/minillm_causal.mdl, loaded by the Python binding, whose session packs
the int4 weights from the f32 ones it initialises (seed 0), must generate the
same greedy tokens as `mlc generate --quantize int4` (same seed), and other
tokens than f32's (the int4 model differs; packing nothing would give all-zero
logits and token 0 throughout).  Then for int4 and int4:asym (whose plan tells
the session to pack the asymmetric form): the artifact's prefill logits after
the prompt equal `mlc generate --logits`'s first row (1e-5 relative) and stand
off f32's (over 1e-3: the weights are quantised; a session that packed the
other scheme would give garbage, one that packed nothing zeros).

Usage: quant_python.py MLC MODEL.mdl WORKDIR"""
import os
import subprocess
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))
import mlc as mlcpy  # noqa: E402

exe, model, work = sys.argv[1:4]
os.makedirs(work, exist_ok=True)
PROMPT, NEW = [1, 2, 3, 4, 5], 16


def cli(extra, logits=None):
    r = subprocess.run([exe, "generate", model, "--prompt", ",".join(map(str, PROMPT)), "--max-new", str(NEW), *extra,
                        *(["--logits", logits] if logits else [])], capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"mlc generate failed ({r.returncode}):\n{r.stderr}")
    return [int(t) for t in r.stdout.splitlines()[0].split()[1:]]


def compile_artifact(q):
    art = os.path.join(work, "art_" + q.replace(":", "_"))
    r = subprocess.run([exe, "compile", model, "--target", "cpu", "--cpu", "native", "--quantize", q, "-o", art],
                       capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"mlc compile failed ({r.returncode}):\n{r.stderr}")
    return art


got = mlcpy.load(compile_artifact("int4")).generate(PROMPT, NEW)
want, f32 = cli(["--quantize", "int4"]), cli([], os.path.join(work, "logits_f32.bin"))
print("artifact int4:", got)
print("mlc generate int4:", want)
print("mlc generate f32:", f32)
failed = got != want or got == f32 or set(got) == {0}
z32 = np.fromfile(os.path.join(work, "logits_f32.bin"), dtype=np.float32).reshape(NEW, -1)[0]
for q in ("int4", "int4:asym"):
    m = mlcpy.load(compile_artifact(q))
    (_, _, (batch, chunk)), _ = m.entries()["prefill"]["inputs"]
    tok = np.zeros((batch, chunk), np.int32)
    tok[:, :len(PROMPT)] = PROMPT
    z = m.run("prefill", tok, np.array(0, np.int32))[0, len(PROMPT) - 1]
    path = os.path.join(work, f"logits_{q.replace(':', '_')}.bin")
    cli(["--quantize", q], path)
    zc = np.fromfile(path, dtype=np.float32).reshape(NEW, -1)[0]
    err, off = np.abs(z - zc).max() / np.abs(zc).max(), np.abs(z - z32).max() / np.abs(z32).max()
    ok = err <= 1e-5 and off > 1e-3
    print(f"{'ok' if ok else 'FAIL'}: {q}: the artifact's prefill logits against mlc generate's {err:.2e} (tol 1e-5), "
          f"against f32's {off:.2e} (over 1e-3)")
    failed |= not ok
if failed:
    sys.exit("FAIL")
print("ok")
