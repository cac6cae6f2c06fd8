set -u
. tests/gpu/env.sh /tmp/ab
mkdir -p $OUT
python3 -c "import torch; torch.manual_seed(0); torch.randint(0, 32000, (12 * 8 * 1024 + 1,), dtype=torch.int32).numpy().tofile('/tmp/tokens.bin')"
for round in 1 2; do for b in build-gpu build-gpu-a; do
  LD_LIBRARY_PATH=$PWD/$b/lib timeout 100 $b/mlc train examples/minillm.mdl --target cuda --steps 12 --data /tmp/tokens.bin --data-dtype i32 > $OUT/train-$b-$round.log 2>&1
  python3 -c "
import re,statistics
t=open('$OUT/train-$b-$round.log').read()
v=[float(ms) for n,ms in re.findall(r'step (\d+): loss [-0-9.e]+ \(([0-9.]+) ms[,)]',t) if int(n)>=3]
print('$b round $round: median of steps 3-12', statistics.median(v) if v else t[-300:])"
done; done
