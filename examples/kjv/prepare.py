"""The King James Bible (Debian's bible-kjv, which reads bible-kjv-text's
/usr/lib/bible.data) as byte-level training data for a causal language
model: the text of every verse, one a line, without the references, cut
into consecutive windows of SEQ + 1 bytes; idx.npy i32[N, SEQ] holds each
window's first SEQ bytes and targets.npy i32[N, SEQ] the next byte of each.
Windows are in the book's order, so `mlc train --eval-split F` holds out
the last share F of the text (the end of the New Testament), which no
training window overlaps.

Usage: prepare.py OUTDIR [SEQ]   (SEQ: 128 by default)"""
import os
import re
import subprocess
import sys

import numpy as np


def text():
    out = subprocess.run(["bible", "-f", "Gen1:1-Rev22:21"], capture_output=True, text=True, check=True).stdout
    verses = [re.sub(r"^\S+\d+:\d+ ", "", line) for line in out.splitlines() if line.strip()]
    return "\n".join(verses) + "\n"


if __name__ == "__main__":
    out = sys.argv[1] if len(sys.argv) > 1 else "."
    seq = int(sys.argv[2]) if len(sys.argv) > 2 else 128
    os.makedirs(out, exist_ok=True)
    b = np.frombuffer(text().encode("ascii"), dtype=np.uint8).astype(np.int32)
    n = (len(b) - 1) // seq
    idx, targets = b[:n * seq].reshape(n, seq), b[1:n * seq + 1].reshape(n, seq)
    np.save(os.path.join(out, "idx.npy"), idx)
    np.save(os.path.join(out, "targets.npy"), targets)
    print(f"{len(b)} bytes, {n} windows of {seq}: {out}/idx.npy, {out}/targets.npy")
