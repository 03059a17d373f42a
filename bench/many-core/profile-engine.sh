#!/usr/bin/env bash
# Where the kernel engine's time goes as more CPUs send at once (issue 33: from 4 CPUs it
# scales, from more than four the whole machine's rate collapses). For each sender count K
# (SENDERS, default "4 8"): a veth pair of 8 queues, an xdpdrop sink on one end, the kernel
# engine from CPUs 0..K-1 on the other (on veth the sink's receive work runs on the senders'
# CPUs); during the steady middle of the run, each CPU's busy share from /proc/stat (busy
# CPUs point at something spun on, idle ones at something waited for) and a system-wide
# perf profile (cpu-clock, call graphs). Needs what `PERF=1 bench/many-core/pack.sh`
# carries in .dev/. Writes engine-K.txt (rates, busy shares, the profile's top symbols and
# the callers of the top three) to $OUT.
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
DEV=$ROOT/.dev
[ -x "$DEV/wrap/perf" ] || { echo "profile-engine: no .dev/wrap/perf: run PERF=1 bench/many-core/pack.sh and carry .dev" >&2; exit 1; }
export PATH=$DEV/wrap:$PATH
OUT=${OUT:-/tmp/profile-out}
mkdir -p "$OUT"
WS=$DEV/wrap/wirespeed
P=wsprof$$
clean() { ip netns del "$P-a" 2>/dev/null; ip netns del "$P-m" 2>/dev/null; }
trap clean EXIT
clean
ip netns add "$P-a" && ip netns add "$P-m" || exit 1
ip link add a0 netns "$P-a" numtxqueues 8 numrxqueues 8 type veth peer name m0 netns "$P-m" numtxqueues 8 numrxqueues 8 || exit 1
ip -n "$P-a" link set a0 up
ip -n "$P-m" link set m0 up
ip netns exec "$P-m" ethtool -K m0 gro on >/dev/null
# Each CPU's busy jiffies and all its jiffies, from /proc/stat.
jiffies() { awk '/^cpu[0-9]/ { busy = $2 + $3 + $4 + $7 + $8; all = busy + $5 + $6; print $1, busy, all }' /proc/stat; }
for k in ${SENDERS:-4 8}; do
    [ "$k" -le "$(nproc)" ] || { echo "profile-engine: K=$k needs $k CPUs" >&2; continue; }
    report=$OUT/engine-$k.txt
    last=$((k - 1))
    ip netns exec "$P-m" "$WS" bench xdpdrop --port xdp:m0 --duration 9 --json -q > "$OUT/sink.json" 2>&1 &
    sink=$!
    sleep 1
    ip netns exec "$P-a" "$WS" bench txpush --engine kernel --port xdp:a0 --cpus "0-$last" --duration 8 --json -q > "$OUT/load.json" 2>&1 &
    load=$!
    sleep 3
    jiffies > "$OUT/before"
    perf record -a -g -F 499 -o "$OUT/perf.data" -- sleep 3 2> "$OUT/perf.log"
    jiffies > "$OUT/after"
    wait "$load" "$sink"
    {
        echo "== kernel engine from CPUs 0-$last into an xdpdrop sink, 8 queues: $(uname -r), $(nproc) CPUs"
        python3 - "$OUT/load.json" "$OUT/sink.json" <<'PY'
import json, sys
for name, path in (("load", sys.argv[1]), ("sink", sys.argv[2])):
    lines = [l for l in open(path) if l.startswith("{")]
    o = json.loads(lines[-1]) if lines else {}
    print(name, "Mpps per second:", [round(v, 2) for v in o.get("per_second_mpps", [])], "whole run:", round(o.get("mpps", 0), 2))
PY
        echo "== busy share of each CPU over the 3 s profiled"
        join "$OUT/before" "$OUT/after" | awk '{ printf "%s %.0f%%\n", $1, 100 * ($4 - $2) / (($5 - $3) > 0 ? ($5 - $3) : 1) }' | paste -sd' '
        echo "== top symbols (cpu-clock samples, all CPUs)"
        perf report -i "$OUT/perf.data" --stdio --no-children --sort sym -g none --percent-limit 0.5 2>/dev/null | grep -v '^#' | grep -v '^$' | head -40
        echo "== callers of the top three"
        for sym in $(perf report -i "$OUT/perf.data" --stdio --no-children --sort sym -g none 2>/dev/null | awk '/^ +[0-9.]+%/ { print $NF }' | head -3); do
            echo "-- $sym"
            perf report -i "$OUT/perf.data" --stdio --no-children --sort sym -S "$sym" -G 2>/dev/null | grep -v '^#' | grep -v '^$' | head -30
        done
    } > "$report"
    cat "$report"
done
rm -f "$OUT/perf.data" "$OUT/perf.data.old" "$OUT/before" "$OUT/after"
