"""--quantize through an artifact: `mlc compile --quantize int4 -o` of
examples/minillm_causal.mdl, loaded by the Python binding, whose session packs
the int4 weights from the f32 ones it initialises (seed 0), must generate the
same greedy tokens as `mlc generate --quantize int4` (same seed), and other
tokens than f32's (the int4 model differs; packing nothing would give all-zero
logits and token 0 throughout).

Usage: quant_python.py MLC MODEL.mdl WORKDIR"""
import os
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))
import mlc as mlcpy  # noqa: E402

exe, model, work = sys.argv[1:4]
os.makedirs(work, exist_ok=True)
PROMPT, NEW = [1, 2, 3, 4, 5], 16


def cli(extra):
    r = subprocess.run([exe, "generate", model, "--prompt", ",".join(map(str, PROMPT)), "--max-new", str(NEW), *extra],
                       capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"mlc generate failed ({r.returncode}):\n{r.stderr}")
    return [int(t) for t in r.stdout.splitlines()[0].split()[1:]]


art = os.path.join(work, "art")
r = subprocess.run([exe, "compile", model, "--target", "cpu", "--cpu", "native", "--quantize", "int4", "-o", art],
                   capture_output=True, text=True)
if r.returncode != 0:
    sys.exit(f"mlc compile failed ({r.returncode}):\n{r.stderr}")
got = mlcpy.load(art).generate(PROMPT, NEW)
want, f32 = cli(["--quantize", "int4"]), cli([])
print("artifact int4:", got)
print("mlc generate int4:", want)
print("mlc generate f32:", f32)
if got != want or got == f32 or set(got) == {0}:
    sys.exit("FAIL")
print("ok")
