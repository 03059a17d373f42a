#!/usr/bin/python3
"""make bench-idle: how much CPU a receiver burns below its limit, wirespeed against testpmd.

Two namespaces joined by a veth pair (made here, removed on every exit). gen (--rate R,
64-byte frames, stamped; the kernel engine, and at 0.5 Mpps also the socket engine, whose
pacing is even: see LOADS) sends from namespace A pinned to CPU 0; the receiver runs in
namespace B pinned to CPU 1, one at a time:
  wirespeed bench rxdrop and wirespeed recv, with rings that outlast a late wake-up
           (--ring-size 32768 --frames 65536: the idle policy naps only where the ring holds
           WAKE_TAIL, 10 ms, of the load; crates/port/src/idle.rs)
  the same with each tool's default rings (rxdrop 1024, recv 16384), where it spins
  testpmd rxonly on net_af_xdp (busy_budget=0, as bench-peers runs it)
On veth the receiving side's kernel work runs on the sender's CPU, so CPU 1 runs only the
receiver. Its busy share is the receiver process's CPU time (all threads, /proc/PID/stat)
over the middle of the run; CPU 1's non-idle share (/proc/stat, steal left out) is recorded
beside it, and agrees with it on a quiet machine. Every row also counts what the
receiver got against what gen sent (zero loss is the goal), and recv gives the one-way
latency percentiles from gen's send stamps. Goals (issue 33): wirespeed's busy share
<= 0.15x testpmd's at 0.5 Mpps and <= 0.3x at 2 Mpps, no loss in either.
Each figure is the median of RUNS interleaved runs. Writes bench/results/<date>-idle.json and
bench/IDLE.md. Environment: RUNS (3), DURATION (6), LOADS ("0.5:kernel 2:kernel 0.5:socket",
Mpps and gen's engine), WS (the wirespeed
binary, default target/release/wirespeed: another build to compare), ONLY (a regex of rows).
"""

import datetime
import json
import os
import re
import statistics
import sys
import tempfile
import time

import benchlib
from benchlib import sh, spawn, stop, stop_all, wait_for, ws_json

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
WS = os.environ.get("WS", os.path.join(ROOT, "target", "release", "wirespeed"))
RUNS = int(os.environ.get("RUNS", "3"))
DURATION = float(os.environ.get("DURATION", "6"))
# Offered loads: (Mpps, engine). The kernel engine paces by calls (each call's frames at line
# rate, then a wait: at 0.5 Mpps a 0.5 s call of 250,000 frames takes 50 ms, then silence);
# the socket engine paces a burst at a time, evenly, but reaches about 0.5 Mpps here.
LOADS = [(float(r), e) for r, e in (x.split(":") for x in os.environ.get(
    "LOADS", "0.5:kernel 2:kernel 0.5:socket").split())]
ONLY = re.compile(os.environ.get("ONLY", "."))
LOAD_CPU, MEAS_CPU = "0", "1"
PREFIX = f"wsi{os.getpid() % 100000}"
NS_A, NS_B = PREFIX + "a", PREFIX + "b"
IF_A, IF_B = PREFIX + "a0", PREFIX + "b0"
DEEP = ["--ring-size", "32768", "--frames", "65536"]


def log(msg):
    print(f"bench-idle: {msg}", file=sys.stderr, flush=True)


def setup():
    benchlib.veth_pair(NS_A, IF_A, NS_B, IF_B)


def cleanup(*_):
    stop_all()
    for ns in (NS_A, NS_B):
        sh("ip", "netns", "del", ns, check=False)


def cpu_ticks(cpu):
    """(busy, total) ticks of one CPU from /proc/stat; busy leaves idle, iowait and steal out."""
    for line in open("/proc/stat"):
        f = line.split()
        if f[0] == f"cpu{cpu}":
            user, nice, system, idle, iowait, irq, softirq, steal = (int(x) for x in f[1:9])
            return user + nice + system + irq + softirq, user + nice + system + idle + iowait + irq + softirq
    raise RuntimeError(f"no cpu{cpu} in /proc/stat")


def process_ticks(pid):
    """User + system ticks of a process, all its threads (/proc/PID/stat)."""
    f = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return int(f[11]) + int(f[12])


