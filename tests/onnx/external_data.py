#!/usr/bin/env python3
"""ONNX external data: the initializers in files beside the .onnx
(TensorProto.data_location = EXTERNAL, external_data's location, offset and
length), as torch 2.x's exporter and onnx.save_model(...,
save_as_external_data=True) write them.

tests/onnx/e2e_transformer.py's TinyGPT is exported with torch.onnx.export
(embedded data), re-saved with all tensors in one file and with one file per
tensor (and that once more without lengths: the data runs to the end of
each file), and run by `mlc run`: the logits must equal those of the embedded
model bit for bit, and torch's within 1e-5 of max |torch|.  The one-file
model is also used from a .mdl in another directory (onnx("sub/m.onnx"),
mlc started from a third one), so the data resolves against the .onnx's own
directory.  Then broken copies must be refused with exactly the expected
message: a missing file, a truncated file, a length that does not match the
shape, an absolute location, one with '..', an unknown key.

Exits 77 (a skip) where torch or onnx is missing.
Usage: external_data.py --mlc MLC [--work DIR]"""
import argparse
import os
import shutil
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
try:
    import numpy as np
    import torch
    import onnx
    from e2e_transformer import make_model, VOCAB
except ImportError as e:  # pragma: no cover - a machine without torch or onnx
    print(f"skipped: {e}")
    sys.exit(77)

BATCH, SEQ, TOL = 2, 16, 1e-5
failures = []


def fail(msg):
    print("FAIL " + msg)
    failures.append(msg)


def mlc(args, path, idx_file, out_file, output="logits", cwd=None):
    cmd = [args.mlc, "run", path, "--target", "cpu", "--input", f"idx={idx_file}", "--output", f"{output}={out_file}"]
    return subprocess.run(cmd, capture_output=True, text=True, cwd=cwd)


def logits(args, label, path, idx_file, output="logits", cwd=None):
    out = os.path.join(args.work, label + ".logits.bin")
    if os.path.exists(out):
        os.remove(out)
    r = mlc(args, path, idx_file, out, output, cwd)
    if r.returncode != 0:
        fail(f"{label}: mlc exited {r.returncode}:\n{r.stdout}{r.stderr}")
        return None
    return np.fromfile(out, dtype=np.float32)


def resave(model_path, dest, one_file):
    """model_path's model with every initializer as external data, at dest."""
    os.makedirs(os.path.dirname(dest), exist_ok=True)
    m = onnx.load(model_path)
    kw = {"location": "weights.bin"} if one_file else {}
    onnx.save_model(m, dest, save_as_external_data=True, all_tensors_to_one_file=one_file, size_threshold=0, **kw)
    m = onnx.load(dest, load_external_data=False)
    ext = [t for t in m.graph.initializer if t.data_location == onnx.TensorProto.EXTERNAL]
    if len(ext) != len(m.graph.initializer) or not ext:
        sys.exit(f"FAIL: {dest}: {len(ext)} of {len(m.graph.initializer)} initializers are external")
    return m


def entry(t, key):
    for e in t.external_data:
        if e.key == key:
            return e
    return None


