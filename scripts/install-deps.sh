#!/usr/bin/env bash
# Installs what building, testing, the demo and the benchmark need, only what is missing.
# Debian packages: clang/llvm build the XDP programs; libbpf-dev gives bpf_helpers.h;
# linux-libc-dev the kernel UAPI headers; gcc/libc6-dev link Rust binaries; iproute2/ethtool
# set up namespaces and veths; tcpdump and ping judge the tests; bpftool shows programs;
# taskset (util-linux) pins the benchmark; python3 writes its tables; shellcheck lints the scripts.
# Rust: rustup's toolchain in ~/.cargo/bin (edition 2024 needs Rust 1.85 or newer).
set -euo pipefail
export PATH="$HOME/.cargo/bin:$PATH:/usr/local/sbin:/usr/sbin:/sbin"
need_pkgs=()
have() { command -v "$1" >/dev/null 2>&1; }
have clang || need_pkgs+=(clang)
have llvm-strip || need_pkgs+=(llvm)
[ -f /usr/include/bpf/bpf_helpers.h ] || need_pkgs+=(libbpf-dev)
[ -f /usr/include/linux/if_xdp.h ] || need_pkgs+=(linux-libc-dev)
have cc || need_pkgs+=(gcc)
# c++ builds libFuzzer, which make lint compiles the fuzz targets against.
have c++ || need_pkgs+=(g++)
[ -f /usr/include/stdio.h ] || need_pkgs+=(libc6-dev)
have ip || need_pkgs+=(iproute2)
have ethtool || need_pkgs+=(ethtool)
have tcpdump || need_pkgs+=(tcpdump)
# ngrep: a libpcap program whose Ctrl-C handler closes the handle pcap_loop is reading.
have ngrep || need_pkgs+=(ngrep)
# tshark (and editcap, from wireshark-common) judge gen's checksums and convert captures;
# nft puts a known drop rule in the way of gen's packets.
have tshark || need_pkgs+=(tshark)
have nft || need_pkgs+=(nftables)
# capture: libpcap compiles its filters (pcap.h to build); capinfos (wireshark-common) judges
# its files; netsniff-ng is a peer in bench/capture.sh.
[ -f /usr/include/pcap.h ] || need_pkgs+=(libpcap-dev)
have capinfos || need_pkgs+=(wireshark-common)
have netsniff-ng || need_pkgs+=(netsniff-ng)
have ping || need_pkgs+=(iputils-ping)
# ovs-ofctl (openvswitch-common, no daemon) judges the switch's flow syntax.
have ovs-ofctl || need_pkgs+=(openvswitch-common)
# ovsdb-server and ovs-vswitchd (openvswitch-switch): Open vSwitch's userspace datapath is the
# far end of the GRE tunnel tests (this kernel has no GRE); each test runs its own, in its
# namespace.
have ovs-vswitchd || need_pkgs+=(openvswitch-switch)
# openssl makes the certificates of the OpenFlow TLS tests.
have openssl || need_pkgs+=(openssl)
# nfcapd and nfdump (nfdump) collect and read the switch's IPFIX export in its tests.
have nfcapd || need_pkgs+=(nfdump)
have bpftool || need_pkgs+=(bpftool)
# promtool and a Prometheus server (Debian's prometheus) judge --metrics; curl scrapes it.
have promtool || need_pkgs+=(prometheus)
have curl || need_pkgs+=(curl)
have taskset || need_pkgs+=(util-linux)
# tmux runs `wirespeed top` on a terminal of known size for its tests (capture-pane).
have tmux || need_pkgs+=(tmux)
have timeout || need_pkgs+=(coreutils)
have python3 || need_pkgs+=(python3)
have make || need_pkgs+=(make)
have git || need_pkgs+=(git)
have shellcheck || need_pkgs+=(shellcheck)
if ! have cargo && ! have curl && ! apt-cache show rustup >/dev/null 2>&1; then
  need_pkgs+=(curl ca-certificates)
fi

apt_install() {
  if [ "$(id -u)" -ne 0 ]; then
    echo "install-deps: missing $*; run as root (apt-get install) or install them yourself" >&2
    exit 1
  fi
  echo "install-deps: installing $*" >&2
  export DEBIAN_FRONTEND=noninteractive
  # wireshark-common asks whether non-root users may capture: no, and do not ask.
  echo "wireshark-common wireshark-common/install-setuid boolean false" |
    debconf-set-selections 2>/dev/null || true
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "$@" >/dev/null
}
[ ${#need_pkgs[@]} -eq 0 ] || apt_install "${need_pkgs[@]}"

# Rust: rustup (Debian's where it has one, trixie and later; else rustup.rs), stable toolchain.
if ! have cargo; then
  if apt-cache show rustup >/dev/null 2>&1; then
    apt_install rustup ca-certificates
    rustup default stable
  else
    echo "install-deps: installing the Rust toolchain with rustup (https://rustup.rs)" >&2
    curl --proto '=https' --tlsv1.2 -sSf https://sh.rustup.rs |
      sh -s -- -y --profile minimal --component rustfmt,clippy >/dev/null || {
      echo "install-deps: could not install Rust; install rustup and Rust 1.85 or newer, then run make again" >&2
      exit 1
    }
  fi
  hash -r
fi
rust_minor=$(rustc --version | sed -n 's/^rustc 1\.\([0-9]*\).*/\1/p')
if [ "${rust_minor:-0}" -lt 85 ]; then
  if have rustup; then
    echo "install-deps: $(rustc --version) is too old for edition 2024; updating the stable toolchain" >&2
    rustup toolchain install stable --profile minimal && rustup default stable
  else
    echo "install-deps: $(rustc --version) is too old (edition 2024 needs 1.85 or newer); install Rust with rustup" >&2
    exit 1
  fi
fi
# make lint and make test need rustfmt and clippy.
if ! cargo fmt --version >/dev/null 2>&1 || ! cargo clippy --version >/dev/null 2>&1; then
  if have rustup; then
    echo "install-deps: adding the rustfmt and clippy components" >&2
    rustup component add rustfmt clippy
  else
    echo "install-deps: cargo fmt or cargo clippy is missing and there is no rustup to add them" >&2
    exit 1
  fi
fi

# faucet judges the switch's OpenFlow side in the tests. It comes from PyPI and pins os-ken
# 3.1.0, which wants Python 3.11: a virtual environment of our own, target/faucet-venv.
faucet_venv="$(cd "$(dirname "$0")/.." && pwd)/target/faucet-venv"
if [ ! -x "$faucet_venv/bin/osken-manager" ]; then
  if ! have python3.11 && apt-cache show python3.11-venv >/dev/null 2>&1; then
    apt_install python3.11 python3.11-venv
  fi
  if have python3.11; then
    echo "install-deps: installing faucet into $faucet_venv" >&2
    rm -rf "$faucet_venv"
    python3.11 -m venv "$faucet_venv"
    "$faucet_venv/bin/pip" install -q faucet
  else
    echo "install-deps: no Python 3.11 for faucet (it pins os-ken 3.1.0): the faucet tests will fail; install python3.11" >&2
  fi
fi
