#!/usr/bin/python3
"""make bench-churn-peers: rule changes under real traffic, wirespeed switch against Open
vSwitch (userspace datapath, afxdp ports), both driven over OpenFlow by the same controller
(bench/openflow_driver.py).

bench/switch_peers.py's namespaces: the generator in A on CPU 0, the switch in M, an XDP drop
counter in B (the sink). Each switch's poll-mode thread on CPU 1; its other threads (OpenFlow,
revalidation) not pinned, as in bench/openflow.py; the driver on CPU 0. A controller's rule a
host, HOSTS of them (`ip,nw_src=HOST,actions=output:2`), and the load `wirespeed gen
--engine kernel --flows HOSTS --src-port 65535`: one flow from each host, so HOSTS megaflows.
While it runs the controller changes the rules RATE times a second: a rule for a host outside
the traffic added, then deleted, each change waited for with a BARRIER. With CHANGE=group, the
changes are to a group instead: group 1 (indirect), which a rule for a host outside the traffic
sends to, modified to output to port 1, then back to port 2, and so on. Such a change cannot
decide any flow of the load otherwise: Open vSwitch's revalidators translate every datapath
flow again after each; wirespeed tests each megaflow against the change
(crates/switch/src/dpif/revalidate.rs), and with --offload each kernel entry too. With
CHANGE=touch each change does decide one flow anew: a rule for the first host of the traffic,
above its own and with the same actions, added then deleted (the flow's megaflow, and kernel
entry, go; its packets go where they went).

Figures per switch and rate: Mpps at the sink (median and min-max of RUNS interleaved runs),
the switch process's CPU seconds (user and system, every thread) over the measured window,
and the changes' barrier round trip (median, p99). Writes
bench/results/<date>-churn-peers.json and bench/CHURN-PEERS.md (CHANGE=group:
<date>-churn-peers-groups.json and CHURN-PEERS-GROUPS.md; CHANGE=touch:
<date>-churn-peers-touch.json and CHURN-PEERS-TOUCH.md).
Environment: RUNS (3), DURATION (10), HOSTS (10000), RATES ("0 10 100"), ONLY (regex of
switch names), CHANGE (rule, group or touch). `churn_peers.py --from RESULTS.json [--before
OLD.json COMMIT]` writes the table again from a run's results, with rows from a run of the
build before COMMIT beside them (the same script run from a worktree of COMMIT's parent).
"""

import datetime
import json
import os
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import time

import openflow
import switch_peers as sp
from benchlib import interleaved, machine, spawn, stop_all, ws_json

ROOT = sp.ROOT
WS = sp.WS
PORT = openflow.PORT
DRIVER_CPU = openflow.DRIVER_CPU
RUNS = int(os.environ.get("RUNS", "3"))
DURATION = float(os.environ.get("DURATION", "10"))
HOSTS = int(os.environ.get("HOSTS", "10000"))
RATES = [float(r) for r in os.environ.get("RATES", "0 10 100").split()]
ONLY = re.compile(os.environ.get("ONLY", "."))
CHANGE = os.environ.get("CHANGE", "rule")
# What a change is, and where its results go.
CHANGES = {
    "rule": ("Rule changes", "adds and deletes a rule for a host outside the traffic", "churn-peers",
             "CHURN-PEERS.md"),
    "group": ("Group changes", "modifies group 1 (indirect), to which only a rule for a host outside the "
              "traffic sends, to output to port 1, then to port 2, and so on", "churn-peers-groups",
              "CHURN-PEERS-GROUPS.md"),
    "touch": ("Rule changes touching a flow", "adds and deletes a rule for one host of the traffic, "
              "above its own and with the same actions (so each change decides that host's flow anew)",
              "churn-peers-touch", "CHURN-PEERS-TOUCH.md"),
}
FIRST_HOST = "10.1.0.1"
OUTSIDE_HOST = "10.250.0.1"
# Per case label: what each run measured besides Mpps.
EXTRA = {}


def log(msg):
    print(f"bench-churn-peers: {msg}", file=sys.stderr, flush=True)


def cpu_seconds(pid):
    """User and system CPU seconds of a process so far (all its threads)."""
    fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def driver_argv(*args):
    return ["ip", "netns", "exec", sp.NS["m"], "taskset", "-c", DRIVER_CPU, "/usr/bin/python3", openflow.DRIVER,
            *args]


def install_hosts():
    got = openflow.driver("hosts", str(PORT), FIRST_HOST, str(HOSTS))
    if got["errors"] or got["flows"] != HOSTS:
        raise RuntimeError(f"host rules not installed: {got}")