def testpmd_argv():
    vdev = f"net_af_xdp0,iface={IF_B},start_queue=0,queue_count=1,busy_budget=0"
    return ["stdbuf", "-oL", "dpdk-testpmd", "-l", f"{LOAD_CPU},{MEAS_CPU}", "--main-lcore", LOAD_CPU,
            "--no-huge", "-m", "1024", "--no-pci", "--file-prefix", PREFIX, "--vdev", vdev,
            "--", "--forward-mode=rxonly", "--stats-period", "1", "--nb-cores=1"]


def testpmd_received(text):
    """The packets testpmd counted, from the totals it prints at exit."""
    got = re.findall(r"RX-packets:\s+(\d+)", text)
    if not got:
        raise RuntimeError(f"testpmd printed no totals: {text.strip()[-300:]}")
    return int(got[-1])


def load_argv(mpps, engine):
    return [WS, "gen", "--port", f"xdp:{IF_A}", "--engine", engine, "--rate", f"{mpps}M",
            "--duration", str(DURATION + 2), "--json", "-q"]


def measure(kind, argv, mpps, engine, tmp):
    """One run: the receiver up on CPU 1, the load for DURATION + 2 s, CPU 1's busy share over
    the middle DURATION - 1 s. Returns a dict of busy, sent, received, lost, p99_us."""
    rpath, gpath = os.path.join(tmp, "receiver"), os.path.join(tmp, "gen")
    with open(rpath, "w") as rout, open(gpath, "w") as gout:
        r = spawn(NS_B, MEAS_CPU, argv, rout)
        try:
            wait_for(rpath, r" ready |start packet forwarding", r)
            time.sleep(0.5)
            g = spawn(NS_A, LOAD_CPU, load_argv(mpps, engine), gout)
            time.sleep(1.5)
            b0, t0, p0, w0 = *cpu_ticks(MEAS_CPU), process_ticks(r.pid), time.monotonic()
            time.sleep(DURATION - 1)
            b1, t1, p1, w1 = *cpu_ticks(MEAS_CPU), process_ticks(r.pid), time.monotonic()
            g.wait(DURATION + 30)
            time.sleep(0.5)
            stop(r)
        finally:
            stop_all()
    sent = ws_json(gpath)["tx_packets"]
    p99 = None
    if kind == "testpmd":
        received = testpmd_received(open(rpath).read())
    else:
        j = ws_json(rpath)
        received = j["packets"]
        if j.get("generators"):
            p99 = j["generators"][0]["latency_ns"]["p99"] / 1e3
    hz = os.sysconf("SC_CLK_TCK")
    return {"busy": (p1 - p0) / hz / (w1 - w0), "cpu1_busy": (b1 - b0) / max(t1 - t0, 1),
            "sent": sent, "received": received,
            "lost": max(sent - received, 0), "p99_us": p99}


def rows():
    deep, dflt = DEEP, []
    out = []
    for mpps, engine in LOADS:
        for name, kind, argv in [
            ("wirespeed rxdrop, deep rings", "ws", [WS, "bench", "rxdrop", "--port", f"xdp:{IF_B}", "--duration", "3600", "--json", "-q", *deep]),
            ("wirespeed recv, deep rings", "ws", [WS, "recv", "--port", f"xdp:{IF_B}", "--json", "-q", *deep]),
            ("wirespeed rxdrop, default rings", "ws", [WS, "bench", "rxdrop", "--port", f"xdp:{IF_B}", "--duration", "3600", "--json", "-q", *dflt]),
            ("wirespeed recv, default rings", "ws", [WS, "recv", "--port", f"xdp:{IF_B}", "--json", "-q", *dflt]),
            ("testpmd af_xdp rxonly", "testpmd", testpmd_argv()),
        ]:
            if ONLY.search(name):
                out.append((mpps, engine, name, kind, argv))
    return out


