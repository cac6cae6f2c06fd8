"""Philox4x32-10 (Salmon, Moraes, Dror and Shaw, "Parallel random numbers:
as easy as 1, 2, 3", SC'11) in numpy, written from the paper: the reference
for mlc's dropout mask (ir/ops.def, DROPOUT).  `python3 philox.py` checks it
against the paper's known-answer vectors (Random123's kat_vectors)."""
import sys

import numpy as np

M0, M1 = np.uint64(0xD2511F53), np.uint64(0xCD9E8D57)
W0, W1 = 0x9E3779B9, 0xBB67AE85
MASK = np.uint64(0xFFFFFFFF)


def philox4x32(counter, key):
    """counter: four uint32 arrays (one shape), key: two ints -> four uint32 arrays."""
    x = [np.asarray(c, dtype=np.uint64) & MASK for c in counter]
    k0, k1 = key[0] & 0xFFFFFFFF, key[1] & 0xFFFFFFFF
    for _ in range(10):
        p0, p1 = x[0] * M0, x[2] * M1
        hi0, lo0, hi1, lo1 = p0 >> np.uint64(32), p0 & MASK, p1 >> np.uint64(32), p1 & MASK
        x = [hi1 ^ x[1] ^ np.uint64(k0), lo1, hi0 ^ x[3] ^ np.uint64(k1), lo0]
        k0, k1 = (k0 + W0) & 0xFFFFFFFF, (k1 + W1) & 0xFFFFFFFF
    return [v.astype(np.uint32) for v in x]


def dropout_mask(shape, p, step, stream, seed=0):
    """mlc's dropout: element i (row-major) is kept when word 0 at counter
    (i lo, i hi, step lo, step hi), key (stream, seed) is >= floor(p 2^32)."""
    n = int(np.prod(shape))
    i = np.arange(n, dtype=np.uint64)
    ctr = [i & MASK, i >> np.uint64(32), np.full(n, step & 0xFFFFFFFF, np.uint64), np.full(n, step >> 32, np.uint64)]
    w = philox4x32(ctr, (stream, seed))[0]
    return (w.astype(np.uint64) >= np.uint64(min(int(np.floor(p * 2.0**32)), 0xFFFFFFFF))).reshape(shape)


KAT = [  # counter, key, output (Random123 kat_vectors, philox4x32 10 rounds)
    ((0, 0, 0, 0), (0, 0), (0x6627E8D5, 0xE169C58D, 0xBC57AC4C, 0x9B00DBD8)),
    ((0xFFFFFFFF,) * 4, (0xFFFFFFFF, 0xFFFFFFFF), (0x408F276D, 0x41C83B0E, 0xA20BC7C6, 0x6D5451FD)),
    ((0x243F6A88, 0x85A308D3, 0x13198A2E, 0x03707344), (0xA4093822, 0x299F31D0),
     (0xD16CFE09, 0x94FDCCEB, 0x5001E420, 0x24126EA1)),
]


def check_kat():
    for ctr, key, want in KAT:
        got = tuple(int(v[0]) for v in philox4x32([[c] for c in ctr], key))
        if got != want:
            return "philox4x32-10%s key %s: got %s, want %s" % (ctr, key, [hex(v) for v in got], [hex(v) for v in want])
    return None


if __name__ == "__main__":
    err = check_kat()
    print(err or "ok: philox4x32-10 matches the %d known-answer vectors" % len(KAT))
    sys.exit(1 if err else 0)
