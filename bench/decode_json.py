#!/usr/bin/env python3
"""bench/results/latest/decode.json from bench/h200_s19.sh's decode logs
(speed_NAME.log: bench/decode_cpu.py --target cuda --torch-device cuda, three
runs each, mlc and PyTorch eager in the same call):

    python3 bench/decode_json.py --logs DIR --commit C --date D --command CMD --out bench/results/latest/decode.json

Metrics (ratio > 1: mlc better), each from the median of the runs' ms a token:
  decode_bf16_vs_eager  eager's time a token over mlc's, bf16 (speed_bf16.log)
  decode_int4_vs_bf16   mlc bf16's time over mlc int4's (f32 activations, int4
                        weights in groups of 128: speed_int4.log)
  decode_bw_fraction    the bandwidth limit's time a token (bytes read a token
                        over the copy bandwidth measured in the same call) over
                        mlc bf16's
  decode_f32_vs_eager, decode_int8_vs_bf16 beside them where those logs exist.
"""
import argparse
import os
import re
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gemm_json  # noqa: E402

RUN = re.compile(r"^run \d+: .*decode mlc [0-9.]+ tok/s \(([0-9.]+) ms\), torch [0-9.]+ tok/s \(([0-9.]+) ms\)", re.M)
BW = re.compile(r"^bandwidth: copy ([0-9.]+) TB/s; ([0-9.]+) GB a token; limit ([0-9.]+) ms a token", re.M)


def runs(path):
    """(mlc ms a token, torch ms a token), medians over the runs; None if the log is missing or has none."""
    if not os.path.exists(path):
        return None
    r = RUN.findall(open(path).read())
    if not r:
        return None
    return statistics.median(float(m) for m, _ in r), statistics.median(float(t) for _, t in r)


def main():
    ap = argparse.ArgumentParser()
    for a in ("--logs", "--commit", "--date", "--command", "--out"):
        ap.add_argument(a, required=True)
    ap.add_argument("--hardware", default=gemm_json.HARDWARE)
    a = ap.parse_args()
    gemm_json.HARDWARE = a.hardware
    bf16 = runs(os.path.join(a.logs, "speed_bf16.log"))
    if not bf16:
        sys.exit("no bf16 decode runs in " + a.logs)
    m = {"decode_bf16_vs_eager": {"mlc": bf16[0], "ref": bf16[1], "ref_name": "PyTorch eager, bf16, static KV cache",
                                  "ratio": bf16[1] / bf16[0], "unit": "ms/token"}}
    bw = BW.search(open(os.path.join(a.logs, "speed_bf16.log")).read())
    if bw:
        limit = float(bw.group(3))
        m["decode_bw_fraction"] = {"mlc": bf16[0], "ref": limit,
                                   "ref_name": "bandwidth limit (%s GB a token at %s TB/s, copy)" % (bw.group(2), bw.group(1)),
                                   "ratio": limit / bf16[0], "unit": "ms/token"}
    for name, key, ref in (("int4", "decode_int4_vs_bf16", "mlc bf16"), ("int8", "decode_int8_vs_bf16", "mlc bf16"),
                           ("f32", "decode_f32_vs_eager", "PyTorch eager, f32, static KV cache")):
        r = runs(os.path.join(a.logs, "speed_%s.log" % name))
        if r:
            base = bf16[0] if ref == "mlc bf16" else r[1]
            m[key] = {"mlc": r[0], "ref": base, "ref_name": ref, "ratio": base / r[0], "unit": "ms/token"}
    gemm_json.write_latest(a.out, a.commit, a.date, a.command, m)


if __name__ == "__main__":
    main()
