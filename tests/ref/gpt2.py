"""examples/gpt2.mdl (llm.c's GPT-2) against a PyTorch GPT written here from
llm.c's train_gpt2.py description (torch 1.13 has no scaled_dot_product_attention,
so the attention is llm.c's non-flash path: masked softmax of q k^T / sqrt(hs)).

1. `mlc compile --stats`: the state_dict names and shapes of a small config equal
   torch's (less llm.c's `attn.bias` mask buffers, which are not parameters), the
   tie lm_head.weight = transformer.wte.weight is listed, and the default config
   (GPT-2 124M) counts 124,439,808 parameters.
2. `mlc run` from torch's weights: the logits within 1e-5 relative (max|d|/max|ref|).
3. One train entry (tests/ref/train_entry.c): the loss within 1e-5 relative, every
   gradient within 1e-4; then 10 AdamW steps with `mlc train`: each loss within
   1e-4 relative of torch's.

The small config: vocab 101, block_size 16, seq 13 (T < block_size: wpe's last
rows are unused), n_layer 2, n_head 2, n_embd 36 (head size 18), batch 2.

Usage: gpt2.py MLC TRAIN_ENTRY MLC_ROOT WORKDIR"""
import math
import os
import re
import subprocess
import sys

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from models import Checks, optimizer_losses, rel_err, run, run_entry, write_safetensors  # noqa: E402

CFG = dict(vocab_size=101, block_size=16, n_layer=2, n_head=2, n_embd=36)
B, T, STEPS, LR = 2, 13, 10, 1e-3
FULL_COUNT = 124_439_808


