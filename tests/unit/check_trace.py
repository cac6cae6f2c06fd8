"""Checks a Chrome trace that `mlc bench --trace` wrote: valid JSON, one
process, a named track per stream, and one complete event per step per
timed run with scope, FLOPs, bytes and argument shapes.

usage: check_trace.py TRACE.json RUNS [ROOFLINE.svg]
"""
import json
import sys
import xml.dom.minidom

trace, runs = sys.argv[1], int(sys.argv[2])
with open(trace) as f:
    d = json.load(f)
events = d["traceEvents"]
meta = [e for e in events if e["ph"] == "M"]
steps = [e for e in events if e["ph"] == "X"]
assert {e["name"] for e in meta} == {"process_name", "thread_name"}, meta
assert len({e["pid"] for e in events}) == 1, "one process"
tracks = {e["tid"] for e in meta if e["name"] == "thread_name"}
assert steps and len(steps) % runs == 0, (len(steps), runs)
per_run = len(steps) // runs
for i, e in enumerate(steps):
    for k in ("name", "cat", "ts", "dur", "pid", "tid", "args"):
        assert k in e, (k, e)
    assert e["tid"] in tracks, e
    assert e["dur"] >= 0 and e["ts"] >= 0, e
    a = e["args"]
    assert isinstance(a["scope"], str) and a["flops"] >= 0 and a["bytes"] > 0, e
    assert a["shapes"] and all(s.endswith("]") and "[" in s for s in a["shapes"]), e
    assert e["name"] == steps[i % per_run]["name"], "every run lists the steps in the same order"
    if i:
        p = steps[i - 1]
        assert e["ts"] >= p["ts"] + p["dur"] - 1e-3, "one stream: steps do not overlap"
print(f"{trace}: {len(steps)} events, {per_run} steps x {runs} runs, {len(tracks)} track(s)")
if len(sys.argv) > 3:
    svg = xml.dom.minidom.parse(sys.argv[3])
    texts = " ".join(t.firstChild.data for t in svg.getElementsByTagName("text") if t.firstChild)
    assert "memory roof" in texts and "compute roof" in texts, texts
    assert svg.getElementsByTagName("circle"), "one point per kernel"
    print(f"{sys.argv[3]}: {len(svg.getElementsByTagName('circle'))} points")
