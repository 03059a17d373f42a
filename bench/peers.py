#!/usr/bin/python3
"""make bench-peers: wirespeed against the tools people use today, same veth set-up, same run.

Two namespaces joined by a veth pair (made here, removed on every exit). The load or sender
runs in namespace A pinned to CPU 0, the measured program or sink in namespace B pinned to
CPU 1, one thing at a time. Workloads (one queue, queue 0, unless said):
  ceiling  wirespeed xdpdrop (our XDP program drops in the driver)
  rxdrop   wirespeed xdp: and packet:, testpmd rxonly on net_af_xdp (default, busy_budget=0)
           and net_af_packet; load: wirespeed's kernel engine from A
  l2fwd    wirespeed l2fwd xdp: and packet:, testpmd macswap (same drivers); load as above,
           and the frames coming back to A dropped at its ingress by a tc filter
           (benchlib.returns_sink: veth runs the receiver's work on the sender's CPU, here
           the measured one)
  txpush   wirespeed bench txpush: socket engine (xdp:, packet:), kernel engine (one thread
           on CPU 0, and a thread on each CPU); wirespeed gen: socket engine, kernel engine
           (stamped, as gen sends by default, and --no-stamp; each on CPU 0, and from
           both CPUs); testpmd txonly (same
           drivers), netsniff-ng's trafgen; counted by a wirespeed xdpdrop sink on B
The veths have two queues (a kernel-engine thread on CPU c sends into queue c mod 2); every
one-CPU load and receiver uses queue 0.
Each figure is the median of RUNS runs of DURATION seconds with (min-max), the runs
interleaved (every row once, then again) so that drift spreads over every tool. A receiving
program's run is its steady rate, taken the same way for wirespeed and testpmd from their
per-second lines: the median second, leaving out the first two (start, warm-up) and the last
(partial). (Senders are all counted by the same sink, started once they are at speed.) wirespeed's rows
also give its user-space CPU cycles per packet (getrusage over the run, at /proc/cpuinfo's
clock: perf has no cycle counters on this VM). Writes
bench/results/<date>-peers.json, bench/RESULTS.md (ratios: wirespeed / best peer) and
bench/peers.png; exits non-zero, naming them, when a row could not be measured (a peer
that does not start). Environment: RUNS (3), DURATION (10), SIZES ("64 1500"), ONLY (a
regex of row names to run, for a quick check).
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
from benchlib import interleaved, returns_sink, sh, spawn, steady, stop, stop_all, testpmd_pps, wait_for, ws_json

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
WS = os.path.join(ROOT, "target", "release", "wirespeed")
RUNS = int(os.environ.get("RUNS", "3"))
DURATION = float(os.environ.get("DURATION", "10"))
SIZES = [int(s) for s in os.environ.get("SIZES", "64 1500").split()]
ONLY = re.compile(os.environ.get("ONLY", "."))
LOAD_CPU, MEAS_CPU = "0", "1"
PREFIX = f"wsp{os.getpid() % 100000}"
NS_A, NS_B = PREFIX + "a", PREFIX + "b"
IF_A, IF_B = PREFIX + "a0", PREFIX + "b0"
# CPU use the last wirespeed measurement reported (its JSON "cpu" object).
LAST_CPU = {}


def log(msg):
    print(f"bench-peers: {msg}", file=sys.stderr, flush=True)



def setup():
    sh("ip", "netns", "add", NS_A)
    sh("ip", "netns", "add", NS_B)
    queues = ("numrxqueues", "2", "numtxqueues", "2")
    sh("ip", "link", "add", IF_A, *queues, "netns", NS_A, "type", "veth", "peer", "name", IF_B, *queues, "netns", NS_B)
    for ns, dev in ((NS_A, IF_A), (NS_B, IF_B)):
        sh("ip", "netns", "exec", ns, "sysctl", "-qw", "net.ipv6.conf.all.disable_ipv6=1")
        sh("ip", "-n", ns, "link", "set", dev, "up")
        # NAPI on the receiving end, so frames sent with ndo_xdp_xmit are accepted.
        sh("ip", "netns", "exec", ns, "ethtool", "-K", dev, "gro", "on")
    # l2fwd and macswap send every frame back to A.
    returns_sink(NS_A, IF_A)


def cleanup(*_):
    stop_all()
    for ns in (NS_A, NS_B):
        sh("ip", "netns", "del", ns, check=False)



def testpmd_argv(driver, iface, mode, size, busy_budget=None):
    vdev = {"af_xdp": f"net_af_xdp0,iface={iface},start_queue=0,queue_count=1",
            "af_packet": f"net_af_packet0,iface={iface},qpairs=1,qdisc_bypass=1"}[driver]
    if busy_budget is not None:
        vdev += f",busy_budget={busy_budget}"
    # Main lcore on the load's CPU (it only prints statistics), forwarding lcore on ours.
    argv = ["stdbuf", "-oL", "dpdk-testpmd", "-l", f"{LOAD_CPU},{MEAS_CPU}", "--main-lcore", LOAD_CPU,
            "--no-huge", "-m", "1024", "--no-pci", "--file-prefix", PREFIX, "--vdev", vdev,
            "--", f"--forward-mode={mode}", "--stats-period", "1", "--nb-cores=1"]
    if mode == "txonly":
        argv.append(f"--txpkts={size - 4}")
    return argv


def kernel_load(size, seconds, out):
    return spawn(NS_A, LOAD_CPU, [WS, "bench", "txpush", "--engine", "kernel", "--port", f"xdp:{IF_A}",
                                  "--size", str(size), "--duration", str(seconds), "--quiet", "--json"], out)


def receive(measured_argv, kind, size, tmp):
    """A measured program on B under the kernel-engine load from A; returns Mpps. What a
    forwarder sends back, A drops at ingress (benchlib.returns_sink)."""
    mpath, lpath = os.path.join(tmp, "measured"), os.path.join(tmp, "load")
    with open(mpath, "w") as mout, open(lpath, "w") as lout:
        m = spawn(NS_B, MEAS_CPU, measured_argv, mout)
        try:
            wait_for(mpath, r" ready |start packet forwarding", m)
            time.sleep(0.5)
            load = kernel_load(size, DURATION + 3, lout)
            if kind == "wirespeed":
                m.wait(DURATION + 30)
            else:
                time.sleep(DURATION + 1)
                stop(m)
            stop(load, signal.SIGTERM)
        finally:
            stop_all()
    if kind == "wirespeed":
        result = ws_json(mpath)
        LAST_CPU.update(result.get("cpu") or {})
        LAST_CPU["whole_run_mpps"] = result["mpps"]
        return steady(result.get("per_second_mpps") or [], "wirespeed")
    return testpmd_pps(open(mpath).read(), "Rx-pps" if "rxonly" in " ".join(measured_argv) else "Tx-pps")


def transmit(sender_argv, size, tmp, cpus=LOAD_CPU):
    """A sender on A (on `cpus`) into a wirespeed xdpdrop sink on B; returns the Mpps that arrived."""
    spath, xpath = os.path.join(tmp, "sink"), os.path.join(tmp, "sender")
    with open(spath, "w") as sout, open(xpath, "w") as xout:
        x = spawn(NS_A, cpus, sender_argv, xout)
        try:
            time.sleep(2)  # the sender is up and at speed
            if x.poll() is not None:
                raise RuntimeError(f"sender exited: {open(xpath).read()[-300:]}")
            sink = spawn(NS_B, MEAS_CPU, [WS, "bench", "xdpdrop", "--port", f"xdp:{IF_B}", "--duration",
                                          str(DURATION), "--quiet", "--json", "--force"], sout)
            sink.wait(DURATION + 30)
            stop(x, signal.SIGINT)
        finally:
            stop_all()
    return ws_json(spath)["mpps"]


def trafgen_conf(size, tmp):
    """One UDP frame of `size` bytes on the wire, as trafgen's byte list."""
    frame = [0x02, 0, 0, 0, 0, 2, 0x02, 0, 0, 0, 0, 1, 0x08, 0x00]
    ip_len = size - 4 - 14
    ip = [0x45, 0, ip_len >> 8, ip_len & 255, 0, 0, 0, 0, 64, 17, 0, 0, 10, 0, 0, 1, 10, 0, 0, 2]
    s = sum((ip[i] << 8) + ip[i + 1] for i in range(0, 20, 2))
    while s > 0xFFFF:
        s = (s & 0xFFFF) + (s >> 16)
    ip[10], ip[11] = (~s >> 8) & 255, ~s & 255
    udp = [0, 9, 0, 9, (ip_len - 20) >> 8, (ip_len - 20) & 255, 0, 0]
    frame += ip + udp + [0] * (size - 4 - 42)
    path = os.path.join(tmp, "trafgen.cfg")
    with open(path, "w") as f:
        f.write("{ " + ", ".join(f"0x{b:02x}" for b in frame) + " }\n")
    return path


