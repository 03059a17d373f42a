# shellcheck shell=bash
# Runs two `wirespeed bench` processes against each other across the namespaces of netns.sh.
#
#   ws_pair OUT WAIT FIRST_WHERE "FIRST ARGS" SECOND_WHERE "SECOND ARGS"
#
# WHERE is a:CPU or b:CPU (namespace A or B, pinned with taskset to CPU). The first program
# starts, we wait for its " ready " line on stderr, then the second starts. WAIT (first or
# second) names the program whose own --duration ends the run; the other one is then stopped
# with SIGTERM (it still prints its JSON). Each writes OUT.first.json / OUT.first.err and
# OUT.second.json / OUT.second.err. Returns 0 when both printed their JSON; otherwise non-zero
# with a one-line reason in WS_ERR.
#
# Needs WS_BIN (the wirespeed binary) and netns.sh sourced.

# shellcheck disable=SC2034 # read by the scripts that source this file
WS_ERR=""
WS_READY_TIMEOUT=${WS_READY_TIMEOUT:-20}

ws_untrack() {
  local pid=$1 p keep=()
  for p in "${WS_PIDS[@]}"; do
    [ "$p" = "$pid" ] || keep+=("$p")
  done
  WS_PIDS=("${keep[@]}")
}

# The reason a run failed, from its stderr: the error line if there is one, else the last line.
ws_reason() {
  local err=$1 line
  line=$(grep -m1 -E 'error|Error|panicked' "$err" 2>/dev/null || true)
  [ -n "$line" ] || line=$(grep -v '^ *[0-9.]*s ' "$err" 2>/dev/null | tail -n1 || true)
  [ -n "$line" ] || line="no output"
  printf '%s' "$line" | tr -d '\r' | cut -c1-200
}

# Steal ticks per CPU so far, "cpu0:N,cpu1:M" (/proc/stat's steal column: 1/HZ s in which
# the hypervisor ran something else; on a VM, time in which nothing measured can run).
ws_steal() { awk '$1 ~ /^cpu[0-9]+$/ { printf "%s%s:%s", sep, $1, $9; sep = "," }' /proc/stat; }

# ws_steal_since BEFORE: the ticks stolen per CPU since ws_steal printed BEFORE.
ws_steal_since() {
  awk -v b="$1" 'BEGIN { n = split(b, kv, ","); for (i = 1; i <= n; i++) { split(kv[i], p, ":"); base[p[1]] = p[2] } }
    $1 ~ /^cpu[0-9]+$/ { printf "%s%s:%d", sep, $1, $9 - base[$1]; sep = "," }' /proc/stat
}

# ws_start OUT WHERE ARGS...: starts one bench in the background; its pid in WS_STARTED.
ws_start() {
  local out=$1 where=$2 ns cpu limit
  shift 2
  case ${where%%:*} in
    a) ns=$WS_NS_A ;;
    b) ns=$WS_NS_B ;;
    *) ws_log "bad place $where" && return 1 ;;
  esac
  cpu=${where#*:}
  # A watchdog well past any --duration we pass, so a wedged run cannot hang the script.
  limit=$((${WS_MAX_SECONDS:-60} + 30))
  timeout --kill-after=5 "$limit" ip netns exec "$ns" taskset -c "$cpu" "$WS_BIN" bench "$@" --json \
    >"$out.json" 2>"$out.err" </dev/null &
  WS_STARTED=$!
  ws_track "$WS_STARTED"
}

# ws_wait_ready PID ERRFILE: 0 once the ready line is there, 1 if the process ended first.
ws_wait_ready() {
  local pid=$1 err=$2 i
  for ((i = 0; i < WS_READY_TIMEOUT * 20; i++)); do
    grep -q ' ready ' "$err" 2>/dev/null && return 0
    kill -0 "$pid" 2>/dev/null || return 1
    sleep 0.05
  done
  return 2
}

ws_finish() { # pid: waits for it and untracks it
  wait "$1" 2>/dev/null || true
  ws_untrack "$1"
}

ws_stop() { # pid: SIGTERM, wait
  kill -TERM "$1" 2>/dev/null || true
  ws_finish "$1"
}

# l2fwd sends every frame back to A, and veth runs the receiving end's work on the sending
# CPU, the measured one. A takes the returns the cheapest way there is: no NAPI (GRO off, no
# XDP program), so they enter by netif_rx, and a tc filter (classic BPF "return
# TC_ACT_SHOT") drops them at ingress. An XDP program on A cost the measured CPU a copy of
# every return into a page-pool page (veth's skb_pp_cow_data) and a NAPI poll.
#   ws_returns_sink (once, after ws_netns_setup)
ws_returns_sink() {
  ws_in_a ethtool -K "$WS_IF_A" gro off >/dev/null
  ws_in_a tc qdisc add dev "$WS_IF_A" clsact
  ws_in_a tc filter add dev "$WS_IF_A" ingress bpf da bytecode '1,6 0 0 2'
}

ws_pair() {
  local out=$1 wait_for=$2 w1=$3 a1=$4 w2=$5 a2=$6 p1 p2 rc
  WS_ERR=""
  rm -f "$out".first.* "$out".second.*
  # shellcheck disable=SC2086 # the argument strings are word lists on purpose
  ws_start "$out.first" "$w1" $a1
  p1=$WS_STARTED
  rc=0
  ws_wait_ready "$p1" "$out.first.err" || rc=$?
  if [ $rc != 0 ]; then
    if [ $rc = 2 ]; then
      WS_ERR="not ready after ${WS_READY_TIMEOUT}s: $(ws_reason "$out.first.err")"
      ws_stop "$p1"
    else
      ws_finish "$p1"
      WS_ERR=$(ws_reason "$out.first.err")
    fi
    return 1
  fi
  # shellcheck disable=SC2086
  ws_start "$out.second" "$w2" $a2
  p2=$WS_STARTED
  if [ "$wait_for" = first ]; then
    ws_finish "$p1"
    ws_stop "$p2"
  else
    ws_finish "$p2"
    ws_stop "$p1"
  fi
  ws_xdp_leftover_check || true
  local f
  for f in first second; do
    if ! grep -q '^{' "$out.$f.json" 2>/dev/null; then
      WS_ERR="$(ws_reason "$out.$f.err")"
      return 1
    fi
  done
  return 0
}
