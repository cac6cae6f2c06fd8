"""Weight sharing (`head.weight = embed.weight`) against PyTorch 1.13.

A small tied-embedding LM: Embedding(50, 16), a residual MLP, LayerNorm and
a head Linear(16, 50, bias=False) whose weight is the embedding's, as
llm.c's GPT-2 (`lm_head.weight = wte.weight`), with cross_entropy:

1. Names and count: `mlc compile --stats` lists torch's state_dict() keys
   (head.weight as a tie of embed.weight) and torch's parameter count
   (sum of numel over parameters(), which counts the shared tensor once).
2. One train entry (tests/ref/train_entry.c) from torch's weights: the loss
   within 1e-5 relative, and every gradient within 1e-4 (max|d| / max|ref|);
   embed.weight's gradient is the sum of both uses, and there is no other.
3. 5 AdamW steps with `mlc train`: each loss within 1e-4 relative, and the
   exported weights within 1e-4 of torch's; the export has both names, equal.
4. Loading: a file with only one of the two names gives the same loss; one
   whose two names differ is refused, naming both.

Usage: tied_lm.py MLC TRAIN_ENTRY WORKDIR"""
import os
import re
import subprocess
import sys

import numpy as np
import torch
import torch.nn as nn

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from models import Checks, optimizer_losses, read_safetensors, rel_err, write_safetensors  # noqa: E402

V, D, B, T, STEPS, LR = 50, 16, 4, 8, 5, 1e-2
MODEL = f"""config {{ vocab = {V}  dim = {D}  batch = {B}  seq = {T} }}

module TiedLM(vocab, dim) {{
    embed = Embedding(vocab, dim)
    mlp   = Sequential(Linear(dim, 4*dim), GELU(), Linear(4*dim, dim))
    norm  = LayerNorm(dim)
    head  = Linear(dim, vocab, bias=false)
    head.weight = embed.weight
    forward(idx: i32[batch, seq]) {{
        x = embed(idx)
        x = x + mlp(x)
        return head(norm(x))
    }}
}}

train TiedLM {{
    input tokens: i32[batch, seq]
    input targets: i32[batch, seq]
    loss      = cross_entropy(model(tokens), targets)
    optimizer = AdamW(lr={LR})
}}
"""


