#!/usr/bin/python3
"""make bench-switch: wirespeed switch against the Linux bridge, tc mirred and Open vSwitch.

Three namespaces in a row, made here and removed on every exit: the generator in A (CPU 0),
the switch under test in M (CPU 1), an XDP drop counter in B (the sink; its process only
reads counters). One rule `in_port=1,actions=output:2` (or the peer's equivalent), and again
with 10,000 rules that the traffic must be looked up past and 100,000 flows. Loads: the
kernel engine (one flow, the fastest load) for the 1-rule case; `wirespeed gen --engine
kernel --flows 100000` (the kernel engine's XDP program varies each frame's source port and
address) for the 100,000-flow cases. Peers: `wirespeed bench l2fwd --peer-port` (our own two-port forwarder, the reference
the switch is held to), the Linux bridge, tc mirred (u32 match-all redirect), Open vSwitch's
userspace datapath with afxdp ports (pmd on CPU 1). wirespeed switch runs twice: user space
only, and with --offload (flows forwarded by its XDP program after their first packets). Open vSwitch's kernel datapath
(type=system) needs the openvswitch module, which this kernel lacks: reported as such.
For wirespeed's rows it also reads the process's user-space CPU time over the measured window
(/proc/PID/stat; perf has no cycle counters on this VM) and turns it into cycles per packet
at /proc/cpuinfo's clock; the datapath's stages (parse, cache lookup, actions) are timed
without I/O by the `stages` example of crates/switch, and I/O is what is left.
Writes bench/results/<date>-switch.json and bench/SWITCH.md.
Runs are interleaved (every row once, then again). Environment: RUNS (3), DURATION (10),
SIZES ("64 1500"), ONLY (regex of row names).
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

from benchlib import cpu_mhz, interleaved, sh, spawn, stop_all, three_in_a_row, wait_for, ws_json

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
WS = os.path.join(ROOT, "target", "release", "wirespeed")
RUNS = int(os.environ.get("RUNS", "3"))
DURATION = float(os.environ.get("DURATION", "10"))
SIZES = [int(s) for s in os.environ.get("SIZES", "64 1500").split()]
ONLY = re.compile(os.environ.get("ONLY", "."))
GEN_CPU, SWITCH_CPU, SINK_CPU = "0", "1", "0"
P = f"wss{os.getpid() % 100000}"
NS = {"a": P + "a", "m": P + "m", "b": P + "b"}
IF = {"a": P + "a0", "m0": P + "m0", "m1": P + "m1", "b": P + "b0"}
OVS_DIR = None
OFFLOAD = "wirespeed switch --offload"
STAGES = os.path.join(ROOT, "target", "release", "examples", "stages")
# User-space seconds of the switch process over the last measured window.
LAST_USER_S = []


def user_seconds(pid):
    """User-space CPU seconds of a process so far (all its threads)."""
    fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return int(fields[11]) / os.sysconf("SC_CLK_TCK")



def log(msg):
    print(f"bench-switch: {msg}", file=sys.stderr, flush=True)



def inm(*argv, **kw):
    return sh("ip", "netns", "exec", NS["m"], *argv, **kw)


def setup():
    three_in_a_row(NS, IF)



def cleanup():
    stop_all()
    ovs_stop()
    for ns in NS.values():
        sh("ip", "netns", "del", ns, check=False)



def ovs_env():
    env = dict(os.environ)
    for k in ("OVS_RUNDIR", "OVS_DBDIR", "OVS_LOGDIR", "OVS_SYSCONFDIR"):
        env[k] = OVS_DIR
    return env


def ovs_start():
    """ovsdb-server and ovs-vswitchd of our own, inside M, with a private run directory."""
    global OVS_DIR
    OVS_DIR = tempfile.mkdtemp(prefix="wirespeed-ovs.")
    inm("/usr/share/openvswitch/scripts/ovs-ctl", "--no-monitor", "--system-id=random", "start", env=ovs_env())
    vsctl = ["ovs-vsctl", f"--db=unix:{OVS_DIR}/db.sock"]
    inm(*vsctl, "set", "Open_vSwitch", ".", f"other_config:pmd-cpu-mask={1 << int(SWITCH_CPU):#x}", env=ovs_env())
    inm(*vsctl, "add-br", "br0", "--", "set", "bridge", "br0", "datapath_type=netdev", env=ovs_env())
    for n, dev in ((1, IF["m0"]), (2, IF["m1"])):
        inm(*vsctl, "add-port", "br0", dev, "--", "set", "interface", dev, "type=afxdp",
            f"ofport_request={n}", env=ovs_env())
    time.sleep(2)


def ovs_stop():
    global OVS_DIR
    if OVS_DIR:
        inm("/usr/share/openvswitch/scripts/ovs-ctl", "stop", env=ovs_env(), check=False)
        inm("ip", "link", "del", "br0", check=False)  # the bridge's internal device stays otherwise
        sh("rm", "-rf", OVS_DIR, check=False)
        OVS_DIR = None


def rules_file(tmp, many):
    """One forwarding rule, under `many - 1` higher-priority rules the traffic misses."""
    path = os.path.join(tmp, f"rules-{many}.txt")
    with open(path, "w") as f:
        for i in range(many - 1):
            f.write(f"priority={100 + i % 1000},udp,nw_dst=10.{200 + i // 65536 % 50}.{i // 256 % 256}.{i % 256},"
                    f"tp_dst={1000 + i % 5000},actions=drop\n")
        f.write("priority=1,in_port=1,actions=output:2\n")
    return path


def measure(size, setup_fn, teardown_fn, switch_argv, load, tmp, after_ready=None):
    """Mpps arriving at B while `load` runs from A through what setup_fn/switch_argv built
    (after_ready: run once the switch is ready, before the load starts)."""
    spath, wpath, lpath = (os.path.join(tmp, n) for n in ("sink", "switch", "load"))
    setup_fn()
    try:
        with open(spath, "w") as sout, open(wpath, "w") as wout, open(lpath, "w") as lout:
            if switch_argv:
                w = spawn(NS["m"], SWITCH_CPU, switch_argv, wout)
                wait_for(wpath, r" ready", w)
                if after_ready:
                    after_ready()
            gen = spawn(NS["a"], GEN_CPU, load(size, DURATION + 4), lout)
            time.sleep(2)
            if gen.poll() is not None:
                raise RuntimeError(f"load exited: {open(lpath).read()[-300:]}")
            user_before = user_seconds(w.pid) if switch_argv else None
            sink = spawn(NS["b"], SINK_CPU, [WS, "bench", "xdpdrop", "--port", f"xdp:{IF['b']}", "--duration",
                                            str(DURATION), "--quiet", "--json"], sout)
            sink.wait(DURATION + 30)
            if switch_argv:
                LAST_USER_S.append(user_seconds(w.pid) - user_before)
            mpps = ws_json(spath)["mpps"]
    finally:
        stop_all()
        teardown_fn()
    return mpps


def kernel_load(size, seconds):
    return [WS, "bench", "txpush", "--engine", "kernel", "--port", f"xdp:{IF['a']}", "--size", str(size),
            "--duration", str(seconds), "--quiet"]


def flows_load(size, seconds):
    return [WS, "gen", "--engine", "kernel", "--port", f"xdp:{IF['a']}", "--flows", "100000", "--size", str(size),
            "--duration", str(seconds), "--quiet"]


def rows(tmp):
    nothing = lambda: None
    ws_switch = lambda many, *extra: [WS, "switch", "--port", f"1=xdp:{IF['m0']}", "--port", f"2=xdp:{IF['m1']}",
                                      "--flows", rules_file(tmp, many), "--ctl", os.path.join(tmp, "ctl.sock"),
                                      "--pmd-cpus", SWITCH_CPU, *extra]
    l2fwd = [WS, "bench", "l2fwd", "--port", f"xdp:{IF['m0']}", "--peer-port", f"xdp:{IF['m1']}", "--duration",
             str(DURATION + 10), "--quiet"]

    # Not "br0": Open vSwitch's bridge leaves an internal device of that name behind.
    def bridge_up():
        inm("ip", "link", "add", "wsbr0", "type", "bridge")
        for dev in (IF["m0"], IF["m1"]):
            inm("ip", "link", "set", dev, "master", "wsbr0")
        inm("ip", "link", "set", "wsbr0", "up")

    def bridge_down():
        inm("ip", "link", "del", "wsbr0", check=False)

    def mirred_up():
        inm("tc", "qdisc", "add", "dev", IF["m0"], "ingress")
        inm("tc", "filter", "add", "dev", IF["m0"], "ingress", "protocol", "all", "u32", "match", "u32", "0", "0",
            "action", "mirred", "egress", "redirect", "dev", IF["m1"])

    def mirred_down():
        inm("tc", "qdisc", "del", "dev", IF["m0"], "ingress", check=False)

    def ovs_up():
        ovs_start()
        inm("ovs-ofctl", "del-flows", "br0", env=ovs_env())
        inm("ovs-ofctl", "add-flow", "br0", "in_port=1,actions=output:2", env=ovs_env())

    def ovs_many_up():
        ovs_start()
        inm("ovs-ofctl", "del-flows", "br0", env=ovs_env())
        inm("ovs-ofctl", "add-flows", "br0", rules_file(tmp, 10000), env=ovs_env())

    return [
        ("1 rule", "wirespeed switch", nothing, nothing, lambda: ws_switch(1), kernel_load),
        ("1 rule", OFFLOAD, nothing, nothing, lambda: ws_switch(1, "--offload"), kernel_load),
        ("1 rule", "wirespeed l2fwd --peer-port", nothing, nothing, lambda: l2fwd, kernel_load),
        ("1 rule", "Linux bridge", bridge_up, bridge_down, lambda: None, kernel_load),
        ("1 rule", "tc mirred", mirred_up, mirred_down, lambda: None, kernel_load),
        ("1 rule", "Open vSwitch afxdp", ovs_up, ovs_stop, lambda: None, kernel_load),
        ("1 rule, 100k flows", "wirespeed switch", nothing, nothing, lambda: ws_switch(1), flows_load),
        ("1 rule, 100k flows", OFFLOAD, nothing, nothing, lambda: ws_switch(1, "--offload"), flows_load),
        ("10k rules, 100k flows", "wirespeed switch", nothing, nothing, lambda: ws_switch(10000), flows_load),
        ("10k rules, 100k flows", OFFLOAD, nothing, nothing, lambda: ws_switch(10000, "--offload"), flows_load),
        ("10k rules, 100k flows", "Open vSwitch afxdp", ovs_many_up, ovs_stop, lambda: None, flows_load),
        ("10k rules, 100k flows", "wirespeed l2fwd --peer-port", nothing, nothing, lambda: l2fwd, flows_load),
    ]


def measured(size, up, down, argv, load, tmp):
    """One measurement: Mpps at the sink, and the wirespeed process's user cycles per packet."""
    def run():
        LAST_USER_S.clear()
        mpps = measure(size, up, down, argv(), load, tmp)
        mhz = cpu_mhz()
        cycles = LAST_USER_S[0] * mhz * 1e6 / (mpps * 1e6 * DURATION) if LAST_USER_S and mpps > 0 and mhz else None
        return mpps, cycles
    return run


