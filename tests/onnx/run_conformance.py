#!/usr/bin/python3
"""The ONNX backend node tests that Debian ships (libonnx-testdata), run through mlc.

Each test folder holds model.onnx and test_data_set_*/{input,output}_*.pb.  For
every data set the runner writes the inputs as raw little-endian files, runs
`mlc run model.onnx --target T --input NAME=FILE ... --output NAME=FILE`, and
compares each output with the expected one as ONNX's own backend runner does
(numpy.testing: rtol 1e-3, atol 1e-7, NaNs equal).

Operands that mlc needs at compile time (a Reshape's shape, a Slice's starts)
are graph inputs in many node tests.  mlc says so ("graph input 'X' ... must be
known at compile time"); the runner then moves that input into the model's
initializers with the data set's value (as TVM's and other compilers' ONNX
runners freeze them) and compiles again.

Every test ends as one of
  PASS         every output of every data set matches
  FAIL         mlc ran it and an output differs: a real mismatch
  UNSUPPORTED  mlc refused it with a clear error: an op, a dtype, an opset, an
               attribute or a value it does not lower (the reason is printed)
  ERROR        anything else: a crash, an internal error, a codegen failure

and the last line is the summary.  With --expected FILE and --check, the exit
status is 1 when a test listed in FILE does not pass (a regression).

  tests/onnx/run_conformance.py --mlc build/mlc [--suite node] [--target cpu]
      [--jobs 2] [--expected tests/onnx/expected_pass.txt [--only-expected] [--check]]
      [--write-passes FILE] [--filter REGEX] [--record DIR]

--record DIR keeps, for every test that passes, what its run needed: per data
set the model as mlc compiled it (with any inputs frozen), the inputs as raw
files, the expected outputs as .npy and the command's arguments (manifest.json).
tests/onnx/replay.py runs such a folder on another target where neither the
test data nor the onnx package is installed (the GPU machine).
"""
import argparse
import collections
import concurrent.futures
import os
import re
import json
import shutil
import subprocess
import sys
import tempfile

import numpy as np
import onnx
from onnx import numpy_helper

DATA = "/usr/share/libonnx-testdata/data"
SUITES = ["node", "pytorch-converted", "pytorch-operator", "simple"]


def c_name(s):
    """An ONNX name as mlc spells inputs and outputs (frontend/onnx/onnx.h)."""
    out = "".join(c if (c.isascii() and (c.isalnum() or c == "_")) else "_" for c in s)
    return "t" + out if not s or s[0].isdigit() else out


def read_pb(path):
    t = onnx.TensorProto()
    with open(path, "rb") as f:
        t.ParseFromString(f.read())
    return t


def classify(stderr, rc):
    """(status, reason) from a failed mlc run."""
    m = re.search(r"\((\w+), opset \d+\): unsupported op$", stderr, re.M)
    if m:
        return "UNSUPPORTED", "op " + m.group(1)
    m = re.search(r"unsupported op \(domain '([^']*)'\)", stderr)
    if m:
        return "UNSUPPORTED", "domain " + m.group(1)
    m = re.search(r"imports opset (-?\d+) of the default domain", stderr)
    if m:
        return "UNSUPPORTED", "opset " + m.group(1)
    m = re.search(r"unsupported dtype (\w+)", stderr)
    if m:
        return "UNSUPPORTED", "dtype " + m.group(1)
    m = re.search(r"\((\w+), opset \d+\): unsupported opset: ", stderr)
    if m:
        return "UNSUPPORTED", "opset (%s before the opset mlc follows)" % m.group(1)
    m = re.search(r"imports no opset of the default domain", stderr)
    if m:
        return "UNSUPPORTED", "opset (none of ai.onnx)"
    m = re.search(r"has rank \d+; mlc supports at most", stderr)
    if m:
        return "UNSUPPORTED", "limit (rank above 6)"
    m = re.search(r"of size 0; mlc needs positive sizes|mlc has no empty tensors|-D \w+=0: a dimension must", stderr)
    if m:
        return "UNSUPPORTED", "limit (empty tensor)"
    m = re.search(r"\((\w+), opset \d+\): unsupported attribute '([^']*)'", stderr)
    if m:
        return "UNSUPPORTED", "attribute %s.%s" % (m.group(1), m.group(2))
    m = re.search(r"\((\w+), opset \d+\): (.*)", stderr)
    if m and rc == 1:
        msg = m.group(2)
        if re.search(r"not defined for (bool|integer)|must be float|needs? (a )?float|float matri", msg):
            return "UNSUPPORTED", "dtype (%s: %s)" % (m.group(1), msg)
        return "UNSUPPORTED", "value (%s: %s)" % (m.group(1), msg)
    last = stderr.strip().splitlines()[-1] if stderr.strip() else "exit status %d" % rc
    return "ERROR", last[:200]


