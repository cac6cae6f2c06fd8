#!/usr/bin/env bash
# The cuda-nccl rendezvous across two machines, on one: two network
# namespaces joined by a veth pair (10.213.7.1 and .2), each with its own
# loopback, so that the only way between them is the "network".  Rank 0
# runs in the first and listens on its address (MASTER_ADDR), rank 1 in the
# second, torchrun-style variables on both; both must end with rank 0's
# blob (NCCL's unique id in a real run).  Then rank 1 alone, pointed at its
# own namespace's loopback, where no rank 0 listens, must give up at its
# deadline naming the address: what a multi-node job whose MASTER_ADDR is
# wrong prints.  Needs root and `ip netns` (Debian's iproute2); skips (77)
# without them.  Usage: netns_rendezvous.sh RENDEZVOUS_BINARY WORKDIR
set -uo pipefail
bin=$1 work=$2
mkdir -p "$work" && cd "$work" || exit 1
a=mlc_rdv_$$_a b=mlc_rdv_$$_b
cleanup() { ip netns del "$a" 2>/dev/null; ip netns del "$b" 2>/dev/null; }
trap cleanup EXIT
command -v ip >/dev/null || { echo "SKIP: no ip (iproute2)"; exit 77; }
if ! ip netns add "$a" 2>/dev/null || ! ip netns add "$b" 2>/dev/null; then
  echo "SKIP: cannot make network namespaces here (needs root)"; exit 77
fi
set -e
ip link add "v$$a" netns "$a" type veth peer name "v$$b" netns "$b"
ip -n "$a" addr add 10.213.7.1/24 dev "v$$a"
ip -n "$b" addr add 10.213.7.2/24 dev "v$$b"
for ns in "$a" "$b"; do ip -n "$ns" link set lo up; done
ip -n "$a" link set "v$$a" up
ip -n "$b" link set "v$$b" up
set +e
port=$((29000 + $$ % 1000))
run() { # NS RANK MASTER_ADDR TIMEOUT
  ip netns exec "$1" env -u OMPI_COMM_WORLD_RANK -u SLURM_PROCID RANK=$2 WORLD_SIZE=2 LOCAL_RANK=0 \
    MASTER_ADDR=$3 MASTER_PORT=$port "$bin" 7 "$4"
}
run "$a" 0 10.213.7.1 20 > r0.log 2>&1 &
p0=$!
run "$b" 1 10.213.7.1 20 > r1.log 2>&1
rc1=$?
wait $p0
rc0=$?
cat r0.log r1.log
fail=0
h0=$(grep -o 'blob [0-9a-f]*' r0.log) h1=$(grep -o 'blob [0-9a-f]*' r1.log)
if [ $rc0 -eq 0 ] && [ $rc1 -eq 0 ] && [ -n "$h0" ] && [ "$h0" = "$h1" ]; then
  echo "ok   both ranks, in two namespaces, hold rank 0's blob ($h0)"
else
  echo "FAIL the rendezvous across namespaces (exit $rc0 and $rc1)"; fail=1
fi
t0=$SECONDS
run "$b" 1 127.0.0.1 3 > r1bad.log 2>&1
rc=$? dt=$((SECONDS - t0))
cat r1bad.log
if [ $rc -ne 0 ] && grep -q "127.0.0.1:$port" r1bad.log && [ $dt -lt 15 ]; then
  echo "ok   rank 1 with no rank 0 at MASTER_ADDR gives up in about $dt s, naming 127.0.0.1:$port"
else
  echo "FAIL rank 1 with no rank 0 (exit $rc, $dt s)"; fail=1
fi
exit $fail
