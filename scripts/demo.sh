#!/usr/bin/env bash
# make demo: two namespaces joined by a veth pair; the kernel-engine txpush loads one end
# (namespace A, CPU 0) while the other end (namespace B, CPU 1) runs, one at a time: the
# in-kernel xdpdrop ceiling, rxdrop and l2fwd on AF_XDP and on AF_PACKET. Prints a table and
# removes everything it made, whatever happens.
#
#   DURATION=5 scripts/demo.sh      (seconds per measurement)
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$HOME/.cargo/bin:$PATH:/usr/local/sbin:/usr/sbin:/sbin"
WS_LOG_TAG=demo
source scripts/lib/netns.sh
source scripts/lib/measure.sh

DURATION=${DURATION:-5}
LOAD_DURATION=$((DURATION + 3)) # the load outlasts the measurement; it is stopped after it
WS_MAX_SECONDS=$LOAD_DURATION
if [ "$(nproc)" -ge 2 ]; then LOAD_CPU=0 MEAS_CPU=1; else LOAD_CPU=0 MEAS_CPU=0; fi

ws_require_root
ws_log "building wirespeed (release)"
cargo build --release --quiet
WS_BIN=$PWD/target/release/wirespeed

ws_netns_setup
ws_returns_sink
ws_mktemp demo
TMP=$WS_TMP
RECORDS=$TMP/records.jsonl
LOAD="txpush --engine kernel --port xdp:$WS_IF_A --duration $LOAD_DURATION --quiet"

ws_log "load: kernel-engine txpush on $WS_IF_A (CPU $LOAD_CPU); measured: $WS_IF_B (CPU $MEAS_CPU); ${DURATION} s each"
run() { # bench backend spec (l2fwd's returns dropped on A: ws_returns_sink)
  local bench=$1 backend=$2 spec=$3 out=$TMP/$1-$2 err=""
  printf '%-8s %-28s ' "$bench" "$spec" >&2
  if ws_pair "$out" first "b:$MEAS_CPU" "$bench --port $spec --duration $DURATION --quiet" "a:$LOAD_CPU" "$LOAD"; then
    grep -o '"mpps":[0-9.]*' "$out.first.json" | head -n1 | sed 's/"mpps":\([0-9]*\.[0-9]\{0,3\}\).*/\1 Mpps/' >&2
  else
    err=$WS_ERR
    # The receiver's result stands even when the load could not report its own.
    if grep -q '^{' "$out.first.json" 2>/dev/null; then
      grep -o '"mpps":[0-9.]*' "$out.first.json" | head -n1 | sed 's/"mpps":\([0-9]*\.[0-9]\{0,3\}\).*/\1 Mpps/' >&2
      ws_log "  (the load printed no result: $err)"
      err=""
    else
      echo "failed: $err" >&2
    fi
  fi
  python3 bench/table.py record "$RECORDS" kind=receive bench="$bench" backend="$backend" size=64 run=1 \
    measured="$out.first.json" load="$out.second.json" error="$err" cpus="load:$LOAD_CPU,measured:$MEAS_CPU"
  sleep 0.5
}

run xdpdrop kernel "xdp:$WS_IF_B"
run rxdrop xdp "xdp:$WS_IF_B"
run rxdrop packet "packet:$WS_IF_B"
run l2fwd xdp "xdp:$WS_IF_B"
run l2fwd packet "packet:$WS_IF_B"

echo
python3 bench/table.py demo "$RECORDS"
echo
echo "64-byte frames, ${DURATION} s each; kernel $(uname -r). Full benchmark: make bench (bench/README.md)."