def wirespeed_up(tmp, extra):
    """wirespeed switch as bench/openflow.py starts it, poll-mode thread on the switch CPU; its pid."""
    return openflow.wirespeed_up(tmp, ["--openflow", f"ptcp:{PORT}", "--pmd-cpus", sp.SWITCH_CPU, *extra]).pid


def ovs_up(_tmp, _extra):
    """ovs-vswitchd as bench/openflow.py starts it (its own ptcp:, OpenFlow 1.3); its pid."""
    openflow.ovs_up()
    return int(open(os.path.join(sp.OVS_DIR, "ovs-vswitchd.pid")).read())


def load(seconds):
    return [WS, "gen", "--engine", "kernel", "--port", f"xdp:{sp.IF['a']}", "--flows", str(HOSTS),
            "--src-port", "65535", "--src-ip", FIRST_HOST, "--dst-ip", "10.9.0.2", "--size", "64",
            "--duration", str(seconds), "--quiet"]


def measure(label, up, down, extra, rate, tmp):
    """One run: Mpps at the sink while the controller makes `rate` changes a second."""
    def run():
        paths = {n: os.path.join(tmp, n) for n in ("sink", "load", "churn")}
        try:
            pid = up(tmp, extra)
            install_hosts()
            with open(paths["sink"], "w") as sout, open(paths["load"], "w") as lout, \
                    open(paths["churn"], "w") as cout:
                gen = spawn(sp.NS["a"], sp.GEN_CPU, load(DURATION + 5), lout)
                # Every host's first packet has made its megaflow (and kernel entry).
                time.sleep(2)
                if gen.poll() is not None:
                    raise RuntimeError(f"load exited: {open(paths['load']).read()[-300:]}")
                before = cpu_seconds(pid)
                churn = None
                if rate:
                    host = FIRST_HOST if CHANGE == "touch" else OUTSIDE_HOST
                    churn = subprocess.Popen(driver_argv("churn", str(PORT), str(rate), str(DURATION),
                                                         host, CHANGE),
                                             stdout=cout, stderr=subprocess.STDOUT)
                sink = spawn(sp.NS["b"], sp.SINK_CPU, [WS, "bench", "xdpdrop", "--port", f"xdp:{sp.IF['b']}",
                                                        "--duration", str(DURATION), "--quiet", "--json"], sout)
                sink.wait(DURATION + 30)
                cpu = cpu_seconds(pid) - before
                changes = {}
                if churn:
                    churn.wait(DURATION + 60)
                    changes = ws_json(paths["churn"])
                    if changes["errors"]:
                        raise RuntimeError(f"the switch refused changes: {changes}")
            mpps = ws_json(paths["sink"])["mpps"]
        finally:
            stop_all()
            down()
        EXTRA.setdefault(label, []).append({"cpu_s": round(cpu, 2), **changes})
        log(f"{label}: {mpps:.3f} Mpps, CPU {cpu:.2f} s, changes {changes}")
        return mpps, None
    return run


def main():
    if sys.argv[1:2] == ["--from"]:
        saved = json.load(open(sys.argv[2]))
        results = saved["results"]
        if sys.argv[3:4] == ["--before"]:
            commit = sys.argv[5]
            results += [{**r, "switch": f"{r['switch']}, before {commit}"}
                        for r in json.load(open(sys.argv[4]))["results"]]
        write(results, saved["date"], saved["host"], saved.get("change", "rule"))
        return
    if CHANGE not in CHANGES:
        sys.exit(f"bench-churn-peers: CHANGE={CHANGE}: not rule, group or touch")
    if os.geteuid() != 0:
        sys.exit("bench-churn-peers: needs root (namespaces, XDP): try sudo make bench-churn-peers")
    for tool in ("ovs-vsctl", "ovs-vswitchd", "taskset"):
        if subprocess.run(["which", tool], capture_output=True).returncode != 0:
            sys.exit(f"bench-churn-peers: {tool} is not installed (make bench-churn-peers installs it)")
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    log(f"load average {open('/proc/loadavg').read().split()[0]} (numbers are noisy when it is above 0.5)")
    switches = [("wirespeed switch", wirespeed_up, stop_all, []),
                ("wirespeed switch --offload", wirespeed_up, stop_all, ["--offload"]),
                ("Open vSwitch netdev", ovs_up, sp.ovs_stop, [])]
    switches = [s for s in switches if ONLY.search(s[0])]
    results = []
    try:
        sp.setup()
        for ns in sp.NS.values():
            sp.sh("ip", "-n", ns, "link", "set", "lo", "up")
        with tempfile.TemporaryDirectory(prefix="wirespeed-churn.") as tmp:
            cases = [(f"{name} at {rate:g}/s", measure(f"{name} at {rate:g}/s", up, down, extra, rate, tmp))
                     for name, up, down, extra in switches for rate in RATES]
            rows = interleaved(cases, RUNS, log)
            for (label, _), row, (name, rate) in zip(cases, rows, [(s[0], r) for s in switches for r in RATES]):
                results.append({"switch": name, "rate": rate, **row, "runs_extra": EXTRA.get(label, [])})
    finally:
        sp.cleanup()
    write(results)