class CausalSelfAttention(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.c_attn = nn.Linear(c["n_embd"], 3 * c["n_embd"])
        self.c_proj = nn.Linear(c["n_embd"], c["n_embd"])
        self.n_head, self.n_embd = c["n_head"], c["n_embd"]
        bs = c["block_size"]
        self.register_buffer("bias", torch.tril(torch.ones(bs, bs)).view(1, 1, bs, bs))

    def forward(self, x):
        b, t, c = x.size()
        q, k, v = self.c_attn(x).split(self.n_embd, dim=2)
        q, k, v = (z.view(b, t, self.n_head, c // self.n_head).transpose(1, 2) for z in (q, k, v))
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
        att = att.masked_fill(self.bias[:, :, :t, :t] == 0, float("-inf"))
        y = F.softmax(att, dim=-1) @ v
        return self.c_proj(y.transpose(1, 2).contiguous().view(b, t, c))


class MLP(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.c_fc = nn.Linear(c["n_embd"], 4 * c["n_embd"])
        self.gelu = nn.GELU(approximate="tanh")
        self.c_proj = nn.Linear(4 * c["n_embd"], c["n_embd"])

    def forward(self, x):
        return self.c_proj(self.gelu(self.c_fc(x)))


class Block(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.ln_1 = nn.LayerNorm(c["n_embd"])
        self.attn = CausalSelfAttention(c)
        self.ln_2 = nn.LayerNorm(c["n_embd"])
        self.mlp = MLP(c)

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class GPT(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.transformer = nn.ModuleDict(dict(
            wte=nn.Embedding(c["vocab_size"], c["n_embd"]),
            wpe=nn.Embedding(c["block_size"], c["n_embd"]),
            h=nn.ModuleList([Block(c) for _ in range(c["n_layer"])]),
            ln_f=nn.LayerNorm(c["n_embd"])))
        self.lm_head = nn.Linear(c["n_embd"], c["vocab_size"], bias=False)
        self.transformer.wte.weight = self.lm_head.weight
        # llm.c's _init_weights, then LayerNorms and biases away from ones/zeros so that they count
        std_proj = 0.02 / math.sqrt(2 * c["n_layer"])
        with torch.no_grad():
            for name, p in self.named_parameters():
                if name.endswith("c_proj.weight"):
                    p.normal_(0, std_proj)
                elif p.dim() == 2:
                    p.normal_(0, 0.02)
                elif name.endswith("ln_1.weight") or name.endswith("ln_2.weight") or name.endswith("ln_f.weight"):
                    p.uniform_(0.5, 1.5)
                else:
                    p.normal_(0, 0.1)

    def forward(self, idx):
        pos = torch.arange(0, idx.size(1), dtype=torch.long)
        x = self.transformer.wte(idx) + self.transformer.wpe(pos)
        for block in self.transformer.h:
            x = block(x)
        return self.lm_head(self.transformer.ln_f(x))


def loss_of(model, tok, tgt):
    logits = model(tok.long())
    return F.cross_entropy(logits.view(-1, logits.size(-1)), tgt.long().view(-1))


LOSS = re.compile(r"^step (\d+): loss (\S+)", re.M)
PARAM = re.compile(r"^  (\S+)\s+(?:f32\[([\d, ]*)\]|= (\S+) \(tied\))", re.M)


def main():
    mlc, entry, root, work = sys.argv[1], sys.argv[2], sys.argv[3], os.path.abspath(sys.argv[4])
    model = os.path.join(root, "examples", "gpt2.mdl")
    os.makedirs(work, exist_ok=True)
    p = lambda name: os.path.join(work, name)  # noqa: E731
    defines = [f"{k}={v}" for k, v in CFG.items()] + [f"batch={B}", f"seq={T}"]
    check = Checks()
    torch.manual_seed(0)
    ref = GPT(CFG)
    # The state dict less llm.c's mask buffers (not parameters; mlc's attention takes causal=true).
    sd = {k: v.detach().clone() for k, v in ref.state_dict().items() if not k.endswith(".attn.bias")}
    write_safetensors(p("w.safetensors"), sd, {"format": "pt"})
    tok = torch.randint(0, CFG["vocab_size"], (B * STEPS, T), dtype=torch.int32)
    tgt = torch.randint(0, CFG["vocab_size"], (B * STEPS, T), dtype=torch.int32)
    np.save(p("tok.npy"), tok.numpy())
    np.save(p("tgt.npy"), tgt.numpy())
    tok[:B].numpy().tofile(p("tok.bin"))
    tgt[:B].numpy().tofile(p("tgt.bin"))

    # 1. names, shapes, the tie; the full model's count
    out = run([mlc, "compile", model, "--stats", *defines])
    shapes = {}
    listed = []
    for name, dims, tied_to in PARAM.findall(out):
        listed.append(name)
        shapes[name] = shapes[tied_to] if tied_to else [int(d) for d in dims.split(",")]
    want = {k: list(v.shape) for k, v in sd.items()}
    check(listed == list(want), f"state_dict names in torch's order ({len(listed)} of {len(want)})")
    check(shapes == want, "state_dict shapes as torch's")
    check("lm_head.weight                           = transformer.wte.weight (tied)" in out,
          "--stats lists lm_head.weight as tied to transformer.wte.weight")
    total = re.search(r"^total: ([\d,]+) parameters", out, re.M)
    small = sum(t.numel() for t in ref.parameters())
    check(total is not None and int(total.group(1).replace(",", "")) == small,
          f"small config: {total.group(1) if total else '?'} parameters = torch's {small}")
    out = run([mlc, "compile", model, "--stats"])
    total = re.search(r"^total: ([\d,]+) parameters", out, re.M)
    check(total is not None and int(total.group(1).replace(",", "")) == FULL_COUNT,
          f"default config (GPT-2 124M): {total.group(1) if total else '?'} parameters = {FULL_COUNT:,}")

    # 2. forward logits
    run([mlc, "run", model, "--target", "cpu", *defines, "--weights", p("w.safetensors"),
         "--input", f"idx={p('tok.bin')}", "--output", f"output={p('logits.bin')}"])
    got = torch.from_numpy(np.fromfile(p("logits.bin"), dtype=np.float32).reshape(B, T, CFG["vocab_size"]))
    with torch.no_grad():
        logits = ref(tok[:B].long())
    e = rel_err(got, logits)
    check(e <= 1e-5, f"logits: max|d|/max|ref| {e:.1e} (tol 1e-5), max|logit| {logits.abs().max():.3g}")

    # 3. one train entry: loss and gradients
    os.makedirs(p("entry"), exist_ok=True)
    outs = run_entry(entry, model, p("entry"), p("w.safetensors"), {"idx": p("tok.bin"), "targets": p("tgt.bin")},
                     defines)
    loss = loss_of(ref, tok[:B], tgt[:B])
    ref.zero_grad()
    loss.backward()
    el = abs(outs["loss"].item() - loss.item()) / abs(loss.item())
    check(el <= 1e-5, f"loss {outs['loss'].item():.7f} vs torch {loss.item():.7f} (rel {el:.1e}, tol 1e-5)")
    grads = {k[5:]: v for k, v in outs.items() if k.startswith("grad:")}
    names = [n for n, _ in ref.named_parameters()]
    check(sorted(grads) == sorted(names), f"one gradient per tensor ({len(grads)}), the tied one once")
    worst = max((rel_err(grads[n], prm.grad), n) for n, prm in ref.named_parameters() if n in grads)
    check(worst[0] <= 1e-4, f"gradients: worst max|d|/max|ref| {worst[0]:.1e} ({worst[1]}; tol 1e-4)")

    # 10 AdamW steps, llm.c's betas (0.9, 0.95), no weight decay
    ref2 = GPT(CFG)
    ref2.load_state_dict(ref.state_dict())
    opt = torch.optim.AdamW(ref2.parameters(), lr=LR, betas=(0.9, 0.95), eps=1e-8, weight_decay=0.0)
    want_l = optimizer_losses(ref2, opt, loss_of, tok, tgt, B, STEPS)
    r = subprocess.run([mlc, "train", model, "--target", "cpu", *defines, f"learning_rate={LR}",
                        "--weights", p("w.safetensors"), "--input", f"idx={p('tok.npy')}",
                        "--input", f"targets={p('tgt.npy')}", "--steps", str(STEPS)], capture_output=True, text=True)
    got_l = [float(x[1]) for x in LOSS.findall(r.stdout)]
    el = max((abs(a - b) / abs(b) for a, b in zip(got_l, want_l)), default=1.0)
    check(r.returncode == 0 and len(got_l) == STEPS and el <= 1e-4,
          f"{len(got_l)} AdamW losses within 1e-4 relative of torch (max {el:.1e}; "
          f"{want_l[0]:.5f} -> {want_l[-1]:.5f}) {r.stderr[-300:] if r.returncode else ''}")
    return check.finish()


if __name__ == "__main__":
    sys.exit(main())
