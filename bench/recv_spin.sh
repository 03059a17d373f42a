#!/bin/bash
# recv --spin against recv's default idle policy: gen (socket engine, CPU 0, namespace A) at
# RATE (0.02M) for 6 s -> recv (CPU 1, namespace B), RUNS (3) times each, interleaved; prints
# each run's received, lost, p50 and p99 one-way latency, and recv's busy share. Root.
# Results: bench/results/*-recv-spin.txt, summed up in bench/IDLE.md.
set -u
W=${WIRESPEED:-$(dirname "$0")/../target/release/wirespeed}
RUNS=${RUNS:-3}
RATE=${RATE:-0.02M}
P=wsrs$$
cleanup() {
  ip netns del ${P}a 2>/dev/null; ip netns del ${P}b 2>/dev/null
  rm -f /tmp/$P-r.json /tmp/$P-r.err
}
trap cleanup EXIT
ip netns add ${P}a; ip netns add ${P}b
ip link add ${P}a netns ${P}a type veth peer name ${P}b netns ${P}b
ip -n ${P}a link set ${P}a up; ip -n ${P}b link set ${P}b up
echo "# $(lscpu | sed -n 's/^Model name: *//p'), $(nproc) CPUs, kernel $(uname -r), $(date -u +%F)"
for run in $(seq $RUNS); do
  for which in default spin; do
    EXTRA=""; [ $which = spin ] && EXTRA="--spin"
    ip netns exec ${P}b taskset -c 1 $W recv --port xdp:${P}b --json -q $EXTRA > /tmp/$P-r.json 2>/tmp/$P-r.err &
    R=$!
    sleep 1
    ip netns exec ${P}a taskset -c 0 $W gen --port xdp:${P}a --engine socket --rate $RATE --duration 6 -q > /dev/null 2>&1
    sleep 0.5
    kill -INT $R; wait $R
    /usr/bin/python3 - "$which" "$run" /tmp/$P-r.json <<'PY'
import json, sys
which, run, path = sys.argv[1:]
j = json.load(open(path))
g = j["generators"][0]
lat = g["latency_ns"]
print(f"{which} run {run}: received {j['packets']}, lost {g['lost']}, "
      f"p50 {lat['p50'] / 1e3:.1f} us, p99 {lat['p99'] / 1e3:.1f} us, busy {j['cpu']['busy']:.1%}")
PY
  done
done