def refused(args, label, model, idx_file, want, prepare=None):
    """A broken copy of the one-file model must be refused with exactly `want` (after 'mlc: error: ')."""
    d = os.path.join(args.work, "bad_" + label)
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(d)
    shutil.copyfile(os.path.join(args.work, "one", "weights.bin"), os.path.join(d, "weights.bin"))
    if prepare:
        prepare(d)
    path = os.path.join(d, "m.onnx")
    with open(path, "wb") as f:
        f.write(model.SerializeToString())
    r = mlc(args, path, idx_file, os.path.join(d, "out.bin"))
    got = r.stderr.strip().splitlines()
    want_line = "mlc: error: " + want.replace("{path}", path).replace("{dir}", d)
    if r.returncode == 0 or not got or got[0] != want_line:
        fail(f"{label}: want exit != 0 and\n  {want_line}\ngot exit {r.returncode} and\n  {r.stderr}")
    else:
        print(f"PASS refused {label}: {got[0]}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--mlc", required=True)
    ap.add_argument("--work", default="external_data")
    args = ap.parse_args()
    args.mlc = os.path.abspath(args.mlc)
    args.work = os.path.abspath(args.work)
    shutil.rmtree(args.work, ignore_errors=True)
    os.makedirs(args.work)

    model = make_model()
    torch.manual_seed(1)
    idx = torch.randint(0, VOCAB, (BATCH, SEQ), dtype=torch.int64)
    with torch.no_grad():
        want = model(idx).numpy().reshape(-1)
    idx_file = os.path.join(args.work, "idx.bin")
    idx.numpy().tofile(idx_file)
    embedded = os.path.join(args.work, "embedded.onnx")
    torch.onnx.export(model, (torch.zeros(BATCH, SEQ, dtype=torch.int64),), embedded, input_names=["idx"],
                      output_names=["logits"], opset_version=14)

    base = logits(args, "embedded", embedded, idx_file)
    if base is None:
        sys.exit(1)
    err = np.abs(base - want).max() / np.abs(want).max()
    (print if err <= TOL else fail)(f"embedded: max |mlc - torch| / max |torch| = {err:.3g} (tolerance {TOL})")

    one = resave(embedded, os.path.join(args.work, "one", "m.onnx"), True)
    many = resave(embedded, os.path.join(args.work, "many", "m.onnx"), False)
    # Without length a tensor's data runs to the end of its file (the ONNX spec): one file per tensor, no lengths.
    for t in many.graph.initializer:
        keep = [(e.key, e.value) for e in t.external_data if e.key != "length"]
        del t.external_data[:]
        for k, v in keep:
            e = t.external_data.add()
            e.key, e.value = k, v
    with open(os.path.join(args.work, "many", "nolength.onnx"), "wb") as f:
        f.write(many.SerializeToString())
    # A .mdl in another directory, run from a third one: the data is beside the .onnx.
    os.makedirs(os.path.join(args.work, "mdl", "sub"))
    os.makedirs(os.path.join(args.work, "cwd"))
    for f in ("m.onnx", "weights.bin"):
        shutil.copyfile(os.path.join(args.work, "one", f), os.path.join(args.work, "mdl", "sub", f))
    with open(os.path.join(args.work, "mdl", "tuned.mdl"), "w") as f:
        f.write(f"config {{ batch = {BATCH}  seq = {SEQ} }}\n\nmodule Tuned {{\n    net = onnx(\"sub/m.onnx\")\n"
                "    forward(idx: i64[batch, seq]) { return net(idx) }\n}\n")
    for label, path, output, cwd in [("one file", os.path.join(args.work, "one", "m.onnx"), "logits", None),
                                     ("one file per tensor", os.path.join(args.work, "many", "m.onnx"), "logits", None),
                                     ("one file per tensor, no lengths", os.path.join(args.work, "many", "nolength.onnx"),
                                      "logits", None),
                                     ("one file, relative path", "m.onnx", "logits", os.path.join(args.work, "one")),
                                     ("from a .mdl", os.path.join("..", "mdl", "tuned.mdl"), "output",
                                      os.path.join(args.work, "cwd"))]:
        got = logits(args, label.replace(" ", "_").replace(",", "").replace(".", ""), path, idx_file, output, cwd)
        if got is None:
            continue
        if got.shape == base.shape and np.array_equal(got.view(np.uint32), base.view(np.uint32)):
            print(f"PASS {label}: the logits equal the embedded model's bit for bit")
        else:
            fail(f"{label}: the logits differ from the embedded model's")

    # The broken copies: each changes the first initializer (or the file).
    def variant(change):
        m = onnx.ModelProto()
        m.CopyFrom(one)
        change(m.graph.initializer[0])
        return m

    t0 = one.graph.initializer[0]
    name = t0.name
    nbytes = int(entry(t0, "length").value)
    off0 = int(entry(t0, "offset").value) if entry(t0, "offset") else 0
    size = os.path.getsize(os.path.join(args.work, "one", "weights.bin"))
    last = max(one.graph.initializer, key=lambda t: int(entry(t, "offset").value) if entry(t, "offset") else 0)
    last_off = int(entry(last, "offset").value) if entry(last, "offset") else 0
    last_len = int(entry(last, "length").value)

    def setv(key, value):
        def change(t):
            e = entry(t, key)
            if e is None:
                e = t.external_data.add()
                e.key = key
            e.value = value
        return change

    def delkey(key):
        def change(t):
            keep = [(e.key, e.value) for e in t.external_data if e.key != key]
            del t.external_data[:]
            for k, v in keep:
                e = t.external_data.add()
                e.key, e.value = k, v
        return change

    def truncate(d):
        with open(os.path.join(d, "weights.bin"), "r+b") as f:
            f.truncate(last_off + last_len - 4)

    pre = "{path}: initializer '%s': " % name
    refused(args, "missing_file", variant(setv("location", "nope.bin")), idx_file,
            pre + "cannot read external data '{dir}/nope.bin': No such file or directory")
    m = onnx.ModelProto()
    m.CopyFrom(one)
    pre_last = "{path}: initializer '%s': " % last.name
    refused(args, "truncated", m, idx_file,
            pre_last + f"external data '{{dir}}/weights.bin' has {last_off + last_len - 4} bytes; offset {last_off} "
            f"and length {last_len} reach past its end", truncate)
    refused(args, "offset_past_end", variant(setv("offset", str(size + 1))), idx_file,
            pre + f"external data '{{dir}}/weights.bin' has {size} bytes; offset {size + 1} and length {nbytes} "
            "reach past its end")
    refused(args, "size_mismatch", variant(setv("length", str(nbytes - 4))), idx_file,
            pre + f"external data '{{dir}}/weights.bin' holds {nbytes - 4} bytes (offset {off0}), its shape needs "
            f"{nbytes}")
    # Without a length the data runs to the end of the file: here, past the tensor.
    refused(args, "no_length", variant(delkey("length")), idx_file,
            pre + f"external data '{{dir}}/weights.bin' holds {size - off0} bytes (offset {off0}), its shape needs "
            f"{nbytes}")
    refused(args, "absolute", variant(setv("location", "/etc/passwd")), idx_file,
            pre + "external data location '/etc/passwd' is an absolute path; ONNX wants one relative to the "
            "model's directory (onnx.checker refuses it too)")
    refused(args, "dotdot", variant(setv("location", "sub/../../one/weights.bin")), idx_file,
            pre + "external data location 'sub/../../one/weights.bin' leaves the model's directory with '..' "
            "(onnx.checker refuses it too)")
    refused(args, "unknown_key", variant(setv("compression", "zstd")), idx_file,
            pre + "unknown external_data key 'compression' (ONNX has location, offset, length and checksum)")
    if failures:
        print(f"{len(failures)} failure(s)")
        sys.exit(1)
    print("all passed")


if __name__ == "__main__":
    main()
