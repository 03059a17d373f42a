#!/usr/bin/env bash
# The capture benchmark of issue 4: wirespeed capture (AF_XDP) against tcpdump -w and
# netsniff-ng, each writing pcap to a tmpfs, under the same load: `wirespeed bench txpush
# --engine kernel` on namespace A's end (CPU 0), the capture on namespace B's end (CPU 1).
# For each tool, size and run: start the capture, wait until it is ready, start the load,
# capture for DURATION seconds, stop the capture with SIGINT, then the load. Packets written
# are counted in the file by capinfos (the same judge for all three); drops are what each tool
# reports (wirespeed: kernel/ring + writer; tcpdump: dropped by kernel/interface; netsniff-ng:
# failed filter, out of space). Writes bench/results/<date>-capture.json and the capture table
# in bench/README.md.
#
#   RUNS=3 DURATION=5 SIZES=64 bench/capture.sh        (the defaults)
#   RUNS=1 DURATION=2 SIZES=64 bench/capture.sh        (a quick check that it all works)
#
# BENCH=pcap (make bench-pcap) is issue 32's: tcpdump, unmodified, through `wirespeed
# pcap-run` on xdp:IFACE (tool tcpdump-shim) against tcpdump on its own and wirespeed
# capture, at 64 and 1500 bytes: bench/results/<date>-pcap.json and its own table.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$HOME/.cargo/bin:$PATH:/usr/local/sbin:/usr/sbin:/sbin"
WS_LOG_TAG=bench-capture
source scripts/lib/netns.sh

BENCH=${BENCH:-capture}
RUNS=${RUNS:-3}
DURATION=${DURATION:-5}
case $BENCH in
  capture)
    SIZES=${SIZES:-64}
    TOOLS=${TOOLS:-wirespeed tcpdump netsniff-ng}
    ;;
  pcap)
    SIZES=${SIZES:-64 1500}
    TOOLS=${TOOLS:-tcpdump-shim tcpdump wirespeed}
    ;;
  *)
    echo "BENCH=$BENCH: capture or pcap" >&2
    exit 2
    ;;
esac
# Extra flags for wirespeed capture, for A/B runs (e.g. WS_CAPTURE_FLAGS='--spill-mib 0').
WS_CAPTURE_FLAGS=${WS_CAPTURE_FLAGS:-}
if [ "$(nproc)" -ge 2 ]; then LOAD_CPU=0 MEAS_CPU=1; else LOAD_CPU=0 MEAS_CPU=0; fi
DATE=$(date +%F)
RESULTS=bench/results/$DATE-$BENCH.json

ws_require_root
for tool in tcpdump netsniff-ng capinfos; do
  command -v "$tool" >/dev/null || { ws_log "$tool is missing: run scripts/install-deps.sh"; exit 1; }
done
if pgrep -f 'wirespeed bench' >/dev/null; then
  ws_log "another wirespeed benchmark is running: wait for it (one benchmark at a time)"
  exit 1
fi
LOADAVG=$(cut -d' ' -f1 /proc/loadavg)
if awk -v l="$LOADAVG" 'BEGIN { exit !(l > 0.5) }'; then
  ws_log "warning: load average $LOADAVG: something else is running; the numbers will be low and noisy"
fi
ws_log "building wirespeed (release)"
cargo build --release --quiet
WS_BIN=$PWD/target/release/wirespeed

ws_netns_setup
ws_mktemp bench-capture
TMP=$WS_TMP
RECORDS=$TMP/records.jsonl
: >"$RECORDS"
# The files go to a tmpfs (/dev/shm): 64-byte packets at 10 Mpps are 760 MB a second.
CAPDIR=$(mktemp -d /dev/shm/wirespeed-capture.XXXXXX)
WS_TMPDIRS+=("$CAPDIR")
if [ "$(stat -f -c %T "$CAPDIR")" != tmpfs ]; then
  ws_log "warning: /dev/shm is not a tmpfs here: the files go to $(stat -f -c %T "$CAPDIR")"
fi

# Waits until one of FILES contains PATTERN, or PID ends, or 20 s pass.
wait_for() { # pid pattern files...
  local pid=$1 pattern=$2 i
  shift 2
  for ((i = 0; i < 400; i++)); do
    grep -q "$pattern" "$@" 2>/dev/null && return 0
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.05
  done
  grep -q "$pattern" "$@" 2>/dev/null
}

# Ticks (1/HZ s) the hypervisor ran something else on CPU $1 (/proc/stat's steal column):
# on a VM, the moments a capture cannot run at all, whatever its priority.
steal_ticks() { awk -v c="cpu$1" '$1 == c { print $9 }' /proc/stat; }

