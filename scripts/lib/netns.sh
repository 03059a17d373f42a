# shellcheck shell=bash
# Two network namespaces joined by a veth pair, for the demo and the benchmark.
#
#   source scripts/lib/netns.sh
#   ws_netns_setup            # sets WS_NS_A WS_NS_B WS_IF_A WS_IF_B, registers the cleanup trap
#   ws_in_a CMD...            # runs CMD in namespace A (ws_in_b: in B)
#   ws_track PID              # ws_cleanup ends this process before removing the namespaces
#
# Names are unique to this shell (prefix wsd<pid>, or $WS_PREFIX), the veth ends are created
# directly inside their namespaces (nothing ever appears in the caller's namespace), and
# ws_cleanup removes exactly the namespaces this shell made, on every exit path: normal exit,
# error (set -e), SIGINT, SIGTERM, SIGHUP.

WS_PREFIX=${WS_PREFIX:-wsd$$}
WS_NS_A="${WS_PREFIX}a"
WS_NS_B="${WS_PREFIX}b"
WS_IF_A="${WS_PREFIX}a0" # in namespace A; at most 15 characters (wsd + pid + a0)
WS_IF_B="${WS_PREFIX}b0" # in namespace B
WS_MADE_NS=()            # namespaces this shell created (and only those get deleted)
WS_PIDS=()               # background processes to end before the namespaces go
WS_TMPDIRS=()            # scratch directories to remove
WS_CLEANED=0

ws_log() { printf '%s: %s\n' "${WS_LOG_TAG:-wirespeed}" "$*" >&2; }

ws_require_root() {
  if [ "$(id -u)" -ne 0 ]; then
    ws_log "needs root (CAP_NET_ADMIN and CAP_SYS_ADMIN to make namespaces and veths, CAP_BPF for XDP): try sudo $0"
    exit 1
  fi
}

ws_in_a() { ip netns exec "$WS_NS_A" "$@"; }
ws_in_b() { ip netns exec "$WS_NS_B" "$@"; }

ws_track() { WS_PIDS+=("$1"); }

# ws_mktemp NAME: makes a scratch directory that ws_cleanup removes; its path in WS_TMP.
# (Not for $(...): the registration must happen in this shell.)
ws_mktemp() {
  WS_TMP=$(mktemp -d "/tmp/wirespeed-$1.XXXXXX")
  WS_TMPDIRS+=("$WS_TMP")
}

# Ends the tracked processes (SIGTERM, then SIGKILL after 3 s) and deletes our namespaces,
# which takes the veth pair and any XDP program still attached to it along. Idempotent.
ws_cleanup() {
  [ "$WS_CLEANED" = 1 ] && return 0
  WS_CLEANED=1
  local pid ns i d
  for pid in "${WS_PIDS[@]}"; do
    kill -TERM "$pid" 2>/dev/null || true
  done
  for pid in "${WS_PIDS[@]}"; do
    for ((i = 0; i < 30; i++)); do
      kill -0 "$pid" 2>/dev/null || break
      sleep 0.1
    done
    kill -KILL "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
  done
  WS_PIDS=()
  for ns in "${WS_MADE_NS[@]}"; do
    ip netns del "$ns" 2>/dev/null || ws_log "could not delete namespace $ns"
  done
  WS_MADE_NS=()
  for d in "${WS_TMPDIRS[@]}"; do
    rm -rf -- "$d"
  done
  WS_TMPDIRS=()
}

ws_on_signal() {
  local sig=$1 code=$2
  trap - EXIT INT TERM HUP
  ws_log "caught SIG$sig: cleaning up"
  ws_cleanup
  exit "$code"
}

ws_install_trap() {
  trap 'ws_cleanup' EXIT
  trap 'ws_on_signal INT 130' INT
  trap 'ws_on_signal TERM 143' TERM
  trap 'ws_on_signal HUP 129' HUP
}

ws_make_ns() {
  local ns=$1
  if ip netns list | awk '{print $1}' | grep -qx "$ns"; then
    ws_log "namespace $ns exists already (not ours): set WS_PREFIX to something else"
    return 1
  fi
  ip netns add "$ns"
  WS_MADE_NS+=("$ns")
  # No IPv6: no router solicitations or DAD packets mixed into the measurement.
  ip netns exec "$ns" sysctl -qw net.ipv6.conf.all.disable_ipv6=1 net.ipv6.conf.default.disable_ipv6=1 2>/dev/null || true
  ip -n "$ns" link set lo up
}

# Creates namespace A and B, the veth pair WS_IF_A (in A) <-> WS_IF_B (in B), links up,
# GRO on at both ends (a veth needs NAPI, i.e. GRO or an XDP program, to take frames sent
# with ndo_xdp_xmit by the kernel-engine load; GRO on gives it to AF_PACKET receivers too).
# WS_QUEUES (default 1) receive and transmit queues per end.
ws_netns_setup() {
  local q=${WS_QUEUES:-1}
  ws_install_trap
  ws_make_ns "$WS_NS_A"
  ws_make_ns "$WS_NS_B"
  ip link add "$WS_IF_A" numrxqueues "$q" numtxqueues "$q" netns "$WS_NS_A" \
    type veth peer name "$WS_IF_B" numrxqueues "$q" numtxqueues "$q" netns "$WS_NS_B"
  ip -n "$WS_NS_A" link set "$WS_IF_A" up
  ip -n "$WS_NS_B" link set "$WS_IF_B" up
  ws_in_a ethtool -K "$WS_IF_A" gro on >/dev/null
  ws_in_b ethtool -K "$WS_IF_B" gro on >/dev/null
  local i
  for ((i = 0; i < 50; i++)); do # carrier comes up a moment after the link
    ip -n "$WS_NS_A" link show dev "$WS_IF_A" | grep -q 'state UP' &&
      ip -n "$WS_NS_B" link show dev "$WS_IF_B" | grep -q 'state UP' && break
    sleep 0.1
  done
  ws_log "namespaces $WS_NS_A ($WS_IF_A) and $WS_NS_B ($WS_IF_B) ready"
}

# Removes any XDP program left on one of our veth ends (a run that died without detaching).
# Prints what it found so a leak never goes unnoticed.
ws_xdp_leftover_check() {
  local ns ifc ns_if found=0
  for ns_if in "$WS_NS_A:$WS_IF_A" "$WS_NS_B:$WS_IF_B"; do
    ns=${ns_if%%:*} ifc=${ns_if#*:}
    if ip -n "$ns" link show dev "$ifc" 2>/dev/null | grep -q ' prog/xdp '; then
      ws_log "warning: an XDP program was left attached to $ifc after the run; removing it"
      ip -n "$ns" link set dev "$ifc" xdp off 2>/dev/null || true
      ip -n "$ns" link set dev "$ifc" xdpgeneric off 2>/dev/null || true
      found=1
    fi
  done
  return $found
}