def main():
    if os.geteuid() != 0:
        sys.exit("bench-switch: needs root (namespaces, XDP): try sudo make bench-switch")
    for tool in ("ovs-vsctl", "ovs-vswitchd", "tc", "taskset"):
        if subprocess.run(["which", tool], capture_output=True).returncode != 0:
            sys.exit(f"bench-switch: {tool} is not installed (make bench-switch installs it)")
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    log(f"load average {open('/proc/loadavg').read().split()[0]} (numbers are noisy when it is above 0.5)")
    results = []
    try:
        setup()
        with tempfile.TemporaryDirectory(prefix="wirespeed-switch.") as tmp:
            for size in SIZES:
                chosen = [r for r in rows(tmp) if ONLY.search(f"{r[0]} {r[1]}")]
                cases = [(f"{size:>5} {c:<22} {t:<28}", measured(size, up, down, argv, load, tmp))
                         for c, t, up, down, argv, load in chosen]
                for (case, tool, *_), row in zip(chosen, interleaved(cases, RUNS, log)):
                    results.append({"case": case, "tool": tool, "size": size, **row})
    finally:
        cleanup()
    write(results, stages())


def stages():
    """The datapath's stages without I/O, per frame size and case, on the switch's CPU."""
    out = []
    if not os.path.exists(STAGES):
        log(f"{STAGES} missing (cargo build --release -p wirespeed-switch --example stages): no stage table")
        return out
    for size in SIZES:
        for case, rules, flows in (("1 rule", 1, 1), ("1 rule, 100k flows", 1, 100000),
                                   ("10k rules, 100k flows", 10000, 100000)):
            r = subprocess.run(["taskset", "-c", SWITCH_CPU, STAGES, "--rules", str(rules), "--flows", str(flows),
                                "--size", str(size)], capture_output=True, text=True)
            if r.returncode == 0:
                row = json.loads(r.stdout)
                mhz = cpu_mhz()
                row["cycles_per_packet"] = {k: v * mhz / 1e3 for k, v in row["ns_per_packet"].items()} if mhz else None
                out.append({"size": size, "case": case, **row})
            else:
                log(f"stages {case} {size}: {r.stderr.strip()[-200:]}")
    return out


