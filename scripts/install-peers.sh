#!/usr/bin/env bash
# Installs the peers the side-by-side benchmark measures wirespeed against, only if missing:
# DPDK's testpmd with its af_xdp, af_packet and memif drivers, netsniff-ng (trafgen), Open vSwitch
# (its userspace datapath with afxdp ports), socat (plain TCP reads and writes, the peer of
# `zcopy`), and matplotlib for the chart.
set -euo pipefail
export PATH="$PATH:/usr/local/sbin:/usr/sbin:/sbin"
need=()
command -v dpdk-testpmd >/dev/null 2>&1 || need+=(dpdk-dev)
ls /usr/lib/*/dpdk/pmds-*/librte_net_af_xdp.so >/dev/null 2>&1 || need+=(librte-net-af-xdp23)
ls /usr/lib/*/dpdk/pmds-*/librte_net_af_packet.so >/dev/null 2>&1 || need+=(librte-net-af-packet23)
ls /usr/lib/*/dpdk/pmds-*/librte_net_memif.so >/dev/null 2>&1 || need+=(librte-net-memif23)
command -v trafgen >/dev/null 2>&1 || need+=(netsniff-ng)
command -v ovs-vswitchd >/dev/null 2>&1 || need+=(openvswitch-switch)
command -v stdbuf >/dev/null 2>&1 || need+=(coreutils)
command -v socat >/dev/null 2>&1 || need+=(socat)
/usr/bin/python3 -c 'import matplotlib' 2>/dev/null || need+=(python3-matplotlib)
if [ ${#need[@]} -gt 0 ]; then
  if [ "$(id -u)" -ne 0 ]; then
    echo "install-peers: missing ${need[*]}; run as root" >&2
    exit 1
  fi
  echo "install-peers: installing ${need[*]}" >&2
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi
