#!/usr/bin/env python3
"""bench/results/latest/f32.json from the outputs of bench/f32_models.py and
bench/f32_gemm.py (bench/cuda_f32.sh runs all three):

    python3 bench/f32_json.py --models DIR/f32_models.json --gemm DIR/f32_gemm.json \
        --commit C --date D --out bench/results/latest/f32.json

Metrics (ratio > 1: mlc better):
  train_gpt2like_f32, train_mlp_f32  PyTorch eager f32's step time over mlc's
  gemm_f32_worst                     torch.matmul f32's time over mlc's, worst shape
  gemm_f32_median                    the same, median over the shapes
  gemm_<what>_<layout>_MxNxK         each shape
  loss_<model>_f32                   the tolerance (1e-3) over the worst relative
                                     loss difference of the steps (> 1: within it)
  accuracy_<mode>                    torch f32's error over mlc's in that mode
                                     (max |C - C64| / max |C64|, worst shape)
"""
import argparse
import json
import statistics


def main():
    ap = argparse.ArgumentParser()
    for a in ("--models", "--gemm", "--commit", "--date", "--out"):
        ap.add_argument(a, required=True)
    ap.add_argument("--hardware", help="default: the GPU and torch version the scripts recorded")
    ap.add_argument("--command", default="bench/cuda_f32.sh (device tool, nvidia-h200)")
    a = ap.parse_args()
    models, gemm = json.load(open(a.models)), json.load(open(a.gemm))
    mode = models.get("f32_matmul") or "mlc's default"
    m = {}
    for name, r in models["models"].items():
        opt = "AdamW" if name == "gpt2like" else "SGD with momentum"
        m["train_%s_f32" % name] = {
            "mlc": r["mlc_ms"], "ref": r["torch_ms"], "ratio": r["torch_ms"] / r["mlc_ms"], "unit": "ms",
            "ref_name": "PyTorch eager f32 (matmul precision highest), %s, step of %s" % (
                opt, ", ".join("%s=%s" % kv for kv in r["config"].items()))}
        m["loss_%s_f32" % name] = {
            "mlc": r["worst_rel"], "ref": r["loss_tol"], "ratio": r["loss_tol"] / max(r["worst_rel"], 1e-12),
            "unit": "relative loss difference, worst of %d steps" % r["steps"],
            "ref_name": "tolerance (tests/ref/train_minillm.py, f32) against PyTorch f32"}
    speed = gemm["speed"]
    if speed:
        worst = min(speed, key=lambda r: r["ratio"])
        m["gemm_f32_worst"] = {
            "mlc": worst["mlc_ms"], "ref": worst["torch_ms"], "ratio": worst["ratio"], "unit": "ms",
            "ref_name": "torch.matmul f32 (highest) %s %s %dx%dx%d%s" % (
                worst["what"], worst["layout"], worst["M"], worst["N"], worst["K"],
                "".join("; mlc failed on %s" % f for f in gemm.get("failed", []) if f.startswith("bench")))}
        m["gemm_f32_median"] = {"mlc": None, "ref": None, "ratio": statistics.median(r["ratio"] for r in speed),
                                "unit": "ratio", "ref_name": "torch.matmul f32 (highest), median over %d shapes" % len(speed)}
        for r in speed:
            key = "gemm_%s_%s_%dx%dx%d" % (r["what"].replace(" ", "_"), r["layout"], r["M"], r["N"], r["K"])
            m[key] = {"mlc": r["mlc_ms"], "ref": r["torch_ms"], "ratio": r["ratio"], "unit": "ms",
                      "ref_name": "torch.matmul f32 (highest)"}
    acc = gemm["accuracy"]
    if acc:
        for col in sorted({c for r in acc for c in r["err"] if c.startswith("mlc ")}):
            e = max(r["err"][col]["max"] if col in r["err"] else float("inf") for r in acc)
            t = max(r["err"]["torch f32"]["max"] for r in acc)
            m["accuracy_%s" % col[4:]] = {
                "mlc": e, "ref": t, "ratio": t / max(e, 1e-30), "unit": "max |C - C64| / max |C64|, worst of %d shapes" % len(acc),
                "ref_name": "torch f32 (highest) against float64, K up to %d" % max(r["K"] for r in acc)}
    dev = "the CPU" if models["device"] == "cpu" else models["device"] + " (one GPU)"
    hardware = a.hardware or "%s, torch %s" % (dev, models["torch"])
    out = {"commit": a.commit, "date": a.date, "hardware": hardware,
           "command": "%s, mlc --f32-matmul %s" % (a.command, mode), "metrics": m}
    with open(a.out, "w") as f:
        json.dump(out, f, indent=1)
        f.write("\n")
    print(json.dumps({k: round(v["ratio"], 3) for k, v in m.items() if not k.startswith("gemm_") or k in
                      ("gemm_f32_worst", "gemm_f32_median")}))


if __name__ == "__main__":
    main()