def write(results, stage_rows):
    date = datetime.date.today().isoformat()
    os.makedirs(os.path.join(ROOT, "bench", "results"), exist_ok=True)
    # A partial run (some SIZES, or ONLY some rows) keeps today's other rows.
    path = os.path.join(ROOT, "bench", "results", f"{date}-switch.json")
    if os.path.exists(path):
        new = {(r["size"], r["case"], r["tool"]) for r in results}
        kept = [r for r in json.load(open(path))["results"] if (r["size"], r["case"], r["tool"]) not in new]
        order = {(c, t): i for i, (c, t, *_) in enumerate(rows("/"))}
        results = sorted(kept + results, key=lambda r: (r["size"], order.get((r["case"], r["tool"]), 99)))
    sizes = sorted({r["size"] for r in results})
    with open(path, "w") as f:
        json.dump({"date": date, "kernel": os.uname().release, "runs": RUNS, "duration_s": DURATION,
                   "cpus": {"generator": GEN_CPU, "switch": SWITCH_CPU, "sink": SINK_CPU}, "results": results,
                   "stages": stage_rows}, f, indent=1)
    get = lambda size, case, tool: next((r.get("median") for r in results
                                         if r["size"] == size and r["case"] == case and r["tool"] == tool), None)
    lines = [f"# wirespeed switch against its peers ({date})", "",
             f"Mpps arriving at the sink, median of {RUNS} interleaved runs of {DURATION:g} s (min-max). Generator on CPU "
             f"{GEN_CPU}, switch on CPU {SWITCH_CPU} (the Linux bridge and tc mirred run in the kernel on the "
             "sending CPU: pinning does not apply to them, nor to the packets wirespeed switch --offload forwards in "
             "its XDP program). Open vSwitch's kernel datapath (type=system) needs "
             "the openvswitch module, which this kernel does not have. Made by `make bench-switch` "
             "(bench/switch_peers.py). User cycles/packet: the wirespeed process's user-space CPU time "
             "over the window (/proc/PID/stat) per packet that reached the sink, at /proc/cpuinfo's clock "
             "(perf has no cycle counters on this VM); it counts polling an empty ring too.", ""]
    for size in sizes:
        lines += [f"## {size}-byte frames", "", "| case | tool | Mpps | user cycles/packet |", "| --- | --- | --- | --- |"]
        for r in (r for r in results if r["size"] == size):
            fig = f"{r['median']:.3f} ({r['min']:.3f}-{r['max']:.3f})" if r.get("median") is not None else f"failed: {r['error']}"
            cyc = f"{r['user_cycles_per_packet']:.0f}" if r.get("user_cycles_per_packet") is not None else ""
            lines.append(f"| {r['case']} | {r['tool']} | {fig} | {cyc} |")
        staged = [st for st in stage_rows if st["size"] == size]
        if staged:
            lines += ["", "Where wirespeed switch's user-space cycles per packet go: parse, cache lookup and "
                      "actions timed without I/O (crates/switch/examples/stages.rs, same rules and flows, "
                      "warm caches, the fastest of 5 rounds); I/O and polling is the measured total above less those.", "",
                      "| case | parse | lookup | actions | I/O and polling | total (measured) |",
                      "| --- | --- | --- | --- | --- | --- |"]
            for st in (st for st in staged if st.get("cycles_per_packet")):
                c = st["cycles_per_packet"]
                total = next((r.get("user_cycles_per_packet") for r in results if r["size"] == size
                              and r["case"] == st["case"] and r["tool"] == "wirespeed switch"), None)
                io = f"{total - c['total']:.0f}" if total is not None else "n/a"
                lines.append(f"| {st['case']} | {c['parse']:.0f} | {c['lookup']:.0f} | {c['actions']:.0f} | {io} | "
                             f"{total if total is not None else 'n/a'} |")
        lines += ["", "Goals:", ""]
        sw1, ovs1 = get(size, "1 rule", "wirespeed switch"), get(size, "1 rule", "Open vSwitch afxdp")
        l2 = get(size, "1 rule", "wirespeed l2fwd --peer-port")
        swk, ovsk = get(size, "10k rules, 100k flows", "wirespeed switch"), get(size, "10k rules, 100k flows", "Open vSwitch afxdp")
        swf = get(size, "1 rule, 100k flows", "wirespeed switch")
        ratio = lambda a, b: f"{a / b:.2f}x" if a and b else "n/a"
        of1, ofk, off = (get(size, c, OFFLOAD) for c in ("1 rule", "10k rules, 100k flows", "1 rule, 100k flows"))
        lines += ["User space only (every packet through the poll-mode thread):", "",
                  f"- switch / OVS afxdp, 1 rule (goal >= 1.25x): {ratio(sw1, ovs1)}",
                  f"- switch / OVS afxdp, 10k rules (goal >= 1.25x): {ratio(swk, ovsk)}",
                  f"- switch / our l2fwd --peer-port (goal >= 0.85x): {ratio(sw1, l2)}",
                  f"- switch 10k rules / 1 rule, both with 100k flows (goal >= 0.6x): {ratio(swk, swf)}",
                  f"- switch 10k rules with 100k flows / 1 rule with one flow (goal >= 0.6x): {ratio(swk, sw1)}", "",
                  "With --offload (each flow's first packets through the poll-mode thread, the rest "
                  "forwarded by the XDP program on the sending CPU, like the Linux bridge and tc mirred):", "",
                  f"- switch --offload / OVS afxdp, 1 rule (goal >= 1.25x): {ratio(of1, ovs1)}",
                  f"- switch --offload / OVS afxdp, 10k rules (goal >= 1.25x): {ratio(ofk, ovsk)}",
                  f"- switch --offload / our l2fwd --peer-port (goal >= 0.85x): {ratio(of1, l2)}",
                  f"- switch --offload 10k rules / 1 rule, both with 100k flows (goal >= 0.6x): {ratio(ofk, off)}",
                  f"- switch --offload 10k rules with 100k flows / 1 rule with one flow (goal >= 0.6x): "
                  f"{ratio(ofk, of1)}",
                  f"- switch --offload / Linux bridge, 1 rule: {ratio(of1, get(size, '1 rule', 'Linux bridge'))}", ""]
    with open(os.path.join(ROOT, "bench", "SWITCH.md"), "w") as f:
        f.write("\n".join(lines))


if __name__ == "__main__":
    main()
