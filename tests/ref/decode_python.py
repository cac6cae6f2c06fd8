"""The Python binding's Model.generate against PyTorch: an artifact of
examples/minillm_causal.mdl (its prefill and step entries), with the weights
of decode.py, must give PyTorch's f32 greedy tokens (32 of them) and the
prefill logits at the prompt's last position within 1e-4 (run("prefill", ...)
on the prompt's second chunk, whose first chunk the caches hold from
generate), with the scalar pos as a 0-d array; and 8 sampled tokens
(temperature 0.8, top-k 20, seed 7) equal to `mlc generate`'s.

Usage: decode_python.py MLC MODEL.mdl WORKDIR"""
import os
import subprocess
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))
import mlc as mlcpy  # noqa: E402
from decode import CFG, DEFINES, NEW, PROMPT_LEN, TOL, CausalMiniLLM, torch_greedy  # noqa: E402
from models import rel_err, write_safetensors  # noqa: E402


def main():
    exe, model, work = sys.argv[1:4]
    os.makedirs(work, exist_ok=True)
    art = os.path.join(work, "art")
    r = subprocess.run([exe, "compile", model, *DEFINES, "--target", "cpu", "--cpu", "native", "--no-train", "-o", art],
                       capture_output=True, text=True)
    if r.returncode:
        sys.exit(f"mlc compile failed ({r.returncode}):\n{r.stderr}")
    torch.manual_seed(1)
    ref = CausalMiniLLM(**CFG).eval()
    weights = os.path.join(work, "w.safetensors")
    write_safetensors(weights, {k: v.detach() for k, v in ref.state_dict().items()}, {"format": "pt"})
    prompt = torch.randint(0, CFG["vocab"], (PROMPT_LEN,)).tolist()
    want, want_logits = torch_greedy(ref, prompt, NEW)
    m = mlcpy.load(art)
    m.load_weights(weights)
    got = m.generate(prompt, NEW)
    ok = got == want
    print(f"{'ok' if ok else 'FAIL'}: Model.generate's {NEW} greedy tokens {'equal' if ok else 'differ from'} PyTorch's")
    if not ok:
        print(f"  mlc   {got}\n  torch {want}")
    # the last prompt position's logits, through run() directly: the prompt's second chunk
    chunk = m.entries()["prefill"]["inputs"][0][2][1]
    at = (PROMPT_LEN - 1) // chunk * chunk
    tok = np.zeros((1, chunk), np.int32)
    tok[0, :PROMPT_LEN - at] = prompt[at:]
    logits = m.run("prefill", tokens=tok, pos=np.int32(at))[0, PROMPT_LEN - at - 1]
    err = rel_err(torch.from_numpy(logits), want_logits[0])
    print(f"{'ok' if err <= TOL else 'FAIL'}: prefill logits at the prompt's last position: relative error {err:.3g} "
          f"(tolerance {TOL})")
    ok &= err <= TOL
    # sampling: the runtime's loop (<name>_generate), so the CLI's tokens for the same weights and seed
    sampled = m.generate(prompt, 8, temperature=0.8, top_k=20, seed=7)
    r = subprocess.run([exe, "generate", model, *DEFINES, "--weights", weights, "--prompt", ",".join(map(str, prompt)),
                        "--max-new", "8", "--temperature", "0.8", "--top-k", "20", "--seed", "7"], capture_output=True, text=True)
    cli = [int(t) for t in next(x for x in r.stdout.splitlines() if x.startswith("tokens:")).split()[1:]] if not r.returncode else None
    same = sampled == cli
    print(f"{'ok' if same else 'FAIL'}: sampled (temperature 0.8, top-k 20, seed 7): {sampled}, mlc generate's {cli}")
    ok &= same
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
