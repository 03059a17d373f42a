#!/usr/bin/env bash
# Installs what building and testing wirespeed needs, only what is missing.
# Debian packages: clang/llvm build the XDP programs; libbpf-dev gives bpf_helpers.h;
# iproute2/ethtool set up veths; tcpdump and ping judge the tests.
set -euo pipefail
need_pkgs=()
have() { command -v "$1" >/dev/null 2>&1; }
have clang || need_pkgs+=(clang)
have llvm-strip || need_pkgs+=(llvm)
[ -f /usr/include/bpf/bpf_helpers.h ] || need_pkgs+=(libbpf-dev)
[ -f /usr/include/linux/if_xdp.h ] || need_pkgs+=(linux-libc-dev)
have ip || need_pkgs+=(iproute2)
have ethtool || need_pkgs+=(ethtool)
have tcpdump || need_pkgs+=(tcpdump)
have ping || need_pkgs+=(iputils-ping)
have bpftool || need_pkgs+=(bpftool)
have taskset || need_pkgs+=(util-linux)
have python3 || need_pkgs+=(python3)
if [ ${#need_pkgs[@]} -gt 0 ]; then
  if [ "$(id -u)" -ne 0 ]; then
    echo "install-deps: missing ${need_pkgs[*]}; run as root (apt-get install) or install them yourself" >&2
    exit 1
  fi
  echo "install-deps: installing ${need_pkgs[*]}" >&2
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${need_pkgs[@]}" >/dev/null
fi
if ! have cargo; then
  if [ -x "$HOME/.cargo/bin/cargo" ]; then
    :
  else
    echo "install-deps: installing the Rust toolchain (rustup from Debian)" >&2
    export DEBIAN_FRONTEND=noninteractive
    apt-get install -y -qq --no-install-recommends rustup ca-certificates >/dev/null
    rustup default stable
  fi
fi
