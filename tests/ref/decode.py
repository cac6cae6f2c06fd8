"""`mlc generate` against PyTorch: incremental decoding with the KV caches of a
decode block (examples/minillm_causal.mdl) must follow PyTorch's f32 greedy
decode of the same model, from the same random weights (saved as safetensors).

- The first 32 new tokens are PyTorch's: its greedy decode recomputes the whole
  sequence at every step (no cache), so it checks the cache, its positions and
  the masking as well as the arithmetic.
- Each new token's logits (the prefill's for the first, then each step's)
  match PyTorch's at that position to a relative error (max |mlc - torch| /
  max |torch|) of 1e-4 or less.
- The prompt is longer than the prefill entry's 16 tokens, so it goes in two
  chunks, the second padded.
- The check has teeth: one weight changed in the file gives other tokens.
- Sampling with a seed repeats itself; bad prompts are clear errors.

With --target spirv (a Vulkan device: lavapipe in CI; exit 77 without one)
the greedy tokens, the logits and the teeth check run through the SPIR-V
target's attention_kv and the rest of its kernels, under the validation
layer when MLC_VK_VALIDATE=1; sampling and the errors are the driver's and
run on the CPU only.  --target cuda does the same through the CUDA target
(its attention_kv and GEMV; exit 77 without a GPU).

Usage: decode.py MLC MODEL.mdl WORKDIR [--target spirv|cuda]"""
import os
import subprocess
import sys

import numpy as np
import torch
import torch.nn as nn

from models import MiniLLM, rel_err, write_safetensors

CFG = dict(vocab=512, dim=128, layers=2, heads=4)
DEFINES = ["batch=1", "max_ctx=64", "prefill=16"] + [f"{k}={v}" for k, v in CFG.items()]
PROMPT_LEN, NEW = 21, 32
TOL = 1e-4


class CausalMiniLLM(MiniLLM):
    """models.MiniLLM with the causal mask (nn.MultiheadAttention's attn_mask,
    True where a position may not look), as MultiheadAttention(causal=true)."""

    def forward(self, idx):
        t = idx.shape[1]
        mask = torch.triu(torch.ones(t, t, dtype=torch.bool), 1)
        x = self.embed(idx)
        for layer in self.layers:
            h = layer.norm1(x)
            a, _ = layer.attn(h, h, h, need_weights=False, attn_mask=mask)
            x = x + a
            x = x + layer.ffn(layer.norm2(x))
        return self.head(x)


def torch_greedy(model, prompt, n):
    """PyTorch's f32 greedy decode: the whole sequence again at each step."""
    seq, logits = list(prompt), []
    with torch.no_grad():
        for _ in range(n):
            out = model(torch.tensor([seq], dtype=torch.long))[0, -1]
            logits.append(out)
            seq.append(int(torch.argmax(out)))
    return seq[len(prompt):], torch.stack(logits)


TARGET = ["--threads", "2"]


def generate(mlc, model, weights, prompt, n, work, extra=()):
    logits = os.path.join(work, "logits.bin")
    cmd = [mlc, "generate", model, *DEFINES, *TARGET, "--weights", weights, "--prompt",
           ",".join(map(str, prompt)), "--max-new", str(n), "--logits", logits, *extra]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"mlc generate failed ({r.returncode}):\n{r.stderr}")
    if "Vulkan validation" in r.stderr:  # MLC_VK_VALIDATE=1 on a Vulkan target: a message of the layer
        sys.exit(f"FAIL: Vulkan validation messages:\n{r.stderr}")
    line = [x for x in r.stdout.splitlines() if x.startswith("tokens:")][0]
    toks = [int(x) for x in line.split()[1:]]
    got = torch.from_numpy(np.fromfile(logits, dtype=np.float32).reshape(len(toks), CFG["vocab"]))
    return toks, got, r.stdout


def expect_error(mlc, model, weights, args, words):
    r = subprocess.run([mlc, "generate", model, *DEFINES, "--weights", weights, *args], capture_output=True, text=True)
    ok = r.returncode in (1, 2) and all(w in r.stderr for w in words) and "internal" not in r.stderr
    print(f"{'ok' if ok else 'FAIL'}: {' '.join(args)} -> exit {r.returncode}: {r.stderr.strip()}")
    return ok


