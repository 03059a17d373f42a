#!/usr/bin/python3
"""make bench-jumbo: packets larger than a frame (AF_XDP multi-buffer), wirespeed against DPDK's
testpmd on the same veth set-up, same run.

Two namespaces joined by a veth pair (made here, removed on every exit). The load, netsniff-ng's
trafgen with jumbo support (one frame built once, sent from a PACKET_TX_RING: the same load for
every receiver, written by neither side), runs in namespace A pinned to CPU 0; the measured
program in namespace B pinned to CPU 1. On veth the receiver's kernel work (the copy into its
frames) runs on the sender's CPU.

The peer the issue names, testpmd on net_af_xdp, has no multi-buffer (DPDK's af_xdp driver
caps a packet at one page), and its net_af_packet driver refuses frames over 1518 bytes
("device max frame size (1518)", DPDK 22.11 here), so:
  9000-byte frames, MTU 9000: wirespeed rxdrop and l2fwd on xdp: (chains of 4096-byte frames)
      against netsniff-ng (TPACKET_V3 with jumbo support, counting and dropping: AF_PACKET's
      rxdrop); wirespeed xdpdrop as the ceiling. No peer forwards 9000-byte frames here.
  3000-byte frames, MTU 3000: the same wirespeed commands (a frame each, the socket still bound
      for multi-buffer) against testpmd rxonly and macswap on net_af_xdp, the issue's peer, at a
      size it takes.
Each figure is the median of RUNS interleaved runs with (min-max): trafgen sends for exactly
DURATION seconds and a run's rate is what the measured program took in over them, counted the
same way for every tool (its own total at exit). Writes bench/results/<date>-jumbo.json and bench/JUMBO.md. Environment: RUNS (3),
DURATION (8), ONLY (a regex of row names).
"""

import datetime
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time

import benchlib
from benchlib import interleaved, returns_sink, sh, spawn, stop, stop_all, wait_for
from peers import trafgen_conf

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
WS = os.path.join(ROOT, "target", "release", "wirespeed")
RUNS = int(os.environ.get("RUNS", "3"))
DURATION = int(os.environ.get("DURATION", "8"))
ONLY = re.compile(os.environ.get("ONLY", "."))
LOAD_CPU, MEAS_CPU = "0", "1"
PREFIX = f"wsj{os.getpid() % 100000}"
NS_A, NS_B = PREFIX + "a", PREFIX + "b"
IF_A, IF_B = PREFIX + "a0", PREFIX + "b0"
# (frame size on the wire, MTU of both ends)
PHASES = [(9000, 9000), (3000, 3000)]


def log(msg):
    print(f"bench-jumbo: {msg}", file=sys.stderr, flush=True)


def setup():
    benchlib.veth_pair(NS_A, IF_A, NS_B, IF_B)
    sh("ip", "netns", "exec", NS_B, "ethtool", "-K", IF_B, "gro", "on")
    # What l2fwd and macswap send back, A drops at ingress.
    returns_sink(NS_A, IF_A)


def set_mtu(mtu):
    for ns, dev in ((NS_A, IF_A), (NS_B, IF_B)):
        sh("ip", "-n", ns, "link", "set", dev, "mtu", str(mtu))


def cleanup(*_):
    stop_all()
    for ns in (NS_A, NS_B):
        sh("ip", "netns", "del", ns, check=False)


def testpmd_argv(mode, size):
    vdev = f"net_af_xdp0,iface={IF_B},start_queue=0,queue_count=1"
    return ["stdbuf", "-oL", "dpdk-testpmd", "-l", f"{LOAD_CPU},{MEAS_CPU}", "--main-lcore", LOAD_CPU,
            "--no-huge", "-m", "1024", "--no-pci", "--file-prefix", PREFIX, "--vdev", vdev,
            "--", f"--forward-mode={mode}", "--stats-period", "1", "--nb-cores=1",
            # The port's MTU (testpmd would otherwise set the interface's to 1500), and mbufs
            # large enough for it: the driver's UMEM frames are the mbufs (3840 is the largest
            # size whose UMEM it creates here; 3072 takes nothing of 3000 bytes).
            f"--max-pkt-len={size}", "--mbuf-size=3840"]


