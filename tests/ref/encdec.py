"""Cross-attention training (issue 27): tests/ref/encdec.mdl, an encoder-
decoder whose decoder attends over the encoder's output (9 positions from
5), plainly and causally, against a PyTorch module built from nn modules
with the same safetensors weights (biases made non-zero):
- `mlc run`: the logits within 1e-5 of torch;
- `mlc train`: 5 AdamW steps, the losses within 1e-5 of torch's.
The gradients alone are checked three ways by grad_check.py (mha_cross_*).
Usage: encdec.py MLC REPO_ROOT WORKDIR"""
import os
import re
import subprocess
import sys

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

from models import write_safetensors

B, S, T, D, H, V = 3, 9, 5, 16, 2, 13
TOL = 1e-5


def attend(m, q, kv, causal):
    mask = torch.triu(torch.ones(q.shape[1], kv.shape[1], dtype=torch.bool), diagonal=1) if causal else None
    return m(q, kv, kv, need_weights=False, attn_mask=mask)[0]


class Encoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(V, D)
        self.attn = nn.MultiheadAttention(D, H, batch_first=True)
        self.norm = nn.LayerNorm(D)

    def forward(self, ids):
        x = self.embed(ids)
        return self.norm(x + attend(self.attn, x, x, False))


class Decoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(V, D)
        self.self_attn = nn.MultiheadAttention(D, H, batch_first=True)
        self.cross = nn.MultiheadAttention(D, H, batch_first=True)
        self.cross_causal = nn.MultiheadAttention(D, H, batch_first=True)
        self.head = nn.Linear(D, V)

    def forward(self, ids, memory):
        x = self.embed(ids)
        x = x + attend(self.self_attn, x, x, True)
        x = x + attend(self.cross, x, memory, False)
        x = x + attend(self.cross_causal, x, memory, True)
        return self.head(x)


class Seq2Seq(nn.Module):
    def __init__(self):
        super().__init__()
        self.encoder = Encoder()
        self.decoder = Decoder()

    def forward(self, src, tgt):
        return self.decoder(tgt, self.encoder(src))


def main():
    mlc, root, work = sys.argv[1], sys.argv[2], os.path.abspath(sys.argv[3])
    os.makedirs(work, exist_ok=True)
    model = os.path.join(root, "tests", "ref", "encdec.mdl")
    p = lambda name: os.path.join(work, name)  # noqa: E731
    torch.manual_seed(0)
    net = Seq2Seq()
    with torch.no_grad():  # PyTorch starts attention and LayerNorm biases at zero; make them count
        for name, t in net.named_parameters():
            if name.endswith("bias"):
                t.normal_(0, 0.1)
    sd = {k: v.detach().clone() for k, v in net.state_dict().items()}
    write_safetensors(p("w.safetensors"), sd, {"format": "pt"})
    src = torch.randint(0, V, (B, S), dtype=torch.int32)
    tgt = torch.randint(0, V, (B, T), dtype=torch.int32)
    targets = torch.randint(0, V, (B, T), dtype=torch.int32)
    for name, t in (("src", src), ("tgt", tgt), ("targets", targets)):
        np.save(p(name + ".npy"), t.numpy())
        t.numpy().tofile(p(name + ".bin"))
    failed = 0

    def check(what, ok, detail=""):
        nonlocal failed
        failed += not ok
        print(("ok   " if ok else "FAIL ") + what + ("" if ok else "\n     " + detail))

    r = subprocess.run([mlc, "run", model, "--target", "cpu", "--weights", p("w.safetensors"),
                        "--input", f"src_ids={p('src.bin')}", "--input", f"tgt_ids={p('tgt.bin')}",
                        "--output", f"output={p('logits.bin')}"], capture_output=True, text=True)
    got = np.fromfile(p("logits.bin"), dtype=np.float32) if r.returncode == 0 else np.zeros(0, np.float32)
    want = net(src.long(), tgt.long()).detach().numpy().reshape(-1)
    err = float(np.abs(got - want).max()) if got.size == want.size else float("inf")
    check(f"mlc run: logits [{B}, {T}, {V}] within {TOL} of torch (max {err:.2e})", err <= TOL, r.stderr)

    opt = torch.optim.AdamW(net.parameters(), lr=1e-2)
    losses = []
    for _ in range(5):
        opt.zero_grad()
        loss = F.cross_entropy(net(src.long(), tgt.long()).reshape(-1, V), targets.long().reshape(-1))
        loss.backward()
        opt.step()
        losses.append(loss.item())
    r = subprocess.run([mlc, "train", model, "--target", "cpu", "--weights", p("w.safetensors"), "--steps", "5",
                        "--input", f"src_ids={p('src.npy')}", "--input", f"tgt_ids={p('tgt.npy')}",
                        "--input", f"targets={p('targets.npy')}"], capture_output=True, text=True)
    got = [float(v) for v in re.findall(r"^step \d+: loss (\S+) ", r.stdout, re.M)]
    err = max(abs(a - b) for a, b in zip(got, losses)) if len(got) == 5 else float("inf")
    check(f"mlc train: 5 AdamW losses within {TOL} of torch (max {err:.2e}; {losses[0]:.4f} -> {losses[-1]:.4f})",
          err <= TOL, f"got {got}, want {losses}\n{r.stdout}{r.stderr}")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
