#!/usr/bin/python3
"""make bench-openflow: wirespeed switch's OpenFlow side against Open vSwitch's
(ovs-vswitchd, userspace datapath datapath_type=netdev with afxdp ports, its own ptcp:),
driven by the same controller, bench/openflow_driver.py, in the same run and set-up
(bench/switch_peers.py's namespaces: generator in A on CPU 0, the switch in M, an XDP drop
counter in B). Each switch's poll-mode thread is on CPU 1 (Open vSwitch's pmd-cpu-mask,
wirespeed's --pmd-cpus); the threads that answer OpenFlow are not pinned (Open vSwitch's pmd
polls without pause, so its main thread pinned beside it would starve); the driver is on
CPU 0.

- Flow setup rate: 100,000 FLOW_MODs (exact udp/ipv4_dst matches, output:2), a BARRIER after
  every 1,000, waited for: FLOW_MODs a second, and the flow count read back (goal: >= 1.5x
  Open vSwitch).
- PACKET_IN round trip: the first packet of each of 200 new flows, sent into port 1 from A,
  comes up as a PACKET_IN; the driver answers with the FLOW_MOD and a BARRIER: median
  microseconds from the packet to the PACKET_IN, and to the barrier's reply (flow in effect).
- Forwarding with 10,000 OpenFlow flows across three tables against the same flows added
  with --flows (ctl): Mpps at the sink, 100,000-flow load, RUNS interleaved runs
  (goal: within 10 %).

Writes bench/results/<date>-openflow.json and bench/OPENFLOW.md. Environment: RUNS (3),
DURATION (10), FLOWS (100000), SAMPLES (200).
"""

import datetime
import json
import os
import signal
import subprocess
import sys
import tempfile
import time

import switch_peers as sp
from benchlib import interleaved, machine, spawn, stop_all, wait_for

ROOT = sp.ROOT
WS = sp.WS
DRIVER = os.path.join(ROOT, "bench", "openflow_driver.py")
RUNS = int(os.environ.get("RUNS", "3"))
FLOWS = int(os.environ.get("FLOWS", "100000"))
SAMPLES = int(os.environ.get("SAMPLES", "200"))
PORT = 6653
DRIVER_CPU = "0"


def log(msg):
    print(f"bench-openflow: {msg}", file=sys.stderr, flush=True)


def driver(*args):
    """The driver in M, on its CPU: its JSON line."""
    r = subprocess.run(["ip", "netns", "exec", sp.NS["m"], "taskset", "-c", DRIVER_CPU, "/usr/bin/python3", DRIVER,
                        *args], capture_output=True, text=True, timeout=300)
    if r.returncode != 0:
        raise RuntimeError(f"driver {args[0]}: {r.stderr.strip()[-400:]}")
    return json.loads(r.stdout.strip().splitlines()[-1])


def wirespeed_up(tmp, extra=()):
    out = open(os.path.join(tmp, "switch.out"), "w")
    argv = [WS, "switch", "--port", f"1=xdp:{sp.IF['m0']}", "--port", f"2=xdp:{sp.IF['m1']}", "--ctl",
            os.path.join(tmp, "ctl.sock"), *extra]
    w = spawn(sp.NS["m"], None, argv, out)
    wait_for(out.name, r" ready", w)
    return w


def ovs_up():
    sp.ovs_start()
    vsctl = ["ovs-vsctl", f"--db=unix:{sp.OVS_DIR}/db.sock"]
    sp.inm(*vsctl, "set", "bridge", "br0", "protocols=OpenFlow13", env=sp.ovs_env())
    sp.inm(*vsctl, "set-controller", "br0", f"ptcp:{PORT}:127.0.0.1", env=sp.ovs_env())
    time.sleep(1)


def per_switch(tmp):
    """Setup rate and PACKET_IN round trip, each switch in turn."""
    rows = []
    ours = ["--openflow", f"ptcp:{PORT}", "--pmd-cpus", sp.SWITCH_CPU]
    for name, up, down in (("wirespeed switch", lambda: wirespeed_up(tmp, ours), stop_all),
                           ("Open vSwitch netdev", ovs_up, sp.ovs_stop)):
        for run in range(RUNS):
            up()
            row = {"tool": name, "run": run + 1}
            try:
                for test, args in (("setup", ["setup", str(PORT), str(FLOWS), "1000"]),
                                   ("rtt", ["rtt", str(PORT), str(SAMPLES), sp.NS["a"], sp.IF["a"]])):
                    try:
                        row.update({f"{test}_{k}": v for k, v in driver(*args).items()})
                    except Exception as e:
                        row[f"{test}_error"] = str(e)[:300]
                        log(f"{name} run {run + 1} {test} FAILED: {e}")
                log(f"{name} run {run + 1}: {row}")
            finally:
                down()
            rows.append(row)
    return rows


def three_tables(tmp):
    """10,000 flows over tables 0-2, as the driver's lines and as ovs-ofctl flows."""
    lines, flows = [], []
    per_table = 3333
    for table in range(3):
        for i in range(per_table if table < 2 else 10000 - 3 - 2 * per_table):
            dst, port = f"10.{200 + table}.{i // 256 % 256}.{i % 256}", 1000 + i % 5000
            lines.append(f"{table} 100 decoy {dst} {port}")
            flows.append(f"table={table},priority=100,udp,nw_dst={dst},tp_dst={port},actions=drop")
        if table < 2:
            lines.append(f"{table} 1 goto {table + 1}")
            flows.append(f"table={table},priority=1,in_port=1,actions=goto_table:{table + 1}")
        else:
            lines.append(f"{table} 1 output 2")
            flows.append(f"table={table},priority=1,in_port=1,actions=output:2")
    driver_file, ctl_file = os.path.join(tmp, "of-flows.txt"), os.path.join(tmp, "ctl-flows.txt")
    open(driver_file, "w").write("\n".join(lines) + "\n")
    open(ctl_file, "w").write("\n".join(flows) + "\n")
    assert len(flows) == 10000
    return driver_file, ctl_file