def record_set(rec, s, path, args, inputs, expected):
    """Copies one passing data set into rec/<set>: the model, the inputs, the
    expected outputs and the arguments, with the files named relative to it."""
    d = os.path.join(rec, s)
    os.makedirs(d, exist_ok=True)
    shutil.copyfile(path, os.path.join(d, "model.onnx"))
    for f in inputs:
        shutil.copyfile(f, os.path.join(d, os.path.basename(f)))
    outs = []
    for name, want in expected:
        np.save(os.path.join(d, "want_%s.npy" % c_name(name)), want)
        outs.append(c_name(name))
    with open(os.path.join(d, "manifest.json"), "w") as f:
        json.dump({"args": args, "outputs": outs}, f)


def run_one(mlc, target, test_dir, work, rec=None):
    """Runs every data set of one test; returns (status, reason).  With rec,
    a passing test's data sets are recorded there (record_set)."""
    model_path = os.path.join(test_dir, "model.onnx")
    try:
        model = onnx.load(model_path)
    except Exception as e:  # noqa: BLE001 - a model onnx itself cannot load
        return "ERROR", "onnx.load: %s" % e
    for vi in list(model.graph.input) + list(model.graph.output):
        kind = vi.type.WhichOneof("value")
        if kind != "tensor_type":
            return "UNSUPPORTED", "type (%s '%s': mlc has tensors only)" % (kind, vi.name)
    inits = {t.name for t in model.graph.initializer}
    declared = {}
    for vi in model.graph.input:
        dims = vi.type.tensor_type.shape.dim
        if all(d.HasField("dim_value") for d in dims):
            declared[vi.name] = tuple(d.dim_value for d in dims)
    graph_inputs = [i.name for i in model.graph.input if i.name not in inits]
    outputs = [o.name for o in model.graph.output]
    sets = sorted(d for d in os.listdir(test_dir) if d.startswith("test_data_set_"))
    if not sets:
        return "ERROR", "no test_data_set"
    os.makedirs(work, exist_ok=True)
    for s in sets:
        sd = os.path.join(test_dir, s)
        ins = sorted((f for f in os.listdir(sd) if f.startswith("input_")), key=lambda f: int(f[6:-3]))
        outs = sorted((f for f in os.listdir(sd) if f.startswith("output_")), key=lambda f: int(f[7:-3]))
        values = {}
        for k, f in enumerate(ins):
            t = read_pb(os.path.join(sd, f))
            values[t.name or graph_inputs[k]] = numpy_helper.to_array(t)
        for name, arr in values.items():
            if name in declared and tuple(arr.shape) != declared[name]:
                # mlc compiles the shapes the model declares; this data does not have them
                return "UNSUPPORTED", "data (input '%s' is %s in %s, the model declares %s)" % (
                    name, list(arr.shape), s, list(declared[name]))
        expected = []
        for k, f in enumerate(outs):
            t = read_pb(os.path.join(sd, f))
            expected.append((t.name or outputs[k], numpy_helper.to_array(t)))
        frozen = []
        for _ in range(8):
            path = model_path
            if frozen:
                m = onnx.ModelProto()
                m.CopyFrom(model)
                keep = [i for i in m.graph.input if i.name not in frozen]
                del m.graph.input[:]
                m.graph.input.extend(keep)
                for name in frozen:
                    m.graph.initializer.append(numpy_helper.from_array(values[name], name))
                path = os.path.join(work, "frozen.onnx")
                onnx.save(m, path)
            cmd = [mlc, "run", path, "--target", target]
            args, inputs = [], []  # for --record: the arguments after the target, files by base name
            # symbolic dimensions: bound with -D from the data set's shapes
            syms = {}
            for vi in model.graph.input:
                for k, d in enumerate(vi.type.tensor_type.shape.dim):
                    if d.HasField("dim_param") and vi.name in values and k < values[vi.name].ndim:
                        syms[d.dim_param] = values[vi.name].shape[k]
            for name, v in sorted(syms.items()):
                cmd += ["-D", "%s=%d" % (name, v)]
                args += ["-D", "%s=%d" % (name, v)]
            for name, arr in values.items():
                if name in frozen or arr.dtype == object:  # strings: mlc refuses the model first
                    continue
                f = os.path.join(work, "in_%s.bin" % c_name(name))
                np.ascontiguousarray(arr).astype(arr.dtype.newbyteorder("<"), copy=False).tofile(f)
                cmd += ["--input", "%s=%s" % (c_name(name), f)]
                args += ["--input", "%s=%s" % (c_name(name), os.path.basename(f))]
                inputs.append(f)
            for name, _ in expected:
                cmd += ["--output", "%s=%s" % (c_name(name), os.path.join(work, "out_%s.bin" % c_name(name)))]
            try:
                p = subprocess.run(cmd, capture_output=True, text=True, errors="replace", timeout=300)
            except subprocess.TimeoutExpired:
                return "ERROR", "timeout"
            if p.returncode == 0:
                break
            m = re.search(r"graph input '([^']+)', which must be known at compile time", p.stderr)
            if m and m.group(1) in values and m.group(1) not in frozen:
                frozen.append(m.group(1))
                continue
            return classify(p.stderr, p.returncode)
        else:
            return "ERROR", "too many inputs to freeze"
        for name, want in expected:
            f = os.path.join(work, "out_%s.bin" % c_name(name))
            got = np.fromfile(f, dtype=want.dtype.newbyteorder("<"))
            if got.size != want.size:
                return "FAIL", "%s: %d elements, expected %d" % (name, got.size, want.size)
            got = got.reshape(want.shape)
            try:
                np.testing.assert_allclose(got, want, rtol=1e-3, atol=1e-7, equal_nan=True)
            except AssertionError:
                err = np.abs(got.astype(np.float64) - want.astype(np.float64))
                return "FAIL", "%s (%s): max abs error %.3g" % (name, s, float(np.nanmax(err)))
        if rec:
            # the next data set may overwrite frozen.onnx and the inputs: copy now
            record_set(rec, s, path, args, inputs, expected)
    return "PASS", ""


