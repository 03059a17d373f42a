#!/usr/bin/env bash
# make bench: the benchmark of issue 2 on a veth pair between two namespaces, one thing at a
# time. For each frame size and run: the kernel-engine txpush loads namespace A's end (CPU 0)
# while namespace B's end (CPU 1) runs xdpdrop, AF_XDP rxdrop, AF_PACKET rxdrop, AF_XDP
# l2fwd, AF_PACKET l2fwd; then txpush alone (kernel engine; socket engine on xdp:; socket
# engine on packet:) on CPU 0 into an xdpdrop sink on CPU 1, and the kernel engine once more
# from both CPUs (--cpus). Writes bench/results/<date>.json and the table in bench/README.md.
#
#   RUNS=3 DURATION=10 SIZES="64 1500" bench/run.sh      (the defaults)
#   RUNS=1 DURATION=2 SIZES=64 bench/run.sh              (a quick check that it all works)
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$HOME/.cargo/bin:$PATH:/usr/local/sbin:/usr/sbin:/sbin"
WS_LOG_TAG=bench
source scripts/lib/netns.sh
source scripts/lib/measure.sh

RUNS=${RUNS:-3}
DURATION=${DURATION:-10}
SIZES=${SIZES:-64 1500}
LOAD_DURATION=$((DURATION + 3)) # the load outlasts the measurement; it is stopped after it
SINK_DURATION=$((DURATION + 5)) # the sink outlasts the sender; it is stopped after it
WS_MAX_SECONDS=$SINK_DURATION
if [ "$(nproc)" -ge 2 ]; then LOAD_CPU=0 MEAS_CPU=1; else LOAD_CPU=0 MEAS_CPU=0; fi
CPUS="load:$LOAD_CPU,measured:$MEAS_CPU"
DATE=$(date +%F)
RESULTS=bench/results/$DATE.json

ws_require_root
# Other work on the machine takes CPU time from the load or the receiver: say so up front.
LOADAVG=$(cut -d' ' -f1 /proc/loadavg)
if awk -v l="$LOADAVG" 'BEGIN { exit !(l > 0.5) }'; then
  ws_log "warning: load average $LOADAVG: something else is running; the numbers will be low and noisy"
fi
ws_log "building wirespeed (release)"
cargo build --release --quiet
WS_BIN=$PWD/target/release/wirespeed

# Two queues a side: a kernel-engine thread on CPU c sends into B's receive queue c mod 2, so
# the two-CPU load has a queue per CPU. One-CPU loads (CPU 0) all land on queue 0.
WS_QUEUES=2 ws_netns_setup
ws_returns_sink
ws_mktemp bench
TMP=$WS_TMP
RECORDS=$TMP/records.jsonl
: >"$RECORDS"

nsizes=$(wc -w <<<"$SIZES")
cells=$((nsizes * RUNS * 9))
ws_log "$cells runs of ${DURATION} s (about $((cells * (DURATION + 3) / 60 + 1)) min); load/sender on CPU $LOAD_CPU in $WS_NS_A, measured/sink on CPU $MEAS_CPU in $WS_NS_B"

mpps_of() { grep -o '"mpps":[0-9.]*' "$1" 2>/dev/null | head -n1 | sed 's/"mpps":\([0-9]*\.[0-9]\{0,3\}\).*/\1/'; }
packets_of() { grep -o '"packets":[0-9]*' "$1" 2>/dev/null | head -n1 | cut -d: -f2; }

# A receiver on B under the kernel-engine load from A (l2fwd's returns dropped on A: ws_returns_sink).
receive() { # size run bench backend spec
  local size=$1 run=$2 bench=$3 backend=$4 spec=$5 out err="" note="" steal
  out=$TMP/$size-$run-$bench-$backend
  printf '  %-8s %-24s ' "$bench" "$spec" >&2
  steal=$(ws_steal)
  if ! ws_pair "$out" first "b:$MEAS_CPU" "$bench --port $spec --duration $DURATION --quiet" \
    "a:$LOAD_CPU" "txpush --engine kernel --port xdp:$WS_IF_A --size $size --duration $LOAD_DURATION --quiet"; then
    if grep -q '^{' "$out.first.json" 2>/dev/null; then note="load: $WS_ERR"; else err=$WS_ERR; fi
  fi
  steal=$(ws_steal_since "$steal")
  if [ -z "$err" ]; then echo "$(mpps_of "$out.first.json") Mpps (steal ticks $steal)" >&2; else echo "failed: $err" >&2; fi
  python3 bench/table.py record "$RECORDS" kind=receive bench="$bench" backend="$backend" size="$size" run="$run" \
    measured="$out.first.json" load="$out.second.json" error="$err" note="$note" cpus="$CPUS" port="$spec" steal="$steal"
  sleep 1
}