def received(kind, text):
    """Packets the measured program took in, from what it printed at its end."""
    if kind == "wirespeed":
        lines = [line for line in text.splitlines() if line.startswith("{")]
        if not lines:
            raise RuntimeError(f"no summary: {text.strip()[-300:]}")
        result = json.loads(lines[-1])
        drops = result.get("drops", {})
        if drops.get("rx_bad_chain") or drops.get("tx_bad_chain"):
            raise RuntimeError(f"bad chains: {drops}")
        return result["packets"]
    if kind == "testpmd":
        counts = re.findall(r"RX-packets:\s+(\d+)", text)
        if not counts:
            raise RuntimeError(f"no RX-packets in testpmd's output: {text.strip()[-300:]}")
        return int(counts[-1])
    counts = re.findall(r"(\d+)\s+packets passed filter", text)
    if not counts:
        raise RuntimeError(f"no count in netsniff-ng's output: {text.strip()[-300:]}")
    return int(counts[-1])


def receive(measured_argv, kind, size, tmp):
    """A measured program on B while trafgen sends from A for exactly DURATION seconds; returns
    the Mpps it took in over that window (the same count for every tool: what it received in
    all, over the load's seconds)."""
    mpath, lpath = os.path.join(tmp, "measured"), os.path.join(tmp, "load")
    with open(mpath, "w") as mout, open(lpath, "w") as lout:
        m = spawn(NS_B, MEAS_CPU, measured_argv, mout)
        try:
            wait_for(mpath, r" ready |start packet forwarding|Running!", m)
            time.sleep(0.5)
            load = spawn(NS_A, LOAD_CPU, ["timeout", "-s", "INT", str(DURATION), "trafgen", "--dev", IF_A,
                                          "--conf", trafgen_conf(size, tmp), "--cpus", "1", "--qdisc-path",
                                          "--jumbo-support"], lout)
            load.wait(DURATION + 15)
            # What was sent on its way is in before the count is read.
            time.sleep(0.5)
            stop(m, signal.SIGINT)
        finally:
            stop_all()
    return received(kind, open(mpath).read()) / DURATION / 1e6


def rows(size, tmp):
    ws = lambda mode, *flags: lambda: receive([WS, "bench", mode, "--port", f"xdp:{IF_B}", *flags,
                                               "--duration", "600", "--quiet", "--json"], "wirespeed", size, tmp)
    pmd = lambda mode: lambda: receive(testpmd_argv(mode, size), "testpmd", size, tmp)
    sniff = lambda: receive(["netsniff-ng", "--in", IF_B, "--silent", "--jumbo-support", "--ring-size", "64MiB"],
                            "netsniff-ng", size, tmp)
    # Fewer frames in circulation: the kernel's copies land in frames still in the caches,
    # which counts for more the larger the packet (bench/README.md, "Frames in circulation").
    few = ("--frames", "1024", "--ring-size", "512")
    if size > 3500:
        return [
            ("ceiling", "wirespeed xdpdrop", ws("xdpdrop")),
            ("rxdrop", "wirespeed AF_XDP", ws("rxdrop")),
            ("rxdrop", "wirespeed AF_XDP 1024 frames", ws("rxdrop", *few)),
            ("rxdrop", "wirespeed AF_XDP skb mode, 1024 frames", ws("rxdrop", "--xdp-mode", "skb", *few)),
            ("rxdrop", "netsniff-ng", sniff),
            ("l2fwd", "wirespeed AF_XDP", ws("l2fwd")),
            ("l2fwd", "wirespeed AF_XDP 1024 frames", ws("l2fwd", *few)),
        ]
    return [
        ("rxdrop", "wirespeed AF_XDP", ws("rxdrop")),
        ("rxdrop", "wirespeed AF_XDP 1024 frames", ws("rxdrop", *few)),
        ("rxdrop", "testpmd af_xdp", pmd("rxonly")),
        ("l2fwd", "wirespeed AF_XDP", ws("l2fwd")),
        ("l2fwd", "wirespeed AF_XDP 1024 frames", ws("l2fwd", *few)),
        ("l2fwd", "testpmd af_xdp", pmd("macswap")),
    ]


