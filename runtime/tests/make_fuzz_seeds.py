#!/usr/bin/python3
"""Writes the seed corpus for fuzz_safetensors into runtime/fuzz_corpus/safetensors/.

A few small valid files (the reference implementation's test vectors, all
dtype sizes, metadata, empty and scalar tensors) and invalid ones (each a
different rejection), so the fuzzer starts from every branch of the loader.
Run once and commit the output; rerunning rewrites the same bytes.
"""
import json
import os
import struct
import sys


def image(header, data=b"", pad=True):
    text = header if isinstance(header, bytes) else json.dumps(header, separators=(",", ":")).encode()
    if pad:
        text += b" " * (-len(text) % 8)
    return struct.pack("<Q", len(text)) + text + data


def t(dtype, shape, begin, end):
    return {"dtype": dtype, "shape": shape, "data_offsets": [begin, end]}


SEEDS = {
    "valid_attn": image({"attn.0": t("F32", [1, 2, 3], 0, 24)}, bytes(range(24))),
    "valid_empty": image({}),
    "valid_metadata": image({"__metadata__": {"framework": "pt"}}),
    "valid_unpadded": image({"test": t("I32", [2, 2], 0, 16)}, bytes(16), pad=False),
    "valid_mixed": image({"__metadata__": {"format": "pt", "k": "v"},
                          "c": t("F64", [1], 0, 8), "a": t("F32", [], 8, 12),
                          "d": t("BF16", [2], 12, 16), "e": t("F16", [0, 3], 16, 16),
                          "b": t("U8", [3], 16, 19), "m": t("BOOL", [1], 19, 20)}, bytes(range(20))),
    "invalid_overlap": image({"a": t("F32", [1], 0, 4), "b": t("F32", [1], 2, 6)}, bytes(6)),
    "invalid_hole": image({"a": t("F32", [1], 0, 4), "b": t("F32", [1], 8, 12)}, bytes(12)),
    "invalid_size": image({"w": t("F32", [2, 3], 0, 20)}, bytes(20)),
    "invalid_dtype": image({"w": t("F31", [1], 0, 4)}, bytes(4)),
    "invalid_json": image(b'{"w":{"dtype":"F32","shape":[1],', bytes(4)),
    "invalid_header_length": struct.pack("<Q", 100000001) + b"{}",
}


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(
        os.path.dirname(os.path.abspath(__file__)), "..", "fuzz_corpus", "safetensors")
    os.makedirs(out, exist_ok=True)
    for name, data in SEEDS.items():
        with open(os.path.join(out, name + ".safetensors"), "wb") as f:
            f.write(data)
    print("wrote %d seeds to %s" % (len(SEEDS), out))


if __name__ == "__main__":
    main()