def rows(size, tmp):
    """(workload, tool, function) for every measurement of one frame size."""
    ws_rx = lambda b, m: lambda: receive([WS, "bench", m, "--port", f"{b}:{IF_B}", "--duration",
                                          str(DURATION), "--quiet", "--json"], "wirespeed", size, tmp)
    pmd_rx = lambda d, mode, bb=None: lambda: receive(testpmd_argv(d, IF_B, mode, size, bb), "testpmd", size, tmp)
    ws_tx = lambda args, cpus=LOAD_CPU: lambda: transmit([WS, "bench", "txpush", *args, "--size", str(size),
                                                          "--duration", str(DURATION + 6), "--quiet"], size, tmp, cpus)
    ws_gen = lambda args, cpus=LOAD_CPU: lambda: transmit([WS, "gen", *args, "--size", str(size), "--duration",
                                                          str(DURATION + 6), "--quiet"], size, tmp, cpus)
    both = f"{LOAD_CPU},{MEAS_CPU}"
    pmd_tx = lambda d, bb=None: lambda: transmit(testpmd_argv(d, IF_A, "txonly", size, bb), size, tmp)
    return [
        ("ceiling", "wirespeed xdpdrop", ws_rx("xdp", "xdpdrop")),
        ("rxdrop", "wirespeed AF_XDP", ws_rx("xdp", "rxdrop")),
        ("rxdrop", "wirespeed AF_PACKET", ws_rx("packet", "rxdrop")),
        ("rxdrop", "testpmd af_xdp", pmd_rx("af_xdp", "rxonly")),
        ("rxdrop", "testpmd af_xdp busy_budget=0", pmd_rx("af_xdp", "rxonly", 0)),
        ("rxdrop", "testpmd af_packet", pmd_rx("af_packet", "rxonly")),
        ("l2fwd", "wirespeed AF_XDP", ws_rx("xdp", "l2fwd")),
        ("l2fwd", "wirespeed AF_PACKET", ws_rx("packet", "l2fwd")),
        ("l2fwd", "testpmd af_xdp", pmd_rx("af_xdp", "macswap")),
        ("l2fwd", "testpmd af_xdp busy_budget=0", pmd_rx("af_xdp", "macswap", 0)),
        ("l2fwd", "testpmd af_packet", pmd_rx("af_packet", "macswap")),
        ("txpush", "wirespeed AF_XDP socket", ws_tx(["--port", f"xdp:{IF_A}"])),
        ("txpush", "wirespeed AF_PACKET socket", ws_tx(["--port", f"packet:{IF_A}"])),
        ("txpush", "wirespeed kernel engine", ws_tx(["--engine", "kernel", "--port", f"xdp:{IF_A}"])),
        ("txpush", "wirespeed kernel engine --cpus 0,1", ws_tx(["--engine", "kernel", "--cpus", both, "--port",
                                                                f"xdp:{IF_A}"], both)),
        ("txpush", "wirespeed gen socket", ws_gen(["--port", f"xdp:{IF_A}"])),
        ("txpush", "wirespeed gen kernel", ws_gen(["--engine", "kernel", "--port", f"xdp:{IF_A}"])),
        ("txpush", "wirespeed gen kernel --no-stamp", ws_gen(["--engine", "kernel", "--no-stamp", "--port",
                                                               f"xdp:{IF_A}"])),
        ("txpush", "wirespeed gen kernel --cpus 0,1", ws_gen(["--engine", "kernel", "--cpus", both, "--port",
                                                               f"xdp:{IF_A}"], both)),
        ("txpush", "wirespeed gen kernel --no-stamp --cpus 0,1", ws_gen(["--engine", "kernel", "--no-stamp", "--cpus",
                                                                         both, "--port", f"xdp:{IF_A}"], both)),
        ("txpush", "testpmd af_xdp", pmd_tx("af_xdp")),
        ("txpush", "testpmd af_xdp busy_budget=0", pmd_tx("af_xdp", 0)),
        ("txpush", "testpmd af_packet", pmd_tx("af_packet")),
        ("txpush", "trafgen", lambda: transmit(["trafgen", "--dev", IF_A, "--conf", trafgen_conf(size, tmp),
                                                "--cpus", "1", "--qdisc-path"], size, tmp)),
    ]


