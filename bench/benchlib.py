"""What the bench scripts share: running commands, starting programs in
a namespace pinned to a CPU (each in a session of its own, so stopping one reaches every
process it forked: trafgen runs its workers as children), waiting for them, stopping them, and
reading wirespeed's JSON."""

import json
import os
import re
import signal
import statistics
import subprocess
import time

# Every process spawn() started and stop_all() has not stopped yet.
PROCS = []


def sh(*argv, check=True, env=None):
    r = subprocess.run(argv, capture_output=True, text=True, env=env)
    if check and r.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)}: {r.stderr.strip()[-300:]}")
    return r.stdout


def veth_pair(ns_a, if_a, ns_b, if_b):
    """Two new namespaces joined by a veth pair, both ends up, IPv6 off (no chatter)."""
    sh("ip", "netns", "add", ns_a)
    sh("ip", "netns", "add", ns_b)
    sh("ip", "link", "add", if_a, "netns", ns_a, "type", "veth", "peer", "name", if_b, "netns", ns_b)
    for ns, dev in ((ns_a, if_a), (ns_b, if_b)):
        sh("ip", "netns", "exec", ns, "sysctl", "-qw", "net.ipv6.conf.all.disable_ipv6=1")
        sh("ip", "-n", ns, "link", "set", dev, "up")


def three_in_a_row(ns, ifs, queues=1):
    """Three new namespaces in a row, ns["a"] - ns["m"] - ns["b"], joined by two veth pairs
    (ifs["a"]-ifs["m0"], ifs["m1"]-ifs["b"]) of `queues` queues each way, IPv6 off (no
    chatter), every end up with GRO on: NAPI, so frames sent with ndo_xdp_xmit (the kernel
    engine's, a redirect's) are taken."""
    for n in ns.values():
        sh("ip", "netns", "add", n)
        for scope in ("all", "default"):
            sh("ip", "netns", "exec", n, "sysctl", "-qw", f"net.ipv6.conf.{scope}.disable_ipv6=1")
    q = ("numrxqueues", str(queues), "numtxqueues", str(queues))
    for (near, near_if), (far, far_if) in ((("a", "a"), ("m", "m0")), (("m", "m1"), ("b", "b"))):
        sh("ip", "link", "add", ifs[near_if], *q, "netns", ns[near], "type", "veth", "peer", "name", ifs[far_if],
           *q, "netns", ns[far])
    for n, dev in (("a", "a"), ("m", "m0"), ("m", "m1"), ("b", "b")):
        sh("ip", "-n", ns[n], "link", "set", ifs[dev], "up")
        sh("ip", "netns", "exec", ns[n], "ethtool", "-K", ifs[dev], "gro", "on")


def returns_sink(ns, dev):
    """Makes `dev` (in `ns`) drop what it receives at the least cost to the sending CPU (on
    veth, the measured one): no NAPI (GRO off, no XDP program), so frames enter by netif_rx,
    and a tc filter (classic BPF "return TC_ACT_SHOT") drops them at ingress. Same as
    scripts/lib/measure.sh's ws_returns_sink."""
    run = ("ip", "netns", "exec", ns)
    sh(*run, "ethtool", "-K", dev, "gro", "off")
    sh(*run, "tc", "qdisc", "add", "dev", dev, "clsact")
    sh(*run, "tc", "filter", "add", "dev", dev, "ingress", "bpf", "da", "bytecode", "1,6 0 0 2")


def spawn(ns, cpu, argv, out):
    """Starts argv in namespace ns pinned to cpu, output to the file out."""
    return spawn_here(cpu, ["ip", "netns", "exec", ns, *argv], out)


def spawn_here(cpu, argv, out):
    """Starts argv in this namespace, pinned to cpu (None: it pins itself), output to the file
    out."""
    pin = ["taskset", "-c", cpu] if cpu is not None else []
    p = subprocess.Popen([*pin, *argv], stdout=out, stderr=subprocess.STDOUT,
                         stdin=subprocess.PIPE, text=True, start_new_session=True)
    # stdin stays open: testpmd without -i exits when it reads end of file.
    PROCS.append(p)
    return p


def wait_for(path, pattern, proc, timeout=30):
    """Waits until the output file of proc matches pattern; fails if proc exits first."""
    end = time.time() + timeout
    while time.time() < end:
        with open(path) as f:
            if re.search(pattern, f.read()):
                return
        if proc.poll() is not None:
            raise RuntimeError(f"exited before ready: {open(path).read()[-400:]}")
        time.sleep(0.05)
    raise RuntimeError(f"not ready after {timeout} s: {open(path).read()[-400:]}")


def stop(proc, sig=signal.SIGINT, timeout=15):
    """Signals the process's whole group, then kills what is left of it."""
    try:
        os.killpg(proc.pid, sig)
        proc.wait(timeout)
    except (ProcessLookupError, subprocess.TimeoutExpired):
        pass
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.wait()