def median_of(extra, key):
    values = [e[key] for e in extra if e.get(key) is not None]
    return statistics.median(values) if values else None


def write(results, date=None, host=None, change=CHANGE):
    title, what, name, doc = CHANGES[change]
    if date is None:
        date = datetime.date.today().isoformat()
        host = machine(switch=sp.SWITCH_CPU, driver=DRIVER_CPU, generator=sp.GEN_CPU)
        os.makedirs(os.path.join(ROOT, "bench", "results"), exist_ok=True)
        with open(os.path.join(ROOT, "bench", "results", f"{date}-{name}.json"), "w") as f:
            json.dump({"date": date, "host": host, "runs": RUNS, "duration_s": DURATION, "hosts": HOSTS,
                       "change": change, "results": results}, f, indent=1)
    ovs = {r["rate"]: r.get("median") for r in results if r["switch"] == "Open vSwitch netdev"}
    fmt = lambda v, spec: format(v, spec) if v is not None else "n/a"
    made_by = "make bench-churn-peers" if change == "rule" else f"CHANGE={change} make bench-churn-peers"
    lines = [f"# {title} under traffic: wirespeed switch against Open vSwitch ({date})", "",
             f"{host['cpu']}, {host['cpus']} CPUs, Linux {host['kernel']}. Made by `{made_by}` "
             "(bench/churn_peers.py; its header says the set-up). Generator on CPU 0, each switch's poll-mode "
             f"thread on CPU {sp.SWITCH_CPU}, its other threads not pinned, the OpenFlow driver on CPU "
             f"{DRIVER_CPU}. {HOSTS:,} host rules (`ip,nw_src=HOST,actions=output:2`), one 64-byte UDP flow "
             f"from each host; the controller {what} RATE "
             f"times a second, each change followed by a BARRIER. Mpps at the sink: median (min-max) of "
             f"{RUNS} interleaved runs of {DURATION:g} s. CPU: the switch process's user and system seconds "
             "over the window (median), every thread: a poll-mode thread busy all the time is 1 s a second. "
             "Changes made: how many a second the driver managed (each waits for the last one's barrier). "
             "A barrier's round trip: wirespeed answers once every cache and kernel entry the change could "
             "touch is revalidated; Open vSwitch answers once its tables changed, and its revalidators "
             "update the datapath's flows after." + (
                 " Rows marked \"before COMMIT\" are the build before that commit, measured the same way "
                 "in a pass of their own on the same host the same day (its results file is beside "
                 "this run's)."
                 if any(", before " in r["switch"] for r in results) else ""),
             "", "| switch | changes/s asked | made | Mpps | / Open vSwitch | CPU s | barrier µs, median / p99 |",
             "| --- | --- | --- | --- | --- | --- | --- |"]
    for r in results:
        fig = f"{r['median']:.3f} ({r['min']:.3f}-{r['max']:.3f})" if r.get("median") is not None else \
            f"failed: {r['error']}"
        peer = ovs.get(r["rate"])
        ratio = f"{r['median'] / peer:.2f}x" if peer and r.get("median") and r["switch"] != "Open vSwitch netdev" \
            else ""
        extra = r["runs_extra"]
        barrier = "" if not r["rate"] else \
            f"{fmt(median_of(extra, 'median_us'), '.0f')} / {fmt(median_of(extra, 'p99_us'), '.0f')}"
        made = [e["changes"] / e["seconds"] for e in extra if e.get("seconds")]
        made = f"{statistics.median(made):.0f}" if made else ""
        lines.append(f"| {r['switch']} | {r['rate']:g} | {made} | {fig} | {ratio} | "
                     f"{fmt(median_of(extra, 'cpu_s'), '.1f')} | {barrier} |")
    lines.append("")
    with open(os.path.join(ROOT, "bench", doc), "w") as f:
        f.write("\n".join(lines))


if __name__ == "__main__":
    main()
