#!/usr/bin/python3
"""Reference safetensors files from PyTorch, to cross-check libmlcrt.

Debian has no `safetensors` Python package, so the format is written and read
here by hand, following the spec: an 8-byte little-endian header length N, N
bytes of JSON ({name: {dtype, shape, data_offsets}}, "__metadata__" first),
padded with spaces to a multiple of 8, then the tensors' bytes.  Tensors go
in the reference writer's order (descending dtype, then name), so libmlcrt's
writer must reproduce this file byte for byte.

  make_reference_st.py write OUTDIR
      OUTDIR/torch.safetensors from fixed-seed torch tensors (f32, bf16, f16,
      i32, a scalar, an empty tensor, awkward f16/bf16 values), and
      OUTDIR/expected.json: per tensor its dtype, shape, byte count, FNV-1a
      of its bytes and every value as a float64 (exact for these dtypes).
  make_reference_st.py check FILE
      reads FILE, written by st_xcheck through libmlcrt, by hand; checks the
      header's layout and order, and that each tensor equals, bit for bit,
      the torch tensor it should hold.

Run it with /usr/bin/python3 (torch 1.13, numpy).
"""
import json
import os
import struct
import sys

import torch

# The reference implementation's Dtype enum order (its writer sorts by it).
DTYPE_ORDER = ["BOOL", "U8", "I8", "F8_E5M2", "F8_E4M3", "F8_E8M0", "F8_E4M3FNUZ",
               "F8_E5M2FNUZ", "I16", "U16", "F16", "BF16", "I32", "U32", "F32", "C64",
               "F64", "I64", "U64"]
TORCH_DTYPE = {"BOOL": torch.bool, "U8": torch.uint8, "I8": torch.int8, "I16": torch.int16,
               "F16": torch.float16, "BF16": torch.bfloat16, "I32": torch.int32,
               "F32": torch.float32, "F64": torch.float64, "I64": torch.int64}
DTYPE_NAME = {v: k for k, v in TORCH_DTYPE.items()}
METADATA = {"format": "pt"}


def reference_tensors():
    g = torch.Generator().manual_seed(20240601)
    return {
        "model.embed.weight": torch.randn(17, 8, generator=g),
        "layers.0.attn.in_proj_weight": torch.randn(12, 4, generator=g).to(torch.bfloat16),
        "layers.0.norm.weight": torch.randn(33, generator=g).to(torch.float16),
        "tokens": torch.randint(-2**31, 2**31 - 1, (5, 7), generator=g, dtype=torch.int32),
        "scalar.loss": torch.tensor(2.718281828, dtype=torch.float32),
        "empty.bias": torch.zeros(0, 3),
        # Subnormals, extremes, -0: where a hand-written conversion goes wrong.
        "special.f16": torch.tensor([6.1035e-05, 5.9605e-08, 65504.0, -65504.0, -0.0,
                                     1.0009765625, 0.333251953125], dtype=torch.float16),
        "special.bf16": torch.tensor([1e-38, 9.2e-41, 3.3895e38, -1.0, -0.0, 1.0078125],
                                     dtype=torch.bfloat16),
    }


def c_tensors():
    """What st_xcheck adds, computed in C; the same values from torch."""
    return {
        "c.arange_i64": torch.arange(24, dtype=torch.int64).reshape(2, 3, 4),
        "c.eighths_f64": torch.arange(10, dtype=torch.float64) / 8 - 1,
        "c.u8": torch.arange(256, dtype=torch.int64).to(torch.uint8),
        "c.i8": torch.arange(-128, 128, 16, dtype=torch.int8),
        "c.i16": torch.arange(-5, 5, dtype=torch.int16) * 1000,
        "c.mask": torch.arange(10) % 3 == 0,
    }


def tensor_bytes(t):
    t = t.contiguous()
    if t.dtype == torch.bfloat16:  # numpy has no bfloat16
        t = t.view(torch.int16)
    return t.numpy().tobytes()


def fnv1a64(data):
    h = 0xcbf29ce484222325
    for b in data:
        h = ((h ^ b) * 0x100000001b3) & 0xffffffffffffffff
    return "%016x" % h


def file_order(names_dtypes):
    return sorted(names_dtypes, key=lambda nd: (-DTYPE_ORDER.index(nd[1]), nd[0]))


