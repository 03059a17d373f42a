#!/usr/bin/python3
"""make bench-observe: what watching the switch costs it.

Three namespaces A, M and B and two veth pairs, A-M and M-B (one queue each, GRO on at every
end so XDP-redirected frames are taken), made here and removed on every exit. The switch in
M forwards port 1 to port 2 (one rule, in_port=1,actions=output:2); the load is wirespeed's
kernel engine on CPU 0 (gen --engine kernel, 64-byte UDP frames over FLOWS flows, so the
IPFIX export has FLOWS records to keep); an xdpdrop sink on B counts what arrives. The
switch's poll-mode thread is pinned to CPU 1.

Cases, each with the switch in user space and with --offload:
  plain     the switch alone
  observed  --metrics scraped once a second (curl in M) and --ipfix to an nfcapd in M,
            active timeout 1 s (a record per flow every second: the export's worst case)
The figure is the sink's rate over DURATION seconds; the median of RUNS interleaved runs.
The goal (issue 34): observed >= 0.97 x plain. Writes bench/results/<date>-observe.json and
bench/OBSERVE.md. Environment: RUNS (5), DURATION (5), FLOWS (1000).
"""

import datetime
import json
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time

import benchlib
from benchlib import sh, spawn, stop_all, wait_for, ws_json

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
WS = os.environ.get("WS", os.path.join(ROOT, "target", "release", "wirespeed"))
RUNS = int(os.environ.get("RUNS", "5"))
DURATION = float(os.environ.get("DURATION", "5"))
FLOWS = int(os.environ.get("FLOWS", "1000"))
PREFIX = f"wso{os.getpid() % 100000}"
NS = {k: PREFIX + k for k in ("a", "m", "b")}
IF = {"a": PREFIX + "a0", "m0": PREFIX + "m0", "m1": PREFIX + "m1", "b": PREFIX + "b0"}
METRICS = "127.0.0.1:9470"
IPFIX = "127.0.0.1:4739"


def log(msg):
    print(f"bench-observe: {msg}", file=sys.stderr, flush=True)


def setup():
    for ns in NS.values():
        sh("ip", "netns", "add", ns)
        sh("ip", "netns", "exec", ns, "sysctl", "-qw", "net.ipv6.conf.all.disable_ipv6=1")
    sh("ip", "link", "add", IF["a"], "netns", NS["a"], "type", "veth", "peer", "name", IF["m0"], "netns", NS["m"])
    sh("ip", "link", "add", IF["m1"], "netns", NS["m"], "type", "veth", "peer", "name", IF["b"], "netns", NS["b"])
    sh("ip", "-n", NS["m"], "link", "set", "lo", "up")
    for ns, dev in ((NS["a"], IF["a"]), (NS["m"], IF["m0"]), (NS["m"], IF["m1"]), (NS["b"], IF["b"])):
        sh("ip", "-n", ns, "link", "set", dev, "up")
        sh("ip", "netns", "exec", ns, "ethtool", "-K", dev, "gro", "on")


def cleanup():
    stop_all()
    for ns in NS.values():
        sh("ip", "netns", "del", ns, check=False)


def scraper(stop, counts):
    """Scrapes the switch's /metrics once a second until `stop` is set."""
    while not stop.wait(1.0):
        r = subprocess.run(["ip", "netns", "exec", NS["m"], "curl", "-sf", f"http://{METRICS}/metrics"],
                           capture_output=True)
        counts["scrapes"] += 1
        counts["failed"] += r.returncode != 0