# txpush alone from A into an xdpdrop sink on B: sent (txpush's count) and received (the sink's).
# kernel2: the kernel engine sending from both CPUs (the sink's work runs on both).
txpush() { # size run engine backend spec
  local size=$1 run=$2 engine=$3 backend=$4 spec=$5 out err="" note="" where="a:$LOAD_CPU" extra=""
  local cpus="sender:$LOAD_CPU,sink:$MEAS_CPU"
  if [ "$engine" = kernel2 ]; then
    where="a:$LOAD_CPU,$MEAS_CPU" extra="--cpus $LOAD_CPU,$MEAS_CPU" cpus="sender:$LOAD_CPU,sender2:$MEAS_CPU,sink:$MEAS_CPU"
  fi
  out=$TMP/$size-$run-txpush-$engine-$backend
  printf '  %-8s %-24s ' "txpush" "$spec ($engine)" >&2
  local steal
  steal=$(ws_steal)
  if ! ws_pair "$out" second "b:$MEAS_CPU" "xdpdrop --port xdp:$WS_IF_B --duration $SINK_DURATION --quiet" \
    "$where" "txpush --engine ${engine%2} $extra --port $spec --size $size --duration $DURATION --quiet"; then
    if grep -q '^{' "$out.second.json" 2>/dev/null; then note="sink: $WS_ERR"; else err=$WS_ERR; fi
  fi
  steal=$(ws_steal_since "$steal")
  if [ -z "$err" ]; then
    echo "$(mpps_of "$out.second.json") Mpps sent, $(packets_of "$out.first.json") of $(packets_of "$out.second.json") packets received (steal ticks $steal)" >&2
  else
    echo "failed: $err" >&2
  fi
  python3 bench/table.py record "$RECORDS" kind=txpush bench=txpush engine="$engine" backend="$backend" size="$size" run="$run" \
    measured="$out.second.json" sink="$out.first.json" error="$err" note="$note" cpus="$cpus" port="$spec" steal="$steal"
  sleep 1
}

for size in $SIZES; do
  for ((run = 1; run <= RUNS; run++)); do
    ws_log "size $size, run $run of $RUNS"
    receive "$size" "$run" xdpdrop kernel "xdp:$WS_IF_B"
    receive "$size" "$run" rxdrop xdp "xdp:$WS_IF_B"
    receive "$size" "$run" rxdrop packet "packet:$WS_IF_B"
    receive "$size" "$run" l2fwd xdp "xdp:$WS_IF_B"
    receive "$size" "$run" l2fwd packet "packet:$WS_IF_B"
    txpush "$size" "$run" kernel kernel "xdp:$WS_IF_A"
    [ "$MEAS_CPU" = "$LOAD_CPU" ] || txpush "$size" "$run" kernel2 kernel "xdp:$WS_IF_A"
    txpush "$size" "$run" socket xdp "xdp:$WS_IF_A"
    txpush "$size" "$run" socket packet "packet:$WS_IF_A"
  done
done

# Machine and configuration, for the results file.
WS_DATE=$DATE WS_LOADAVG=$LOADAVG WS_RUNS=$RUNS WS_DURATION=$DURATION WS_SIZES=$SIZES WS_LOAD_CPU=$LOAD_CPU WS_MEAS_CPU=$MEAS_CPU \
  WS_GIT=$(git describe --always --dirty 2>/dev/null || echo unknown) \
  WS_VERSION=$("$WS_BIN" --version 2>/dev/null || echo unknown) \
  python3 - >"$TMP/machine.json" <<'PY'
import json, os, platform, subprocess
env = os.environ
model = "unknown"
try:
    for line in open("/proc/cpuinfo"):
        if line.startswith("model name"):
            model = line.split(":", 1)[1].strip()
            break
except OSError:
    pass
load, meas = int(env["WS_LOAD_CPU"]), int(env["WS_MEAS_CPU"])
print(json.dumps({
    "date": env["WS_DATE"],
    "config": {"runs": int(env["WS_RUNS"]), "duration": int(env["WS_DURATION"]),
               "sizes": [int(s) for s in env["WS_SIZES"].split()]},
    "kernel": platform.release(),
    "cpu_model": model,
    "nproc": os.cpu_count(),
    "git_rev": env["WS_GIT"],
    "loadavg_at_start": float(env["WS_LOADAVG"]),
    "wirespeed_version": env["WS_VERSION"],
    "pinning": {
        "load_and_txpush_sender": {"cpu": load, "namespace": "A"},
        "measured_receiver_and_sink": {"cpu": meas, "namespace": "B"},
        "note": "on veth the receiving end's NAPI (XDP program, AF_XDP copy, AF_PACKET ring copy) "
                "runs on the sender's CPU; the measured process's own work runs on its CPU",
    },
}))
PY
echo >&2
python3 bench/table.py report "$RECORDS" --results "$RESULTS" --readme bench/README.md --machine "$TMP/machine.json"
ws_log "wrote $RESULTS and the table in bench/README.md"
