#!/usr/bin/env bash
# A rank that dies mid-training must not hang the others: under mpirun the
# whole job ends, with a non-zero status and a message naming the dead rank,
# well within 60 s.  Usage: fsdp_kill.sh MLC MODEL.mdl WORKDIR
set -uo pipefail
mlc=$1 model=$2 work=$3
command -v mpirun >/dev/null || { echo "SKIP: mpirun not installed (Debian openmpi-bin)"; exit 77; }
# Under mpirun the ASan build's leak check is off: Open MPI keeps what
# MPI_Init allocated, partly in plugins it has unloaded by exit, so the
# reports cannot be told from mlc's.  The single-process runs keep it.
nolsan=(env "ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0")
mkdir -p "$work"
log=$work/kill.log
"${nolsan[@]}" mpirun --allow-run-as-root --oversubscribe --bind-to none -np 2 "$mlc" train "$model" --target cpu dim=64 layers=2 heads=4 \
  vocab=256 seq=32 batch=2 compute=f32 --threads 1 --steps 100000 >"$log" 2>&1 &
job=$!
for _ in $(seq 600); do grep -q "^step 3:" "$log" && break; sleep 0.1; done
grep -q "^step 3:" "$log" || { echo "FAIL: training never reached step 3"; cat "$log"; kill $job; exit 1; }
victim=$(pgrep -P $job -f "mlc train" | tail -1)
[ -n "$victim" ] || { echo "FAIL: no rank process under mpirun ($job)"; kill $job; exit 1; }
t0=$(date +%s.%N)
kill -9 "$victim"
# Wait at most 60 s for the job to end.
for _ in $(seq 600); do kill -0 $job 2>/dev/null || break; sleep 0.1; done
if kill -0 $job 2>/dev/null; then echo "FAIL: the job still runs 60 s after rank pid $victim was killed"; kill -9 $job; exit 1; fi
wait $job; rc=$?
dt=$(echo "$(date +%s.%N) - $t0" | bc)
echo "killed rank pid $victim: the job ended after ${dt} s with status $rc"
tail -n 12 "$log" | sed 's/^/  | /'
[ $rc -ne 0 ] || { echo "FAIL: exit status 0 after a rank died"; exit 1; }
grep -Eq "signal 9|exited on signal|Killed" "$log" || { echo "FAIL: no message naming the dead rank"; exit 1; }
echo "PASS"
