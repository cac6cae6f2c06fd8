"""Reads a safetensors file (what `mlc train --export` writes) into numpy
arrays, for the tests in this folder that compare mlc's trained weights
with PyTorch's."""
import json

import numpy as np

DTYPES = {"F32": np.float32, "I64": np.int64, "I32": np.int32, "BOOL": np.bool_}


def read_safetensors(path):
    """{name: array} for every tensor of the file, __metadata__ left out;
    the arrays are read-only views of the file's bytes."""
    with open(path, "rb") as f:
        n = int.from_bytes(f.read(8), "little")
        header = json.loads(f.read(n))
        data = f.read()
    out = {}
    for k, v in header.items():
        if k == "__metadata__":
            continue
        a, b = v["data_offsets"]
        out[k] = np.frombuffer(data[a:b], dtype=DTYPES[v["dtype"]]).reshape(v["shape"])
    return out