def write_safetensors(path, tensors, metadata):
    order = file_order([(name, DTYPE_NAME[t.dtype]) for name, t in tensors.items()])
    header, blobs, offset = {"__metadata__": metadata}, [], 0
    for name, dtype in order:
        b = tensor_bytes(tensors[name])
        header[name] = {"dtype": dtype, "shape": list(tensors[name].shape),
                        "data_offsets": [offset, offset + len(b)]}
        offset += len(b)
        blobs.append(b)
    text = json.dumps(header, separators=(",", ":"), ensure_ascii=False).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + b"".join(blobs))


def read_safetensors(path):
    """Reads a file by hand, asserting the layout libmlcrt promises."""
    with open(path, "rb") as f:
        data = f.read()
    (n,) = struct.unpack("<Q", data[:8])
    text = data[8:8 + n]
    assert n % 8 == 0, "header length %d is not a multiple of 8" % n
    header = json.loads(text.decode("utf-8"))
    compact = json.dumps(header, separators=(",", ":"), ensure_ascii=False).encode()
    assert text == compact + b" " * (n - len(compact)), "header is not compact JSON plus spaces"
    metadata = header.pop("__metadata__", None)
    names = list(header)
    want = [name for name, _ in file_order([(k, header[k]["dtype"]) for k in names])]
    assert names == want, "tensors not in the reference order:\n %s\n %s" % (names, want)
    tensors, offset, base = {}, 0, 8 + n
    for name in names:
        info = header[name]
        begin, end = info["data_offsets"]
        dtype = TORCH_DTYPE[info["dtype"]]
        size = torch.empty(0, dtype=dtype).element_size()
        assert begin == offset, "%s: begins at %d, not %d" % (name, begin, offset)
        assert begin % size == 0, "%s: offset %d not aligned to %d" % (name, begin, size)
        raw = bytearray(data[base + begin:base + end])
        t = torch.frombuffer(raw, dtype=dtype) if raw else torch.empty(0, dtype=dtype)
        tensors[name] = t.reshape(info["shape"])
        offset = end
    assert base + offset == len(data), "data region not fully covered"
    return tensors, metadata


def write(outdir):
    os.makedirs(outdir, exist_ok=True)
    tensors = reference_tensors()
    write_safetensors(os.path.join(outdir, "torch.safetensors"), tensors, METADATA)
    expected = {"metadata": METADATA, "tensors": {}}
    for name, t in tensors.items():
        b = tensor_bytes(t)
        values = t.flatten().tolist() if not t.is_floating_point() else \
            t.to(torch.float64).flatten().tolist()
        expected["tensors"][name] = {"dtype": DTYPE_NAME[t.dtype], "shape": list(t.shape),
                                     "nbytes": len(b), "fnv1a64": fnv1a64(b), "values": values}
    with open(os.path.join(outdir, "expected.json"), "w") as f:
        json.dump(expected, f, indent=1)
    print("wrote %d tensors to %s" % (len(tensors), outdir))


def check(path):
    got, metadata = read_safetensors(path)
    want = dict(reference_tensors(), **c_tensors())
    failures = []
    if metadata != dict(METADATA, written_by="mlcrt"):
        failures.append("metadata %r" % metadata)
    if sorted(got) != sorted(want):
        failures.append("names %s != %s" % (sorted(got), sorted(want)))
    for name in sorted(set(got) & set(want)):
        g, w = got[name], want[name]
        # Equal bytes catch -0.0 vs 0.0, which torch.equal does not.
        if g.dtype != w.dtype or g.shape != w.shape or not torch.equal(g, w) \
                or tensor_bytes(g) != tensor_bytes(w):
            failures.append("%s: got %s %s, want %s %s" % (name, g.dtype, list(g.shape),
                                                           w.dtype, list(w.shape)))
    for f in failures:
        print("MISMATCH", f)
    print("checked %d tensors from %s: %s" % (len(got), path, "FAIL" if failures else "ok"))
    return 1 if failures else 0


def main():
    assert sys.byteorder == "little", "safetensors is little-endian; so must this host be"
    if len(sys.argv) == 3 and sys.argv[1] == "write":
        write(sys.argv[2])
        return 0
    if len(sys.argv) == 3 and sys.argv[1] == "check":
        return check(sys.argv[2])
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
