"""Checks a Chrome trace that mlc wrote (`mlc bench --trace`, or the
synthetic two-rank trace of test_profile): valid JSON; exactly the fields
runtime/profile.h documents; one process per rank (pid = rank, named
"..., rank N"); one named track per stream (tid 0 "compute", 1 "comm");
collectives (kernel mlc_all_gather*, mlc_reduce_scatter*, mlc_all_reduce*)
as their own spans in category "collective" with their bytes on the wire;
compute spans with FLOPs, bytes and intensity; every span with its
arguments' shapes; the same steps in every run; no overlap on a track.

usage: check_trace.py TRACE.json RUNS [ROOFLINE.svg] [--ranks N] [--streams N] [--collectives N]
  --ranks N        processes expected (default 1)
  --streams N      tracks expected in each process (default: any)
  --collectives N  collective spans expected per rank per run (default 0)
"""
import argparse
import json
import re
import xml.dom.minidom

p = argparse.ArgumentParser()
p.add_argument("trace")
p.add_argument("runs", type=int)
p.add_argument("svg", nargs="?")
p.add_argument("--ranks", type=int, default=1)
p.add_argument("--streams", type=int)
p.add_argument("--collectives", type=int, default=0)
o = p.parse_args()

COLLECTIVES = ("mlc_all_gather", "mlc_reduce_scatter", "mlc_all_reduce")
META = {"process_name": "name", "process_sort_index": "sort_index", "thread_name": "name", "thread_sort_index": "sort_index"}
SHAPE = re.compile(r"^(f32|bf16|f16|i32|i64|bool)\[([0-9]+(, [0-9]+)*)?\]$")


def stream_name(tid):
    return {0: "compute", 1: "comm"}.get(tid, f"stream {tid}")


def close(a, b, rel=1e-4):
    return abs(a - b) <= rel * max(abs(a), abs(b), 1e-12)


with open(o.trace) as f:
    d = json.load(f)
assert list(d) == ["displayTimeUnit", "traceEvents"], list(d)
events = d["traceEvents"]
meta = [e for e in events if e["ph"] == "M"]
spans = [e for e in events if e["ph"] == "X"]
assert len(meta) + len(spans) == len(events), "only metadata and complete events"

# Processes and tracks.
pids = sorted({e["pid"] for e in events})
assert pids == list(range(o.ranks)), f"pids {pids}, expected ranks 0..{o.ranks - 1}"
named = {}  # (kind, pid, tid) -> value
for e in meta:
    assert list(e) == ["name", "ph", "pid", "tid", "args"], e
    assert e["name"] in META and list(e["args"]) == [META[e["name"]]], e
    key = (e["name"], e["pid"], e["tid"])
    assert key not in named, f"named twice: {key}"
    named[key] = e["args"][META[e["name"]]]
for pid in pids:
    assert named[("process_name", pid, 0)].endswith(f", rank {pid}"), named[("process_name", pid, 0)]
    assert named[("process_sort_index", pid, 0)] == pid
    tracks = sorted(t for (k, q, t) in named if k == "thread_name" and q == pid)
    if o.streams is not None:
        assert len(tracks) == o.streams, (pid, tracks)
    for t in tracks:
        assert named[("thread_name", pid, t)] == stream_name(t), (pid, t, named[("thread_name", pid, t)])
        assert named[("thread_sort_index", pid, t)] == t

# Spans.
for e in spans:
    assert list(e) == ["name", "cat", "ph", "pid", "tid", "ts", "dur", "args"], e
    assert ("thread_name", e["pid"], e["tid"]) in named, f"span on an unnamed track: {e}"
    assert e["dur"] >= 0 and e["ts"] >= 0, e
    a = e["args"]
    coll = a["kernel"].startswith(COLLECTIVES)
    assert (e["cat"] == "collective") == coll, e
    assert isinstance(a["scope"], str) and a["flops"] >= 0, e
    if coll:
        assert list(a) == ["scope", "kernel", "flops", "entry", "wire_bytes", "wire_GBps", "shapes"], e
        assert a["wire_bytes"] > 0 and isinstance(a["entry"], str), e
        if e["dur"] > 0:
            assert close(a["wire_GBps"], a["wire_bytes"] / e["dur"] / 1e3), e
    else:
        assert list(a) == ["scope", "kernel", "flops", "bytes", "intensity", "shapes"], e
        assert a["bytes"] > 0 and close(a["intensity"], a["flops"] / a["bytes"]), e
    assert a["shapes"] and all(SHAPE.match(s) for s in a["shapes"]), e

for pid in pids:
    mine = [e for e in spans if e["pid"] == pid]
    assert mine and len(mine) % o.runs == 0, (pid, len(mine), o.runs)
    per_run = len(mine) // o.runs
    for i, e in enumerate(mine):
        assert e["name"] == mine[i % per_run]["name"], "every run lists the steps in the same order"
    ncoll = sum(e["cat"] == "collective" for e in mine)
    assert ncoll == o.collectives * o.runs, (pid, ncoll, o.collectives, o.runs)
    # One stream runs one step at a time.  CUDA events resolve about 0.5 us,
    # and a start (cuEventElapsedTime from the device's origin) is a float32
    # of milliseconds, so neighbours there may seem to overlap by that much.
    for t in {e["tid"] for e in mine}:
        track = sorted((e for e in mine if e["tid"] == t), key=lambda e: e["ts"])
        for prev, e in zip(track, track[1:]):
            slack = 1.0 + 2 * e["ts"] * 2.0**-23
            assert e["ts"] >= prev["ts"] + prev["dur"] - slack, f"spans overlap on rank {pid}'s track {t}: {prev} {e}"
print(f"{o.trace}: {len(spans)} spans over {len(pids)} rank(s) and {o.runs} run(s), "
      f"{sum(e['cat'] == 'collective' for e in spans)} collective(s), tracks "
      f"{sorted({(e['pid'], stream_name(e['tid'])) for e in spans})}")
if o.svg:
    svg = xml.dom.minidom.parse(o.svg)
    texts = " ".join(t.firstChild.data for t in svg.getElementsByTagName("text") if t.firstChild)
    assert "memory roof" in texts and "compute roof" in texts, texts
    assert svg.getElementsByTagName("circle"), "one point per kernel"
    print(f"{o.svg}: {len(svg.getElementsByTagName('circle'))} points")
