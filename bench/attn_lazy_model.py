#!/usr/bin/env python3
# A model in numpy of the CUDA attention forward's online softmax for one query
# row (mlc_attn_fwd_wg: blocks of 128 keys, P rounded to bf16 before P V, f32
# sums), eager (the reference maximum moved at every block) against lazy (moved
# only when a block's scaled maximum passes it by more than 8 in base 2: 4f444a7,
# MLC_ATTN_LAZY), each against float64, over logits scaled 1x to 100x, with and
# without a rising trend.  Prints the worst relative error of each; the
# log-sum-exp must agree with float64's to 1e-4 either way.  Not the kernel:
# its check is the attention op cases on the GPU.
#   /usr/bin/python3 bench/attn_lazy_model.py
import numpy as np

def bf16(x):
    x=np.asarray(x,np.float32); b=x.view(np.uint32).astype(np.uint64)
    r=((b+0x7FFF+((b>>16)&1))>>16)<<16
    return r.astype(np.uint32).view(np.float32)
def fwd(s, v, sl2, lazy):
    S=s.shape[0]; m=-np.inf; l=0.0; o=np.zeros(v.shape[1],np.float32)
    for j in range(0,S,128):
        c=np.float32(s[j:j+128].max()*sl2)
        if lazy is None or m==-np.inf or c>m+lazy:
            mn=max(m,c); ms=0.0 if mn==-np.inf else mn; corr=np.float32(2.0**(m-ms)); m=mn
        else: ms=m; corr=np.float32(1)
        p=np.exp2(np.float32(s[j:j+128]*sl2-ms)).astype(np.float32)
        l=l*corr+p.sum(dtype=np.float32); o=o*corr+bf16(p)@v[j:j+128]
    return o/l, m+np.log2(l)
rng=np.random.default_rng(0); worst=[0,0]
for scale in [1,4,20,100]:
  for t in range(20):
    S=1024; s=(rng.standard_normal(S)*scale).astype(np.float32); s+=np.linspace(0,scale*3,S).astype(np.float32)*(t%2)
    v=bf16(rng.standard_normal((S,128)).astype(np.float32)); sl2=np.float32(1/np.sqrt(128)*1.4426950408889634)
    p=np.exp2(s.astype(np.float64)*sl2-(s.max()*sl2)); ref=(p@v.astype(np.float64))/p.sum(); lse=s.max()*sl2+np.log2(p.sum())
    for k,lz in enumerate([None,8.0]):
        o,ls=fwd(s,v,sl2,lz); e=np.abs(o-ref).max()/np.abs(ref).max(); worst[k]=max(worst[k],e)
        assert abs(ls-lse)<1e-4*max(1,abs(lse)), (ls,lse)
print("max rel err eager-rescale %.2e lazy %.2e"%tuple(worst))