# One capture under load; prints a line and appends a record.
measure() { # tool size run
  local tool=$1 size=$2 run=$3 out file pid load ready err="" steal0 steal
  steal0=$(steal_ticks "$MEAS_CPU")
  out=$TMP/$tool-$size-$run
  file=$CAPDIR/$tool.pcap
  rm -f "$CAPDIR"/*
  printf '  %-12s ' "$tool" >&2
  case $tool in
    wirespeed)
      ip netns exec "$WS_NS_B" taskset -c "$MEAS_CPU" "$WS_BIN" capture --port "xdp:$WS_IF_B" -w "$file" \
        --format pcap --json $WS_CAPTURE_FLAGS >"$out.out" 2>"$out.err" </dev/null &
      ready=' ready '
      ;;
    tcpdump)
      ip netns exec "$WS_NS_B" taskset -c "$MEAS_CPU" tcpdump -i "$WS_IF_B" -n -s 0 -B 262144 -w "$file" \
        >"$out.out" 2>"$out.err" </dev/null &
      ready='listening on'
      ;;
    tcpdump-shim)
      # pcap-run execs tcpdump (its broker, idle, runs beside it).
      ip netns exec "$WS_NS_B" taskset -c "$MEAS_CPU" "$WS_BIN" pcap-run tcpdump -i "xdp:$WS_IF_B" -n -s 0 \
        -B 262144 -w "$file" >"$out.out" 2>"$out.err" </dev/null &
      ready='listening on'
      ;;
    netsniff-ng)
      ip netns exec "$WS_NS_B" taskset -c "$MEAS_CPU" netsniff-ng --in "$WS_IF_B" --out "$file" --silent \
        -T 0xa1b2c3d4 -S 256MiB >"$out.out" 2>"$out.err" </dev/null &
      ready='Running'
      ;;
  esac
  # Started directly (not through a shell function), so $! is the tool itself: ip netns exec
  # and taskset exec it, and SIGINT reaches it.
  pid=$!
  ws_track "$pid"
  if ! wait_for "$pid" "$ready" "$out.out" "$out.err"; then
    err="not ready: $(tail -n1 "$out.err" 2>/dev/null)"
  fi
  if [ -z "$err" ]; then
    ip netns exec "$WS_NS_A" taskset -c "$LOAD_CPU" "$WS_BIN" bench txpush --engine kernel --port "xdp:$WS_IF_A" \
      --size "$size" --duration $((DURATION + 3)) --json --quiet >"$out.load.json" 2>"$out.load.err" </dev/null &
    load=$!
    ws_track "$load"
    sleep "$DURATION"
    kill -INT "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || err="$tool exited with an error: $(tail -n1 "$out.err")"
    steal=$(($(steal_ticks "$MEAS_CPU") - steal0))
    kill -TERM "$load" 2>/dev/null || true
    wait "$load" 2>/dev/null || true
  else
    kill -TERM "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
    steal=$(($(steal_ticks "$MEAS_CPU") - steal0))
  fi
  local written=0
  [ -f "$file" ] && written=$(capinfos -T -r -M -c "$file" 2>/dev/null | cut -f2)
  rm -f "$CAPDIR"/*
  python3 bench/capture_table.py record "$RECORDS" tool="$tool" size="$size" run="$run" \
    duration="$DURATION" written="${written:-0}" out="$out.out" err="$out.err" \
    load="$out.load.json" error="$err" steal_ticks="$steal"
  sleep 1
}

ws_log "$(($(wc -w <<<"$SIZES") * RUNS * $(wc -w <<<"$TOOLS"))) captures of ${DURATION} s; load on CPU $LOAD_CPU in $WS_NS_A, capture on CPU $MEAS_CPU in $WS_NS_B, files in $CAPDIR"
for size in $SIZES; do
  for ((run = 1; run <= RUNS; run++)); do
    ws_log "size $size, run $run of $RUNS"
    for tool in $TOOLS; do
      measure "$tool" "$size" "$run"
    done
  done
done

WS_DATE=$DATE WS_LOADAVG=$LOADAVG WS_RUNS=$RUNS WS_DURATION=$DURATION WS_SIZES=$SIZES \
  WS_LOAD_CPU=$LOAD_CPU WS_MEAS_CPU=$MEAS_CPU \
  WS_GIT=$(git describe --always --dirty 2>/dev/null || echo unknown) \
  WS_TCPDUMP=$(tcpdump --version 2>&1 | head -n1) \
  WS_NETSNIFF=$(netsniff-ng --version 2>&1 | grep -m1 -i version || echo unknown) \
  python3 bench/capture_table.py report "$RECORDS" --results "$RESULTS" --readme bench/README.md --bench "$BENCH"
ws_log "wrote $RESULTS and the $BENCH table in bench/README.md"