def stop_all():
    """Ends whatever a measurement left running, so the next one starts clean."""
    while PROCS:
        stop(PROCS.pop(), signal.SIGTERM, timeout=5)


def ws_json(path):
    """The last JSON object a wirespeed command printed to the file path."""
    text = open(path).read()
    lines = [line for line in text.splitlines() if line.startswith("{")]
    if not lines:
        raise RuntimeError(text.strip().splitlines()[-1] if text.strip() else "no output")
    return json.loads(lines[-1])


def steady(mpps, who):
    """A receiving run's steady rate from its per-second rates (the same rule for every tool):
    the median second, without the first two (start, warm-up) and the last (partial)."""
    mpps = mpps[2:-1] if len(mpps) > 4 else mpps
    if not mpps:
        raise RuntimeError(f"{who} reported no per-second rate")
    return statistics.median(mpps)


def testpmd_pps(text, key):
    """testpmd's steady rate from its per-second statistics (`key`: Rx-pps or Tx-pps)."""
    samples = [int(v) / 1e6 for v in re.findall(rf"{key}:\s+(\d+)", text)]
    return steady(samples, f"testpmd ({key}: {text.strip()[-300:]})")


def machine(**cpus):
    """The machine a run was measured on, with which CPU ran what (`cpus`)."""
    model = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "?")
    return {"kernel": os.uname().release, "cpus": os.cpu_count(), "cpu": model, **cpus}


def table_cells(row, best_peer):
    """A result row's Mpps (median and min-max, or why it failed), its ratio to the best peer
    (wirespeed's rows only) and its user cycles per packet, as Markdown table cells."""
    measured = row.get("median") is not None
    fig = f"{row['median']:.3f} ({row['min']:.3f}-{row['max']:.3f})" if measured else f"failed: {row['error']}"
    ratio = f"{row['median'] / best_peer:.2f}x" if best_peer and measured and row["tool"].startswith("wirespeed") else ""
    cyc = f"{row['user_cycles_per_packet']:.0f}" if row.get("user_cycles_per_packet") is not None else ""
    return fig, ratio, cyc


def cpu_mhz():
    """The clock /proc/cpuinfo reports (what CPU time is turned into cycles at)."""
    for line in open("/proc/cpuinfo"):
        if line.startswith("cpu MHz"):
            return float(line.split(":", 1)[1])
    return None


def steal_ticks():
    """Ticks (1/HZ s) the hypervisor ran something else, per CPU ("cpu0": n, ...), from
    /proc/stat's steal column: on a VM, time in which nothing measured here can run."""
    ticks = {}
    for line in open("/proc/stat"):
        f = line.split()
        if f and f[0].startswith("cpu") and f[0] != "cpu" and len(f) > 8:
            ticks[f[0]] = int(f[8])
    return ticks


def interleaved(cases, runs, log):
    """Measures every case once, then again, `runs` times: the machine drifts over minutes,
    and interleaved a drift spreads over every tool instead of favouring the one that ran in
    a good minute. `cases` is a list of (label, fn); fn() returns (Mpps, user cycles per
    packet or None). A case that fails is reported and not run again. Returns one dict per
    case: runs, the steal ticks per CPU of each run, error, and median/min/max and
    user_cycles_per_packet when measured."""
    done = [{"runs": [], "cycles": [], "steal": [], "error": None} for _ in cases]
    for run in range(runs):
        for (label, fn), d in zip(cases, done):
            if d["error"]:
                continue
            try:
                before = steal_ticks()
                mpps, cycles = fn()
                after = steal_ticks()
                steal = {c: after[c] - before.get(c, 0) for c in after}
                d["runs"].append(round(mpps, 3))
                d["steal"].append(steal)
                if cycles is not None:
                    d["cycles"].append(round(cycles))
                stolen = " ".join(f"{c} {n}" for c, n in steal.items())
                log(f"{label} run {run + 1}: {mpps:.3f} Mpps (steal ticks: {stolen})")
            except Exception as e:  # a peer that cannot start is reported, not fatal
                d["error"] = str(e).splitlines()[0][:200]
    out = []
    for (label, _), d in zip(cases, done):
        row = {"runs": d["runs"], "steal_ticks": d["steal"], "error": d["error"]}
        if d["runs"]:
            row.update(median=statistics.median(d["runs"]), min=min(d["runs"]), max=max(d["runs"]))
            log(f"{label} {row['median']:.3f} Mpps ({row['min']:.3f}-{row['max']:.3f})")
        else:
            log(f"{label} FAILED: {d['error']}")
        if d["cycles"]:
            row["user_cycles_per_packet"] = statistics.median(d["cycles"])
        out.append(row)
    return out
