#!/bin/bash
# recv at its defaults against the old rings (--ring-size 1024 --frames 4096): gen (socket
# engine, CPU 0, namespace A) at RATE (0.2M), 1,000,000 packets -> recv (CPU 1, namespace B),
# RUNS times each, interleaved; prints received, lost and rx_ring_full per run. Root.
# NOISE=1 adds a busy loop on the receiver's CPU. Results: bench/results/*-recv-defaults.txt.
set -u
W=${WIRESPEED:-$(dirname "$0")/../target/release/wirespeed}
RUNS=${RUNS:-5}
RATE=${RATE:-0.2M}
P=wsrd$$
NOISE_PID=
cleanup() {
  [ -n "$NOISE_PID" ] && kill "$NOISE_PID"
  ip netns del ${P}a 2>/dev/null; ip netns del ${P}b 2>/dev/null
  rm -f /tmp/$P-r.json /tmp/$P-r.err /tmp/$P-g.json /tmp/$P-g.err
}
trap cleanup EXIT
ip netns add ${P}a; ip netns add ${P}b
ip link add ${P}a netns ${P}a type veth peer name ${P}b netns ${P}b
ip -n ${P}a link set ${P}a up; ip -n ${P}b link set ${P}b up
MAC=$(ip -n ${P}b -j link show ${P}b | python3 -c 'import json,sys; print(json.load(sys.stdin)[0]["address"])')
# NOISE=1: a busy loop shares the receiver's CPU (as a noisy neighbour or a stolen vCPU would).
if [ "${NOISE:-0}" = 1 ]; then taskset -c 1 sh -c 'while :; do :; done' & NOISE_PID=$!; fi
for run in $(seq $RUNS); do
  for which in old new; do
    EXTRA=""; [ $which = old ] && EXTRA="--ring-size 1024 --frames 4096"
    ip netns exec ${P}b taskset -c 1 $W recv --port xdp:${P}b --expect 1000000 --duration 9 --json -q $EXTRA > /tmp/$P-r.json 2>/tmp/$P-r.err &
    R=$!
    sleep 1.5
    ip netns exec ${P}a taskset -c 0 $W gen --port xdp:${P}a --dst-mac $MAC --rate $RATE --count 1000000 -q --json > /tmp/$P-g.json 2>/tmp/$P-g.err
    wait $R
    python3 -c "
import json
r=json.load(open('/tmp/$P-r.json')); g=r.get('generators') or []
lost=sum(x.get('lost',0) for x in g)
print('$which run $run: received', sum(x.get('received',0) for x in g), 'lost', lost, 'rx_ring_full', r['drops']['rx_ring_full'], 'rss_MiB', round(r.get('peak_rss_bytes',0)/2**20,1))"
  done
done
