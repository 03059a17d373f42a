#!/usr/bin/python3
"""make bench-observe: what watching the switch costs it.

Three namespaces A, M and B and two veth pairs, A-M and M-B (one queue each, GRO on at every
end so XDP-redirected frames are taken), made here and removed on every exit. The switch in
M forwards port 1 to port 2 (one rule, in_port=1,actions=output:2); the load is wirespeed's
kernel engine on CPU 0 (gen --engine kernel, 64-byte UDP frames over FLOWS flows, so the
IPFIX export has FLOWS records to keep); an xdpdrop sink on B counts what arrives. The
switch's poll-mode thread is pinned to CPU 1.

Cases, each with the switch in user space and with --offload:
  plain       the switch alone
  observed    --metrics scraped once a second (one Python process in M, urllib) and --ipfix
              to an nfcapd in M, its default timeouts
  observed, active timeout 1 s
              the same with --ipfix-active-timeout 1: a record for every flow every second,
              the export's worst case
The scraper and the collector are not pinned (the scheduler places them, as it would a
Prometheus agent); on 2 CPUs they share them with the load and the switch.
The figure is the sink's rate over DURATION seconds; the median of RUNS interleaved runs.
The goal (issue 34): observed >= 0.97 x plain. Writes bench/results/<date>-observe.json and
bench/OBSERVE.md. Environment: RUNS (7), DURATION (5), FLOWS (1000).
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
RUNS = int(os.environ.get("RUNS", "7"))
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


SCRAPER = """
import sys, time, urllib.request
scrapes = failed = 0
while True:
    time.sleep(1)
    try:
        urllib.request.urlopen("http://%s/metrics", timeout=1).read()
    except Exception:
        failed += 1
    scrapes += 1
    print(scrapes, failed, flush=True)
""" % METRICS


def scrapes_done(path):
    """(scrapes, failed) from the scraper's last line."""
    lines = open(path).read().split()
    return (int(lines[-2]), int(lines[-1])) if len(lines) >= 2 else (0, 0)


def run_case(tmp, rules, offload, observed, active_timeout=None):
    """One run: the switch (and its watchers), the load, the sink's rate."""
    paths = {k: os.path.join(tmp, k) for k in ("switch", "load", "sink", "nfcapd", "scraper")}
    argv = [WS, "switch", "--port", f"1=xdp:{IF['m0']}", "--port", f"2=xdp:{IF['m1']}", "--pmd-cpus", "1",
            "--flows", rules, "--ctl", os.path.join(tmp, "ctl.sock"), "--json"]
    if offload:
        argv.append("--offload")
    flowdir = os.path.join(tmp, "flows")
    os.makedirs(flowdir, exist_ok=True)
    if observed:
        argv += ["--metrics", METRICS, "--ipfix", IPFIX]
        if active_timeout:
            argv += ["--ipfix-active-timeout", str(active_timeout)]
    with open(paths["switch"], "w") as sw, open(paths["load"], "w") as lo, open(paths["sink"], "w") as si, \
            open(paths["nfcapd"], "w") as nf, open(paths["scraper"], "w") as sc:
        try:
            if observed:
                host, port = IPFIX.split(":")
                spawn(NS["m"], None, ["nfcapd", "-w", flowdir, "-b", host, "-p", port, "-t", "60"], nf)
            s = spawn(NS["m"], None, argv, sw)
            wait_for(paths["switch"], r" ready", s)
            if observed:
                spawn(NS["m"], None, ["/usr/bin/python3", "-c", SCRAPER], sc)
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
            stop_all()
    if observed:
        scrapes, failed = scrapes_done(paths["scraper"])
        if failed or scrapes < DURATION:
            raise RuntimeError(f"{failed} of {scrapes} scrapes failed")
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
            for kind, observed, active in (("plain", False, None), ("observed", True, None),
                                           ("observed, active timeout 1 s", True, 1)):
                cases.append((f"{mode}, {kind}",
                              lambda o=offload, b=observed, a=active: run_case(tmp, rules, o, b, a)))
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
        "--metrics scraped once a second (urllib, one process in the switch's namespace) and --ipfix to "
        "nfcapd there, with its default timeouts (active 60 s, idle 15 s) and with --ipfix-active-timeout 1 "
        "(every flow's record every second). "
        f"Median of {RUNS} interleaved runs of {DURATION:g} s, Mpps at the sink (min-max).",
        "",
        "| switch | plain | observed | / plain | observed, active timeout 1 s | / plain | goal 0.97 |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    cell = lambda r: f"{r['median']:.3f} ({r['min']:.3f}-{r['max']:.3f})" if r.get("median") else f"failed: {r['error']}"
    ratio = lambda r, p: r["median"] / p["median"] if r.get("median") and p.get("median") else None
    for mode in ("user space", "--offload"):
        plain = rows[f"{mode}, plain"]
        seen, worst = rows[f"{mode}, observed"], rows[f"{mode}, observed, active timeout 1 s"]
        r1, r2 = ratio(seen, plain), ratio(worst, plain)
        fmt = lambda r: f"{r:.3f}" if r is not None else ""
        met = "met" if r1 is not None and r1 >= 0.97 else "missed" if r1 is not None else ""
        lines.append(f"| {mode} | {cell(plain)} | {cell(seen)} | {fmt(r1)} | {cell(worst)} | {fmt(r2)} | {met} |")
    lines.append("")
    with open(os.path.join(ROOT, "bench", "OBSERVE.md"), "w") as f:
        f.write("\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