def forwarding(tmp):
    driver_file, ctl_file = three_tables(tmp)
    base = [WS, "switch", "--port", f"1=xdp:{sp.IF['m0']}", "--port", f"2=xdp:{sp.IF['m1']}", "--ctl",
            os.path.join(tmp, "ctl.sock"), "--pmd-cpus", sp.SWITCH_CPU]

    def run(extra, after_ready):
        def measure():
            switch = [*base, *extra]
            mpps = sp.measure(64, lambda: None, lambda: None, switch, sp.flows_load, tmp,
                              after_ready=after_ready)
            return mpps, None
        return measure

    def load_openflow():
        got = driver("flows", str(PORT), driver_file)
        if got["errors"] or got["flows"] != 10001:  # and the default rule
            raise RuntimeError(f"OpenFlow flows not installed: {got}")

    cases = [("OpenFlow flows", run(["--openflow", f"ptcp:{PORT}"], load_openflow)),
             ("ctl flows", run(["--flows", ctl_file], None))]
    return [{"case": label, **row} for (label, _), row in zip(cases, interleaved(cases, RUNS, log))]


def main():
    if os.geteuid() != 0:
        sys.exit("bench-openflow: needs root (namespaces, XDP): try sudo make bench-openflow")
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    log(f"load average {open('/proc/loadavg').read().split()[0]} (numbers are noisy when it is above 0.5)")
    try:
        sp.setup()
        for ns in sp.NS.values():
            sp.sh("ip", "-n", ns, "link", "set", "lo", "up")
        with tempfile.TemporaryDirectory(prefix="wirespeed-openflow.") as tmp:
            per = per_switch(tmp)
            fwd = forwarding(tmp)
    finally:
        sp.cleanup()
    write(per, fwd)


def median(rows, tool, key):
    values = sorted(r[key] for r in rows if r["tool"] == tool and key in r)
    return values[len(values) // 2] if values else None


def write(per, fwd):
    date = datetime.date.today().isoformat()
    host = machine(switch=sp.SWITCH_CPU, driver=DRIVER_CPU, generator=sp.GEN_CPU)
    os.makedirs(os.path.join(ROOT, "bench", "results"), exist_ok=True)
    with open(os.path.join(ROOT, "bench", "results", f"{date}-openflow.json"), "w") as f:
        json.dump({"date": date, "host": host, "runs": RUNS, "flows": FLOWS, "samples": SAMPLES,
                   "per_switch": per, "forwarding": fwd}, f, indent=1)
    ws, ovs = "wirespeed switch", "Open vSwitch netdev"
    fmt = lambda v, spec: format(v, spec) if v is not None else "failed"
    lines = [f"# OpenFlow: wirespeed switch against Open vSwitch ({date})", "",
             f"{host['cpu']}, {host['cpus']} CPUs, Linux {host['kernel']}. Each switch's poll-mode thread on CPU "
             f"{sp.SWITCH_CPU}, the threads that answer OpenFlow not pinned, the driver "
             f"(bench/openflow_driver.py, the same for both) on CPU {DRIVER_CPU}. "
             f"Median of {RUNS} runs. Made by `make bench-openflow` (bench/openflow.py).", "",
             "| switch | FLOW_MODs/s (100,000, barrier every 1,000) | packet to PACKET_IN (us) | "
             "packet to FLOW_MOD in effect (us) |", "| --- | --- | --- | --- |"]
    for tool in (ws, ovs):
        lines.append(f"| {tool} | {fmt(median(per, tool, 'setup_flow_mods_per_s'), '.0f')} | "
                     f"{fmt(median(per, tool, 'rtt_packet_in_us'), '.0f')} | "
                     f"{fmt(median(per, tool, 'rtt_flow_in_effect_us'), '.0f')} |")
    rate = lambda a, b: f"{a / b:.2f}x" if a and b else "n/a"
    of, ctl = (next((r.get("median") for r in fwd if r["case"] == c), None) for c in ("OpenFlow flows", "ctl flows"))
    lines += ["", "Forwarding, 64-byte frames, 100,000 flows, 10,000 rules over tables 0-2 (Mpps at the sink, "
              "median (min-max)):", "", "| flows added by | Mpps |", "| --- | --- |"]
    for r in fwd:
        fig = f"{r['median']:.3f} ({r['min']:.3f}-{r['max']:.3f})" if r.get("median") is not None else \
            f"failed: {r['error']}"
        lines.append(f"| {r['case']} | {fig} |")
    lines += ["", "Goals:", "",
              f"- setup rate, wirespeed / Open vSwitch (goal >= 1.5x): "
              f"{rate(median(per, ws, 'setup_flow_mods_per_s'), median(per, ovs, 'setup_flow_mods_per_s'))}",
              f"- forwarding, OpenFlow flows / ctl flows (goal within 10 %): {rate(of, ctl)}", ""]
    with open(os.path.join(ROOT, "bench", "OPENFLOW.md"), "w") as f:
        f.write("\n".join(lines))


if __name__ == "__main__":
    main()