class TiedLM(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(V, D)
        self.mlp = nn.Sequential(nn.Linear(D, 4 * D), nn.GELU(), nn.Linear(4 * D, D))
        self.norm = nn.LayerNorm(D)
        self.head = nn.Linear(D, V, bias=False)
        self.head.weight = self.embed.weight

    def forward(self, idx):
        x = self.embed(idx)
        x = x + self.mlp(x)
        return self.head(self.norm(x))


def loss_of(model, tok, tgt):
    return nn.functional.cross_entropy(model(tok.long()).reshape(-1, V), tgt.long().reshape(-1))


LOSS = re.compile(r"^step (\d+): loss (\S+)", re.M)


def main():
    mlc, entry, work = sys.argv[1], sys.argv[2], os.path.abspath(sys.argv[3])
    os.makedirs(work, exist_ok=True)
    p = lambda name: os.path.join(work, name)  # noqa: E731
    check = Checks()
    with open(p("tied.mdl"), "w") as f:
        f.write(MODEL)
    torch.manual_seed(0)
    ref = TiedLM()
    with torch.no_grad():  # LayerNorm starts at ones/zeros: make it count
        ref.norm.weight.uniform_(0.5, 1.5)
        ref.norm.bias.uniform_(-0.5, 0.5)
    sd = {k: v.detach().clone() for k, v in ref.state_dict().items()}
    write_safetensors(p("w.safetensors"), sd, {"format": "pt"})
    tok = torch.randint(0, V, (B * STEPS, T), dtype=torch.int32)
    tgt = torch.randint(0, V, (B * STEPS, T), dtype=torch.int32)
    np.save(p("tok.npy"), tok.numpy())
    np.save(p("tgt.npy"), tgt.numpy())
    tok[:B].numpy().tofile(p("tok.bin"))
    tgt[:B].numpy().tofile(p("tgt.bin"))

    # 1. names and count
    r = subprocess.run([mlc, "compile", p("tied.mdl"), "--stats"], capture_output=True, text=True)
    listed = re.findall(r"^  (\S+)\s+(?:f32\[|= )", r.stdout, re.M)
    total = re.search(r"^total: ([\d,]+) parameters", r.stdout, re.M)
    nparams = sum(t.numel() for t in ref.parameters())
    check(r.returncode == 0 and listed == list(ref.state_dict().keys()),
          f"state_dict names as torch's, tie included: {listed}")
    check(total is not None and int(total.group(1).replace(",", "")) == nparams,
          f"parameter count {total.group(1) if total else '?'} = torch's {nparams} (the shared tensor once)")
    check("head.weight                              = embed.weight (tied)" in r.stdout, "--stats shows the tie")

    # 2. loss and gradients of one train entry
    def entry_run(weights, outdir):
        os.makedirs(outdir, exist_ok=True)
        cmd = [entry, p("tied.mdl"), outdir, "--weights", weights, "--input", f"tokens={p('tok.bin')}",
               "--input", f"targets={p('tgt.bin')}"]
        r = subprocess.run(cmd, capture_output=True, text=True)
        if r.returncode:
            return None, r.stderr
        outs = {}
        with open(os.path.join(outdir, "outputs.txt")) as f:
            for line in f:
                name, file, dtype, *dims = line.split()
                outs[name] = torch.from_numpy(np.fromfile(os.path.join(outdir, file), dtype=np.float32).reshape(
                    [int(d) for d in dims]))
        return outs, ""

    outs, err = entry_run(p("w.safetensors"), p("entry"))
    check(outs is not None, "the train entry runs " + err)
    loss = loss_of(ref, tok[:B], tgt[:B])
    ref.zero_grad()
    loss.backward()
    if outs:
        lname = "loss" if "loss" in outs else "output"
        el = abs(outs[lname].item() - loss.item()) / abs(loss.item())
        check(el <= 1e-5, f"first loss {outs[lname].item():.7f} vs torch {loss.item():.7f} (rel {el:.1e}, tol 1e-5)")
        grads = {k[5:]: v for k, v in outs.items() if k.startswith("grad:")}
        names = [n for n, _ in ref.named_parameters()]
        check(sorted(grads) == sorted(names), f"one gradient per tensor: {sorted(grads)} = {sorted(names)}")
        for n, prm in ref.named_parameters():
            if n in grads:
                e = rel_err(grads[n], prm.grad)
                check(e <= 1e-4, f"grad {n}: max|d|/max|ref| {e:.1e} (tol 1e-4)")

    # 3. AdamW steps
    ref2 = TiedLM()
    ref2.load_state_dict(sd)
    opt = torch.optim.AdamW(ref2.parameters(), lr=LR)
    want = optimizer_losses(ref2, opt, loss_of, tok, tgt, B, STEPS)
    r = subprocess.run([mlc, "train", p("tied.mdl"), "--target", "cpu", "--weights", p("w.safetensors"),
                        "--input", f"tokens={p('tok.npy')}", "--input", f"targets={p('tgt.npy')}",
                        "--steps", str(STEPS), "--export", p("out.safetensors")], capture_output=True, text=True)
    got = [float(x[1]) for x in LOSS.findall(r.stdout)]
    el = max((abs(a - b) / abs(b) for a, b in zip(got, want)), default=1.0)
    check(r.returncode == 0 and len(got) == STEPS and el <= 1e-4,
          f"{len(got)} AdamW losses within 1e-4 relative of torch (max {el:.1e}) {r.stderr[-300:] if r.returncode else ''}")
    if r.returncode == 0:
        out, _ = read_safetensors(p("out.safetensors"))
        check(sorted(out) == sorted(sd), f"the export has torch's state_dict keys: {sorted(out)}")
        check(torch.equal(out.get("head.weight", torch.zeros(1)), out.get("embed.weight", torch.ones(1))),
              "the export's head.weight and embed.weight are equal")
        for k, v in ref2.state_dict().items():
            if k in out:
                e = rel_err(out[k], v.detach())
                check(e <= 1e-4, f"after {STEPS} steps {k}: max|d|/max|ref| {e:.1e} (tol 1e-4)")

    # 4. loading
    for keep in ("embed.weight", "head.weight"):
        only = {k: v for k, v in sd.items() if k != ("head.weight" if keep == "embed.weight" else "embed.weight")}
        write_safetensors(p(f"only_{keep}.safetensors"), only, {"format": "pt"})
        o, err = entry_run(p(f"only_{keep}.safetensors"), p(f"entry_{keep}"))
        same = o is not None and outs is not None and torch.equal(o["loss" if "loss" in o else "output"],
                                                                 outs["loss" if "loss" in outs else "output"])
        check(same, f"weights with only {keep}: the same loss {err}")
    bad = dict(sd)
    bad["head.weight"] = sd["embed.weight"] + 1e-3
    write_safetensors(p("differ.safetensors"), bad, {"format": "pt"})
    o, err = entry_run(p("differ.safetensors"), p("entry_differ"))
    want_err = (f"{p('differ.safetensors')}: tensors 'embed.weight' and 'head.weight' differ, but the model ties "
                "them (one shared weight): give both the same values, or only one of the names")
    check(o is None and want_err in err, f"tied tensors that differ are refused: {err.strip()}")
    return check.finish()


if __name__ == "__main__":
    sys.exit(main())