def main():
    if os.geteuid() != 0:
        sys.exit("bench-jumbo: needs root (namespaces, XDP): try sudo make bench-jumbo")
    for tool in ("dpdk-testpmd", "trafgen", "netsniff-ng", "stdbuf", "taskset"):
        if subprocess.run(["which", tool], capture_output=True).returncode != 0:
            sys.exit(f"bench-jumbo: {tool} is not installed (make bench-jumbo installs it)")
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    log(f"load average {open('/proc/loadavg').read().split()[0]} (numbers are noisy when it is above 0.5)")
    results = []
    try:
        setup()
        with tempfile.TemporaryDirectory(prefix="wirespeed-jumbo.") as tmp:
            for size, mtu in PHASES:
                set_mtu(mtu)
                chosen = [r for r in rows(size, tmp) if ONLY.search(f"{size} {r[0]} {r[1]}")]
                cases = [(f"{size:>5} {w:<8} {t:<40}", lambda fn=fn: (fn(), None)) for w, t, fn in chosen]
                for (workload, tool, _), row in zip(chosen, interleaved(cases, RUNS, log)):
                    results.append({"workload": workload, "tool": tool, "size": size, "mtu": mtu, **row})
    finally:
        cleanup()
    write(results)
    failed = [f"{r['size']} B {r['workload']} {r['tool']}: {r['error']}" for r in results if r.get("error")]
    if failed:
        sys.exit("bench-jumbo: could not measure " + "; ".join(failed))


def gbits(mpps, size):
    return mpps * size * 8 / 1000


def write(results):
    date = datetime.date.today().isoformat()
    machine = benchlib.machine(load_cpu=LOAD_CPU, measured_cpu=MEAS_CPU)
    os.makedirs(os.path.join(ROOT, "bench", "results"), exist_ok=True)
    with open(os.path.join(ROOT, "bench", "results", f"{date}-jumbo.json"), "w") as f:
        json.dump({"date": date, "machine": machine, "runs": RUNS, "duration_s": DURATION, "results": results},
                  f, indent=1)
    lines = [f"# Packets larger than a frame: wirespeed against testpmd ({date})", "",
             f"Median of {RUNS} interleaved runs of {DURATION:g} s (min-max), one queue, veth; trafgen's load on "
             f"CPU {LOAD_CPU} (namespace A), the measured program on CPU {MEAS_CPU} (namespace B); kernel "
             f"{machine['kernel']}, {machine['cpu']}. Made by `make bench-jumbo` (bench/jumbo.py, which says why "
             "the peers are these). Gbit/s: Mpps x frame size (FCS included) x 8. "
             "Ratio: wirespeed over the best peer in the same row group.", ""]
    for size, mtu in PHASES:
        rs = [r for r in results if r["size"] == size]
        if not rs:
            continue
        lines += [f"## {size}-byte frames, MTU {mtu}", "",
                  "| workload | tool | Mpps | Gbit/s | ratio to peer |", "| --- | --- | --- | --- | --- |"]
        for workload in ("ceiling", "rxdrop", "l2fwd"):
            group = [r for r in rs if r["workload"] == workload]
            peers = [r["median"] for r in group if r.get("median") is not None and not r["tool"].startswith("wirespeed")]
            best = max(peers) if peers else None
            for r in group:
                if r.get("median") is None:
                    lines.append(f"| {workload} | {r['tool']} | failed: {r.get('error', '')[:80]} | | |")
                    continue
                fig = f"{r['median']:.3f} ({r['min']:.3f}-{r['max']:.3f})"
                ratio = f"{r['median'] / best:.2f}" if best and r["tool"].startswith("wirespeed") else ""
                lines.append(f"| {workload} | {r['tool']} | {fig} | {gbits(r['median'], size):.1f} | {ratio} |")
        lines.append("")
    with open(os.path.join(ROOT, "bench", "JUMBO.md"), "w") as f:
        f.write("\n".join(lines))


if __name__ == "__main__":
    main()