def main():
    global TARGET
    mlc, model, work = sys.argv[1:4]
    os.makedirs(work, exist_ok=True)
    gpu = sys.argv[5] if sys.argv[4:5] == ["--target"] and sys.argv[5:6] in (["spirv"], ["cuda"]) else None
    if gpu:
        if subprocess.run([mlc, "devices", "--target", gpu], capture_output=True).returncode != 0:
            print(f"no {gpu} device")
            sys.exit(77)
        TARGET = ["--target", gpu]
    torch.manual_seed(0)
    ref = CausalMiniLLM(**CFG).eval()
    with torch.no_grad():  # the attention biases start at zero in PyTorch; make them count
        for p in ref.parameters():
            if p.dim() == 1:
                p.add_(torch.randn_like(p) * 0.1)
    state = {k: v.detach().clone() for k, v in ref.state_dict().items()}
    weights = os.path.join(work, "decode.safetensors")
    write_safetensors(weights, state, {"format": "pt"})
    prompt = torch.randint(0, CFG["vocab"], (PROMPT_LEN,)).tolist()

    want_toks, want_logits = torch_greedy(ref, prompt, NEW)
    top2 = torch.topk(want_logits, 2, dim=-1).values
    gap = float((top2[:, 0] - top2[:, 1]).min())
    toks, got, out = generate(mlc, model, weights, prompt, NEW, work)
    print(out.strip())
    ok = True
    same = sum(a == b for a, b in zip(toks, want_toks))
    first_diff = next((i for i, (a, b) in enumerate(zip(toks, want_toks)) if a != b), None)
    print(f"greedy tokens: {same}/{NEW} equal to PyTorch's f32 greedy decode (smallest top-1/top-2 logit gap {gap:.3g})")
    if toks != want_toks:
        print(f"FAIL: first difference at new token {first_diff}\n  mlc   {toks}\n  torch {want_toks}")
        ok = False
    # Logits where the sequences agree (after a difference they see other tokens).
    k = NEW if first_diff is None else first_diff + 1
    errs = [rel_err(got[i], want_logits[i]) for i in range(k)]
    print(f"logits: worst relative error {max(errs):.3g} over {k} tokens (prefill {errs[0]:.3g}, "
          f"steps {max(errs[1:], default=0):.3g}; tolerance {TOL})")
    ok &= max(errs) <= TOL

    # The same check must fail on other weights: change one weight a little.
    bad = dict(state)
    bad["layers.1.ffn.2.weight"] = bad["layers.1.ffn.2.weight"] * 1.05
    bad_file = os.path.join(work, "decode_bad.safetensors")
    write_safetensors(bad_file, bad, {"format": "pt"})
    bad_toks, bad_logits, _ = generate(mlc, model, bad_file, prompt, NEW, work)
    caught = bad_toks != want_toks or rel_err(bad_logits, want_logits) > TOL
    print(f"{'ok' if caught else 'FAIL'}: with layers.1.ffn.2.weight * 1.05 the check fails "
          f"(relative error {rel_err(bad_logits[:1], want_logits[:1]):.3g})")
    ok &= caught
    if gpu:
        sys.exit(0 if ok else 1)

    # Sampling: the same seed gives the same tokens.
    s1, _, _ = generate(mlc, model, weights, prompt, 8, work, ["--temperature", "0.8", "--top-k", "20", "--seed", "7"])
    s2, _, _ = generate(mlc, model, weights, prompt, 8, work, ["--temperature", "0.8", "--top-k", "20", "--seed", "7"])
    print(f"{'ok' if s1 == s2 else 'FAIL'}: sampling with --seed 7 twice: {s1} and {s2}")
    ok &= s1 == s2

    ok &= expect_error(mlc, model, weights, ["--prompt", "1,x", "--max-new", "2"], ["--prompt", "'x'"])
    ok &= expect_error(mlc, model, weights, ["--prompt", "", "--max-new", "2"], ["--prompt", "no tokens"])
    ok &= expect_error(mlc, model, weights, ["--prompt", "1,512", "--max-new", "2"], ["512", "vocabulary"])
    ok &= expect_error(mlc, model, weights, ["--prompt", "1,2", "--max-new", "64"], ["max_ctx is 64"])
    ok &= expect_error(mlc, model, weights, ["--prompt", "1,2"], ["--max-new"])
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