def run_case(tmp, rules, offload, observed):
    """One run: the switch (and its watchers), the load, the sink's rate."""
    paths = {k: os.path.join(tmp, k) for k in ("switch", "load", "sink", "nfcapd")}
    argv = [WS, "switch", "--port", f"1=xdp:{IF['m0']}", "--port", f"2=xdp:{IF['m1']}", "--pmd-cpus", "1",
            "--flows", rules, "--ctl", os.path.join(tmp, "ctl.sock"), "--json"]
    if offload:
        argv.append("--offload")
    stop = threading.Event()
    counts = {"scrapes": 0, "failed": 0}
    watcher = None
    flowdir = os.path.join(tmp, "flows")
    os.makedirs(flowdir, exist_ok=True)
    with open(paths["switch"], "w") as sw, open(paths["load"], "w") as lo, open(paths["sink"], "w") as si, \
            open(paths["nfcapd"], "w") as nf:
        try:
            if observed:
                host, port = IPFIX.split(":")
                spawn(NS["m"], None, ["nfcapd", "-w", flowdir, "-b", host, "-p", port, "-t", "60"], nf)
                argv += ["--metrics", METRICS, "--ipfix", IPFIX, "--ipfix-active-timeout", "1"]
            s = spawn(NS["m"], None, argv, sw)
            wait_for(paths["switch"], r" ready", s)
            if observed:
                watcher = threading.Thread(target=scraper, args=(stop, counts))
                watcher.start()
            load = spawn(NS["a"], None, [WS, "gen", "--engine", "kernel", "--cpus", "0", "--port", f"xdp:{IF['a']}",
                                         "--flows", str(FLOWS), "--duration", str(DURATION + 4), "--json", "-q"], lo)
            time.sleep(2)
            if load.poll() is not None:
                raise RuntimeError(f"load exited: {open(paths['load']).read()[-300:]}")
            sink = spawn(NS["b"], None, [WS, "bench", "xdpdrop", "--port", f"xdp:{IF['b']}", "--duration",
                                         str(DURATION), "--json", "--quiet"], si)
            sink.wait(DURATION + 30)
            load.wait(DURATION + 30)
        finally:
            stop.set()
            if watcher:
                watcher.join()
            stop_all()
    if observed and counts["failed"]:
        raise RuntimeError(f"{counts['failed']} of {counts['scrapes']} scrapes failed")
    if observed and counts["scrapes"] < DURATION:
        raise RuntimeError(f"only {counts['scrapes']} scrapes")
    return ws_json(paths["sink"])["mpps"], None


def main():
    if os.geteuid() != 0:
        sys.exit("bench-observe: needs root (namespaces, XDP)")
    if not os.path.exists(WS):
        sys.exit(f"bench-observe: {WS} missing: cargo build --release")
    tmp = tempfile.mkdtemp(prefix="wirespeed-observe-")
    try:
        setup()
        rules = os.path.join(tmp, "rules.txt")
        with open(rules, "w") as f:
            f.write("priority=1,in_port=1,actions=output:2\n")
        cases = []
        for offload in (False, True):
            mode = "--offload" if offload else "user space"
            for observed in (False, True):
                label = f"{mode}, {'observed' if observed else 'plain'}"
                cases.append((label, lambda o=offload, b=observed: run_case(tmp, rules, o, b)))
        results = benchlib.interleaved(cases, RUNS, log)
    finally:
        cleanup()
        sh("rm", "-rf", tmp, check=False)
    write(cases, results)


def write(cases, results):
    host = benchlib.machine(load="CPU 0 (kernel engine)", switch="CPU 1 (poll-mode thread)")
    rows = {label: r for (label, _), r in zip(cases, results)}
    date = datetime.date.today().isoformat()
    out = {"date": date, "host": host, "runs": RUNS, "duration_s": DURATION, "flows": FLOWS,
           "hostname": socket.gethostname(), "results": rows}
    os.makedirs(os.path.join(ROOT, "bench", "results"), exist_ok=True)
    with open(os.path.join(ROOT, "bench", "results", f"{date}-observe.json"), "w") as f:
        json.dump(out, f, indent=1)
    lines = [
        "# What watching the switch costs (make bench-observe)",
        "",
        f"{date}, {host['cpu']}, {host['cpus']} CPUs, Linux {host['kernel']}. Load: wirespeed's kernel engine "
        f"on CPU 0, 64-byte UDP frames over {FLOWS} flows into port 1; the switch's poll-mode thread on CPU 1 "
        "forwards them to port 2 (in_port=1,actions=output:2), where an xdpdrop sink counts them. Observed: "
        "--metrics scraped once a second and --ipfix to nfcapd with --ipfix-active-timeout 1. "
        f"Median of {RUNS} interleaved runs of {DURATION:g} s, Mpps at the sink (min-max).",
        "",
        "| switch | plain | observed | observed / plain | goal |",
        "| --- | --- | --- | --- | --- |",
    ]
    for mode in ("user space", "--offload"):
        plain, seen = rows[f"{mode}, plain"], rows[f"{mode}, observed"]
        cell = lambda r: f"{r['median']:.3f} ({r['min']:.3f}-{r['max']:.3f})" if r.get("median") else f"failed: {r['error']}"
        ratio = f"{seen['median'] / plain['median']:.3f}" if plain.get("median") and seen.get("median") else ""
        met = "met" if ratio and float(ratio) >= 0.97 else "missed" if ratio else ""
        lines.append(f"| {mode} | {cell(plain)} | {cell(seen)} | {ratio} | >= 0.97 ({met}) |")
    lines.append("")
    with open(os.path.join(ROOT, "bench", "OBSERVE.md"), "w") as f:
        f.write("\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