def main():
    if os.geteuid() != 0:
        sys.exit("bench-idle: needs root (namespaces, veths, XDP)")
    import signal
    for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(s, lambda *_: sys.exit(130))
    setup()
    results = {}
    try:
        with tempfile.TemporaryDirectory(prefix="wirespeed-idle-") as tmp:
            cases = rows()
            for run in range(RUNS):
                for mpps, engine, name, kind, argv in cases:
                    key = f"{mpps:g} Mpps {engine}|{name}"
                    r = results.setdefault(key, {"mpps": mpps, "engine": engine, "tool": name, "runs": [],
                                                 "error": None})
                    if r["error"]:
                        continue
                    try:
                        m = measure(kind, argv, mpps, engine, tmp)
                        r["runs"].append(m)
                        log(f"run {run + 1}/{RUNS} {mpps:g} Mpps ({engine} engine) {name}: busy {m['busy']:.1%}, lost {m['lost']}"
                            + (f", p99 {m['p99_us']:.0f} us" if m["p99_us"] is not None else ""))
                    except Exception as e:  # noqa: BLE001 - a row that fails is reported, not fatal
                        r["error"] = str(e)[-300:]
                        log(f"{mpps:g} Mpps ({engine} engine) {name}: failed: {r['error']}")
    finally:
        cleanup()
    write(results)
    failed = [k for k, r in results.items() if r["error"]]
    if failed:
        sys.exit(f"bench-idle: could not measure: {', '.join(failed)}")


def write(results):
    machine = benchlib.machine(load_cpu=LOAD_CPU, measured_cpu=MEAS_CPU)
    for r in results.values():
        if r["runs"]:
            r["busy"] = statistics.median(m["busy"] for m in r["runs"])
            r["cpu1_busy"] = statistics.median(m["cpu1_busy"] for m in r["runs"])
            r["lost_max"] = max(m["lost"] for m in r["runs"])
            p99 = [m["p99_us"] for m in r["runs"] if m["p99_us"] is not None]
            r["p99_us"] = statistics.median(p99) if p99 else None
    day = datetime.date.today().isoformat()
    path = os.path.join(ROOT, "bench", "results", f"{day}-idle.json")
    with open(path, "w") as f:
        json.dump({"machine": machine, "runs": RUNS, "duration": DURATION, "binary": WS,
                   "results": list(results.values())}, f, indent=1)
    lines = ["# Idle politeness: CPU a receiver burns below its limit", "",
             f"`make bench-idle` (bench/idle.py), {day}: {machine['cpu']}, {machine['cpus']} CPUs, kernel "
             f"{machine['kernel']}. gen sends 64-byte frames at the offered rate from CPU 0 (namespace A): "
             "the kernel engine paces by calls, each call's frames at line rate and then a wait (at 0.5 Mpps a "
             "call of 250,000 frames takes 50 ms, then 450 ms of silence; a call costs milliseconds of set-up, "
             "so shorter ones cannot keep 2 Mpps), the socket engine a burst of 64 at a time, evenly, up to "
             "about 0.5 Mpps here. The receiver runs on CPU 1 (namespace B), which on veth runs nothing else. "
             f"Busy: the receiver's CPU time (all its threads) over the middle of each run, median of {RUNS} interleaved runs "
             f"of {DURATION:g} s; lost: the most any run lost (sent by gen less received); p99: recv's "
             "one-way latency from gen's send stamps.", "",
             "| offered (engine) | receiver | busy | vs testpmd | CPU 1 busy | lost (worst run) | recv p99 latency |",
             "| --- | --- | --- | --- | --- | --- | --- |"]
    for mpps, engine in LOADS:
        peer = results.get(f"{mpps:g} Mpps {engine}|testpmd af_xdp rxonly", {}).get("busy")
        for r in (r for r in results.values() if (r["mpps"], r["engine"]) == (mpps, engine)):
            if r["error"] or not r["runs"]:
                lines.append(f"| {mpps:g} Mpps ({engine}) | {r['tool']} | failed: {r['error']} | | | | |")
                continue
            ratio = f"{r['busy'] / peer:.2f}x" if peer and not r["tool"].startswith("testpmd") else ""
            p99 = f"{r['p99_us']:.0f} us" if r.get("p99_us") is not None else ""
            lines.append(f"| {mpps:g} Mpps ({engine}) | {r['tool']} | {r['busy']:.1%} | {ratio} | {r['cpu1_busy']:.1%} | "
                         f"{r['lost_max']} | {p99} |")
    lines += ["", "Goals: wirespeed's busy share <= 0.15x testpmd's at 0.5 Mpps and <= 0.3x at 2 Mpps, "
              "zero loss in both.", ""]
    with open(os.path.join(ROOT, "bench", "IDLE.md"), "w") as f:
        f.write("\n".join(lines))
    log(f"wrote {path} and bench/IDLE.md")


if __name__ == "__main__":
    main()