def sample_arg(text):
    """K/N with 0 <= K < N, for --sample."""
    m = re.fullmatch(r"(\d+)/(\d+)", text)
    if not m or int(m.group(2)) == 0 or int(m.group(1)) >= int(m.group(2)):
        raise argparse.ArgumentTypeError("expected K/N with 0 <= K < N, got %r" % text)
    return int(m.group(1)), int(m.group(2))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--mlc", required=True)
    ap.add_argument("--data", default=DATA)
    ap.add_argument("--suite", action="append", help="node, pytorch-converted, pytorch-operator, simple (default: all)")
    ap.add_argument("--target", default="cpu")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--filter", help="only tests whose name matches this regex")
    ap.add_argument("--expected", help="file of suite/test names expected to pass")
    ap.add_argument("--only-expected", action="store_true", help="run only the tests in --expected")
    ap.add_argument("--check", action="store_true", help="exit 1 if a test in --expected does not pass")
    ap.add_argument("--write-passes", help="write the suite/test names that passed to this file")
    ap.add_argument("--work", help="scratch folder (default: a temporary one)")
    ap.add_argument("--sample", type=sample_arg, metavar="K/N", help="only every Nth test, starting at the Kth")
    ap.add_argument("--quiet", action="store_true", help="print only failures, errors and the summary")
    ap.add_argument("--record", help="keep every passing test's runs in this folder for tests/onnx/replay.py")
    a = ap.parse_args()

    if not os.path.isdir(a.data):
        print("onnx: no test data at %s (apt-get install libonnx-testdata)" % a.data)
        return 77
    expected = set()
    if a.expected:
        with open(a.expected) as f:
            expected = {l.strip() for l in f if l.strip() and not l.startswith("#")}
    tests = []
    for suite in a.suite or SUITES:
        root = os.path.join(a.data, suite)
        for t in sorted(os.listdir(root)):
            key = "%s/%s" % (suite, t)
            if a.filter and not re.search(a.filter, t):
                continue
            if a.only_expected and key not in expected:
                continue
            if os.path.isfile(os.path.join(root, t, "model.onnx")):
                tests.append((suite, t, os.path.join(root, t)))
    found = {"%s/%s" % (s, t) for s, t, _ in tests}
    if a.sample:  # K/N: every Nth test from the Kth (the suite built with sanitizers)
        k, n = a.sample
        print("sample %d/%d: %d of %d tests" % (k, n, len(tests[k::n]), len(tests)))
        tests = tests[k::n]
    work = a.work or tempfile.mkdtemp(prefix="mlc-onnx-")
    results = {}
    with concurrent.futures.ThreadPoolExecutor(max_workers=a.jobs) as ex:
        futs = {ex.submit(run_one, a.mlc, a.target, d, os.path.join(work, s, t),
                          os.path.join(a.record, s, t) if a.record else None): (s, t) for s, t, d in tests}
        for fu in concurrent.futures.as_completed(futs):
            s, t = futs[fu]
            try:
                st, why = fu.result()
            except Exception as e:  # noqa: BLE001 - the runner's own failure is that test's error
                st, why = "ERROR", "runner: %s: %s" % (type(e).__name__, e)
            results[(s, t)] = (st, why)
            if a.record and st != "PASS":  # only passing tests are kept
                shutil.rmtree(os.path.join(a.record, s, t), ignore_errors=True)
            if not a.quiet or st in ("FAIL", "ERROR"):
                print("%-11s %s/%s%s" % (st, s, t, ": " + why if why else ""), flush=True)
    if not a.work:
        shutil.rmtree(work, ignore_errors=True)

    # Per suite counts, then what blocks the most tests.
    for suite in a.suite or SUITES:
        c = collections.Counter(st for (s, _), (st, _) in results.items() if s == suite)
        n = sum(c.values())
        if n:
            print("suite %-18s %4d tests: %4d pass, %3d fail, %4d unsupported, %3d error" %
                  (suite, n, c["PASS"], c["FAIL"], c["UNSUPPORTED"], c["ERROR"]))
    reasons = collections.Counter()
    for (_, _), (st, why) in results.items():
        if st == "UNSUPPORTED":
            reasons[why.split(":")[0] + ")" if ":" in why and not why.startswith(("op ", "dtype ")) else why] += 1
    if reasons:
        print("top reasons for unsupported tests:")
        for why, n in reasons.most_common(25):
            print("  %4d  %s" % (n, why))
    if a.write_passes:
        with open(a.write_passes, "w") as f:
            for (s, t), (st, _) in sorted(results.items()):
                if st == "PASS":
                    f.write("%s/%s\n" % (s, t))
    c = collections.Counter(st for st, _ in results.values())
    regressions = sorted("%s/%s" % k for k, (st, _) in results.items() if "%s/%s" % k in expected and st != "PASS")
    missing = sorted(expected - found) if a.only_expected else []
    print("onnx conformance on %s: %d tests, %d pass, %d fail, %d unsupported, %d error%s" %
          (a.target, len(results), c["PASS"], c["FAIL"], c["UNSUPPORTED"], c["ERROR"],
           "; %d expected passes regressed: %s" % (len(regressions), " ".join(regressions)) if regressions else ""))
    if missing:
        print("expected tests not found: %s" % " ".join(missing))
    if a.check and (regressions or missing):
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