def measured(fn, whole_runs):
    """fn's Mpps with the user cycles per packet wirespeed reported for it (None for peers);
    a wirespeed receiver's rate over its whole run (idle start included) goes to
    `whole_runs`, for the record."""
    def run():
        LAST_CPU.clear()
        mpps = fn()
        if "whole_run_mpps" in LAST_CPU:
            whole_runs.append(round(LAST_CPU["whole_run_mpps"], 3))
        return mpps, LAST_CPU.get("user_cycles_per_packet")
    return run


def main():
    if os.geteuid() != 0:
        sys.exit("bench-peers: needs root (namespaces, XDP): try sudo make bench-peers")
    for tool in ("dpdk-testpmd", "trafgen", "stdbuf", "taskset"):
        if subprocess.run(["which", tool], capture_output=True).returncode != 0:
            sys.exit(f"bench-peers: {tool} is not installed (make bench-peers installs it)")
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    log(f"load average {open('/proc/loadavg').read().split()[0]} (numbers are noisy when it is above 0.5)")
    results = []
    try:
        setup()
        with tempfile.TemporaryDirectory(prefix="wirespeed-peers.") as tmp:
            for size in SIZES:
                chosen = [r for r in rows(size, tmp) if ONLY.search(f"{r[0]} {r[1]}")]
                wholes = [[] for _ in chosen]
                cases = [(f"{size:>5} {w:<8} {t:<32}", measured(fn, whole))
                         for (w, t, fn), whole in zip(chosen, wholes)]
                for (workload, tool, _), row, whole in zip(chosen, interleaved(cases, RUNS, log), wholes):
                    if whole:
                        row["whole_run_mpps"] = whole
                    results.append({"workload": workload, "tool": tool, "size": size, **row})
    finally:
        cleanup()
    write(results)
    failed = [f"{r['size']} B {r['workload']} {r['tool']}: {r['error']}" for r in results if r.get("error")]
    if failed:
        # What did run is written; the run as a whole did not do its job.
        sys.exit("bench-peers: could not measure " + "; ".join(failed))


