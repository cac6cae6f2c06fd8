#!/usr/bin/python3
"""Replays the ONNX node tests that tests/onnx/run_conformance.py --record kept,
on another target, where neither Debian's test data nor the onnx package is
installed (the GPU machine: `--target cuda`, `--target spirv`).

Each recorded data set holds the model as mlc compiled it on the recording
target, its inputs as raw files, the expected outputs (.npy, ONNX's own) and
the arguments of `mlc run`.  This runs `mlc run model.onnx --target T ARGS`
and compares as the runner does (numpy.testing: rtol 1e-3, atol 1e-7, NaNs
equal), or where the manifest gives "losses" (kind "train",
tests/onnx/train_onnx_module.py --record) `mlc train`'s printed losses against
torch's, or where it gives "scaled_tol" (a whole model's output,
tests/onnx/e2e_transformer.py --record) as max |got - want| / max |want|.  Every test ends PASS, FAIL (an output differs), UNSUPPORTED (mlc
refused it with an error naming the op or dtype on this target) or ERROR
(anything else); the last line is the summary.  Exit status 1 when a test does
not pass, unless --no-check.

  tests/onnx/replay.py --mlc build-gpu/mlc --target cuda --bundle DIR [--jobs 16]
"""
import argparse
import collections
import concurrent.futures
import json
import os
import re
import subprocess
import sys

import numpy as np


def run_mlc(cmd, timeout):
    """(the finished process, None), or (None, (status, reason)) when mlc failed."""
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, errors="replace", timeout=timeout)
    except subprocess.TimeoutExpired:
        return None, ("ERROR", "timeout (%d s)" % timeout)
    if p.returncode != 0:
        last = p.stderr.strip().splitlines()[-1] if p.stderr.strip() else "exit status %d" % p.returncode
        # the CLI's exit status 1 is a user-facing refusal (an op, a dtype the target lacks)
        return None, (("UNSUPPORTED" if p.returncode == 1 else "ERROR"), last[:240])
    return p, None


def replay(mlc, target, test_dir, timeout):
    for s in sorted(os.listdir(test_dir)):
        d = os.path.join(test_dir, s)
        with open(os.path.join(d, "manifest.json")) as f:
            m = json.load(f)
        args = []
        for x in m["args"]:  # --input NAME=FILE: the file is in d
            args.append(re.sub(r"^(\w+)=(.*)$", lambda g: "%s=%s" % (g.group(1), os.path.join(d, g.group(2))), x)
                        if args and args[-1] == "--input" else x)
        if m.get("kind") == "train":  # train_onnx_module.py --record: the losses of `mlc train` against torch's
            cmd = [mlc, "train", os.path.join(d, m["model"]), "--target", target] + args
            p, why = run_mlc(cmd, timeout)
            if why:
                return why
            got = [float(v) for v in re.findall(r"^step \d+: loss (\S+)", p.stdout, re.M)]
            want = m["losses"]
            if len(got) != len(want):
                return "FAIL", "mlc train printed %d losses, torch has %d" % (len(got), len(want))
            err = max(abs(a - b) / abs(b) for a, b in zip(got, want))
            if not err <= m["loss_tol"]:
                return "FAIL", "losses: max |mlc - torch| / |torch| = %.3g, tolerance %g" % (err, m["loss_tol"])
            continue
        cmd = [mlc, "run", os.path.join(d, "model.onnx"), "--target", target] + args
        for name in m["outputs"]:
            cmd += ["--output", "%s=%s" % (name, os.path.join(d, "got_%s.bin" % name))]
        p, why = run_mlc(cmd, timeout)
        if why:
            return why
        for name in m["outputs"]:
            want = np.load(os.path.join(d, "want_%s.npy" % name), allow_pickle=False)
            got = np.fromfile(os.path.join(d, "got_%s.bin" % name), dtype=want.dtype.newbyteorder("<"))
            if got.size != want.size:
                return "FAIL", "%s: %d elements, expected %d" % (name, got.size, want.size)
            if "scaled_tol" in m:  # a whole model's output: max |got - want| / max |want| (e2e_transformer.py)
                err = float(np.abs(got.reshape(want.shape).astype(np.float64) - want).max() / np.abs(want).max())
                if not err <= m["scaled_tol"]:
                    return "FAIL", "%s (%s): max |mlc - torch| / max |torch| = %.3g, tolerance %g" % (
                        name, s, err, m["scaled_tol"])
                continue
            try:
                np.testing.assert_allclose(got.reshape(want.shape), want, rtol=1e-3, atol=1e-7, equal_nan=True)
            except AssertionError:
                err = np.abs(got.reshape(want.shape).astype(np.float64) - want.astype(np.float64))
                return "FAIL", "%s (%s): max abs error %.3g" % (name, s, float(np.nanmax(err)))
    return "PASS", ""


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--mlc", required=True)
    ap.add_argument("--target", required=True)
    ap.add_argument("--bundle", required=True, help="a folder written by run_conformance.py --record")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--timeout", type=int, default=300, help="seconds for one mlc run")
    ap.add_argument("--filter", help="only tests whose name matches this regex")
    ap.add_argument("--no-check", action="store_true", help="exit 0 even when tests do not pass")
    a = ap.parse_args()
    tests = []
    for suite in sorted(os.listdir(a.bundle)):
        root = os.path.join(a.bundle, suite)
        if not os.path.isdir(root):
            continue
        for t in sorted(os.listdir(root)):
            if not a.filter or re.search(a.filter, t):
                tests.append((suite, t))
    if not tests:
        print("replay: no recorded tests in %s" % a.bundle)
        return 1
    results = {}
    with concurrent.futures.ThreadPoolExecutor(max_workers=a.jobs) as ex:
        futs = {ex.submit(replay, a.mlc, a.target, os.path.join(a.bundle, s, t), a.timeout): (s, t) for s, t in tests}
        for fu in concurrent.futures.as_completed(futs):
            s, t = futs[fu]
            try:
                st, why = fu.result()
            except Exception as e:  # noqa: BLE001 - the replayer's own failure is that test's error
                st, why = "ERROR", "replay: %s: %s" % (type(e).__name__, e)
            results[(s, t)] = (st, why)
            print("%-11s %s/%s%s" % (st, s, t, ": " + why if why else ""), flush=True)
    c = collections.Counter(st for st, _ in results.values())
    print("onnx replay on %s: %d tests (passing on the recording target), %d pass, %d fail, %d unsupported, %d error" %
          (a.target, len(results), c["PASS"], c["FAIL"], c["UNSUPPORTED"], c["ERROR"]))
    return 0 if a.no_check or c["PASS"] == len(results) else 1


if __name__ == "__main__":
    sys.exit(main())