def write(results):
    date = datetime.date.today().isoformat()
    # A partial run (some SIZES, or ONLY some rows) keeps today's other rows.
    path = os.path.join(ROOT, "bench", "results", f"{date}-peers.json")
    if os.path.exists(path):
        new = {(r["size"], r["workload"], r["tool"]) for r in results}
        kept = [r for r in json.load(open(path))["results"] if (r["size"], r["workload"], r["tool"]) not in new]
        order = {(w, t): i for i, (w, t, _) in enumerate(rows(0, "/"))}
        results = sorted(kept + results, key=lambda r: (r["size"], order.get((r["workload"], r["tool"]), 99)))
    sizes = sorted({r["size"] for r in results})
    machine = benchlib.machine(load_cpu=LOAD_CPU, measured_cpu=MEAS_CPU)
    os.makedirs(os.path.join(ROOT, "bench", "results"), exist_ok=True)
    with open(os.path.join(ROOT, "bench", "results", f"{date}-peers.json"), "w") as f:
        json.dump({"date": date, "machine": machine, "runs": RUNS, "duration_s": DURATION, "results": results}, f, indent=1)
    lines = [f"# wirespeed against its peers ({date})", "",
             f"Median Mpps of {RUNS} interleaved runs of {DURATION:g} s (min-max); one queue (the kernel engine with --cpus 0,1: two), veth, load/sender on CPU {LOAD_CPU},",
             f"measured program/sink on CPU {MEAS_CPU}; kernel {machine['kernel']}, {machine['cpu']}. "
             "Made by `make bench-peers` (bench/peers.py). Ratio: wirespeed's best over the best peer. "
             "A receiving program's run (ceiling, rxdrop, l2fwd) is its steady rate, the same way for wirespeed "
             "and testpmd: the median of its per-second rates without the first two seconds and the last; "
             "results/<date>-peers.json also has wirespeed's rate over each whole run (`whole_run_mpps`, its "
             "idle start included). Senders are counted by one sink, started once they are at speed. "
             "What l2fwd and macswap send back, A drops at ingress with a tc filter (benchlib.returns_sink).", ""]
    for size in sizes:
        lines += [f"## {size}-byte frames", "", "| workload | tool | Mpps | ratio to best peer | user cycles/packet |",
                  "| --- | --- | --- | --- | --- |"]
        for workload in ("ceiling", "rxdrop", "l2fwd", "txpush"):
            rs = [r for r in results if r["size"] == size and r["workload"] == workload]
            peers = [r["median"] for r in rs if r.get("median") is not None and not r["tool"].startswith("wirespeed")]
            best_peer = max(peers) if peers else None
            for r in rs:
                fig, ratio, cyc = benchlib.table_cells(r, best_peer)
                lines.append(f"| {workload} | {r['tool']} | {fig} | {ratio} | {cyc} |")
        lines.append("")
    lines += ["![bar chart](peers.png)", ""]
    with open(os.path.join(ROOT, "bench", "RESULTS.md"), "w") as f:
        f.write("\n".join(lines))
    chart(results, sizes)


def chart(results, sizes):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        log("matplotlib missing: no chart (apt-get install python3-matplotlib)")
        return
    fig, axes = plt.subplots(len(sizes), 1, figsize=(11, 5 * len(sizes)), squeeze=False)
    for ax, size in zip(axes[:, 0], sizes):
        rs = [r for r in results if r["size"] == size and r.get("median") is not None]
        labels = [f"{r['workload']}\n{r['tool']}" for r in rs]
        colors = ["tab:blue" if r["tool"].startswith("wirespeed") else "tab:gray" for r in rs]
        ax.bar(range(len(rs)), [r["median"] for r in rs], color=colors,
               yerr=[[r["median"] - r["min"] for r in rs], [r["max"] - r["median"] for r in rs]])
        ax.set_xticks(range(len(rs)), labels, rotation=75, fontsize=7)
        ax.set_ylabel("Mpps")
        ax.set_title(f"{size}-byte frames (blue: wirespeed, grey: peers)")
    fig.tight_layout()
    fig.savefig(os.path.join(ROOT, "bench", "peers.png"), dpi=90)


if __name__ == "__main__":
    main()
