#!/usr/bin/python3
"""make bench-zcopy: the kernel's zero-copy TCP features, wirespeed zcopy against socat.

Two namespaces joined by a veth pair (MTU 9000), made here and removed on every exit: the
sender in A pinned to CPU 0, the receiver in B pinned to CPU 1. On veth the receive side's
kernel work (IP, TCP, queueing) runs on the sender's CPU, so CPU 1 does what the receiving
program itself asks of the kernel: copying (read) or mapping (zero-copy receive).

Receivers, each fed by the same sender (wirespeed zcopy send, MSG_ZEROCOPY, page-aligned
64 KiB sends): socat (the peer: 256 KiB reads into /dev/null), wirespeed zcopy recv --copy
(ordinary reads), wirespeed zcopy recv (TCP zero-copy receive; asks for one page a segment).
Senders, each into the same receiver (wirespeed zcopy recv --copy): socat (the peer: 64 KiB
reads of /dev/zero, written to the socket), wirespeed zcopy send --copy, wirespeed zcopy send
(MSG_ZEROCOPY), and the same two through io_uring (IORING_OP_SEND, IORING_OP_SEND_ZC from
registered buffers). A sender's CPU time includes the receive side's kernel work (see above).

CPU time is each measured process's own, user and system, from wait4() (the same rule for
every tool); throughput is bytes moved over the sender's seconds. Runs are interleaved
(every row once, then again). Writes bench/results/<date>-zcopy.json and bench/ZCOPY.md.
Environment: RUNS (3), DURATION (5), ONLY (regex of row names).
"""

import datetime
import json
import os
import re
import signal
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

from benchlib import sh, stop_all, wait_for, ws_json, PROCS

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
WS = os.path.join(ROOT, "target", "release", "wirespeed")
RUNS = int(os.environ.get("RUNS", "3"))
DURATION = float(os.environ.get("DURATION", "5"))
ONLY = re.compile(os.environ.get("ONLY", "."))
SEND_CPU, RECV_CPU = "0", "1"
P = f"wsz{os.getpid() % 100000}"
NS = {"a": P + "a", "b": P + "b"}
IF = {"a": P + "a0", "b": P + "b0"}
IP_B = "10.78.0.2"
PORT = 5401


def log(msg):
    print(msg, file=sys.stderr, flush=True)


MADE = []  # the namespaces this run created: teardown deletes these and no others


def setup():
    for ns in NS.values():
        sh("ip", "netns", "add", ns)
        MADE.append(ns)
    sh("ip", "link", "add", IF["a"], "netns", NS["a"], "type", "veth",
       "peer", "name", IF["b"], "netns", NS["b"])
    for side, ip in (("a", "10.78.0.1/24"), ("b", IP_B + "/24")):
        sh("ip", "-n", NS[side], "link", "set", IF[side], "mtu", "9000", "up")
        sh("ip", "-n", NS[side], "addr", "add", ip, "dev", IF[side])
        sh("ip", "-n", NS[side], "link", "set", "lo", "up")


def teardown():
    stop_all()
    while MADE:
        sh("ip", "netns", "del", MADE.pop(), check=False)


def start(ns, cpu, argv, out):
    """Starts argv in namespace ns pinned to cpu (ip netns exec and taskset exec it: the
    process is the program itself, so wait4() gives its own CPU time)."""
    p = subprocess.Popen(["ip", "netns", "exec", ns, "taskset", "-c", cpu, *argv],
                         stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                         text=True, start_new_session=True)
    PROCS.append(p)
    return p


def reap(p, timeout):
    """Waits for p to exit (SIGINT after timeout); returns its CPU seconds (user + system)."""
    end = time.time() + timeout
    while time.time() < end:
        pid, status, usage = os.wait4(p.pid, os.WNOHANG)
        if pid:
            break
        time.sleep(0.05)
    else:
        os.killpg(p.pid, signal.SIGINT)
        pid, status, usage = os.wait4(p.pid, 0)
    p.returncode = os.waitstatus_to_exitcode(status)
    PROCS.remove(p)
    return usage.ru_utime + usage.ru_stime


RECEIVERS = {
    "socat (read)": ["socat", "-u", "-b", "262144", f"TCP4-LISTEN:{PORT},reuseaddr", "OPEN:/dev/null"],
    "wirespeed recv --copy": [WS, "zcopy", "recv", "--listen", str(PORT), "--copy", "--json", "-q"],
    "wirespeed recv (zero-copy)": [WS, "zcopy", "recv", "--listen", str(PORT), "--json", "-q"],
}
SENDERS = {
    "socat (write from /dev/zero)": ["timeout", "-s", "INT", str(DURATION), "socat", "-u", "-b",
                                     "65536", "OPEN:/dev/zero", f"TCP4:{IP_B}:{PORT}"],
    "wirespeed send --copy": [WS, "zcopy", "send", "--connect", f"{IP_B}:{PORT}", "--copy",
                              "--duration", str(DURATION), "--json", "-q"],
    "wirespeed send (MSG_ZEROCOPY)": [WS, "zcopy", "send", "--connect", f"{IP_B}:{PORT}",
                                      "--duration", str(DURATION), "--json", "-q"],
    "wirespeed send --io-uring --copy": [WS, "zcopy", "send", "--connect", f"{IP_B}:{PORT}",
                                         "--io-uring", "--copy", "--duration", str(DURATION),
                                         "--json", "-q"],
    "wirespeed send --io-uring (SEND_ZC)": [WS, "zcopy", "send", "--connect", f"{IP_B}:{PORT}",
                                            "--io-uring", "--duration", str(DURATION), "--json",
                                            "-q"],
}
COMMON_SENDER = SENDERS["wirespeed send (MSG_ZEROCOPY)"]
COMMON_RECEIVER = RECEIVERS["wirespeed recv --copy"]


def ready_pattern(argv):
    return r"ready on" if argv[0] == WS else None


def measure(receiver, sender, tmp):
    """One transfer; returns (Gbit/s, receiver CPU s, sender CPU s, bytes, details)."""
    rlog, slog = os.path.join(tmp, "r.log"), os.path.join(tmp, "s.log")
    with open(rlog, "w") as ro, open(slog, "w") as so:
        r = start(NS["b"], RECV_CPU, receiver, ro)
        if receiver[0] == WS:
            wait_for(rlog, r"ready on", r)
        else:
            time.sleep(0.5)  # socat prints nothing when it listens
        t0 = time.time()
        s = start(NS["a"], SEND_CPU, sender, so)
        s_cpu = reap(s, DURATION + 20)
        seconds = time.time() - t0
        r_cpu = reap(r, 20)
    rj = ws_json(rlog) if receiver[0] == WS else None
    sj = ws_json(slog) if sender[0] == WS else None
    if sj:
        nbytes, seconds = sj["bytes"], sj["seconds"]
    elif rj:
        nbytes = rj["bytes"]
    else:
        raise RuntimeError("nothing counted the bytes")
    if nbytes <= 0:
        raise RuntimeError(f"no bytes moved: {open(slog).read()[-300:]} {open(rlog).read()[-300:]}")
    details = {}
    if rj:
        details.update(mapped_share=rj["mapped_share"], mss=rj["mss"])
    if sj:
        details.update(zerocopy=sj["zerocopy"], completed_zerocopy=sj["completed_zerocopy"],
                       completed_copied=sj["completed_copied"])
    return nbytes * 8 / seconds / 1e9, r_cpu, s_cpu, nbytes, details


def main():
    if os.geteuid() != 0:
        sys.exit("bench/zcopy.py: needs root (namespaces)")
    for tool in (WS, "/usr/bin/socat"):
        if not os.path.exists(tool):
            sys.exit(f"bench/zcopy.py: {tool} missing (make bench-zcopy builds and installs it)")
    rows = [("receive", name, argv, COMMON_SENDER) for name, argv in RECEIVERS.items()]
    rows += [("send", name, COMMON_RECEIVER, argv) for name, argv in SENDERS.items()]
    rows = [r for r in rows if ONLY.search(r[1])]
    results = {r[1]: {"side": r[0], "gbps": [], "cpu_ms_per_gb": [], "error": None, "details": []} for r in rows}
    tmp = tempfile.mkdtemp(prefix="wszc")
    try:
        setup()
        for run in range(RUNS):
            for side, name, receiver, sender in rows:
                d = results[name]
                if d["error"]:
                    continue
                try:
                    gbps, r_cpu, s_cpu, nbytes, details = measure(receiver, sender, tmp)
                    cpu = r_cpu if side == "receive" else s_cpu
                    d["gbps"].append(round(gbps, 2))
                    d["cpu_ms_per_gb"].append(round(cpu * 1e3 / (nbytes / 1e9), 1))
                    d["details"].append(details)
                    log(f"{name} run {run + 1}: {gbps:.2f} Gbit/s, {side}r CPU "
                        f"{d['cpu_ms_per_gb'][-1]} ms/GB {details}")
                except Exception as e:
                    d["error"] = str(e).splitlines()[0][:200]
                    log(f"{name}: {d['error']}")
                    stop_all()
    finally:
        teardown()
        shutil.rmtree(tmp, ignore_errors=True)
    write(results)


def med(xs):
    return statistics.median(xs) if xs else None


def write(results):
    date = datetime.date.today().isoformat()
    cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "?")
    out = {"date": date, "cpu": cpu, "kernel": os.uname().release, "runs": RUNS,
           "duration_s": DURATION, "send_cpu": SEND_CPU, "recv_cpu": RECV_CPU, "rows": results}
    os.makedirs(os.path.join(ROOT, "bench", "results"), exist_ok=True)
    with open(os.path.join(ROOT, "bench", "results", f"{date}-zcopy.json"), "w") as f:
        json.dump(out, f, indent=1)
    peer = {"receive": "socat (read)", "send": "socat (write from /dev/zero)"}
    lines = [
        "# Zero-copy TCP: `wirespeed zcopy` against socat",
        "",
        f"Measured {date} by `make bench-zcopy` (bench/zcopy.py) on {cpu}, Linux {os.uname().release}: "
        f"{RUNS} interleaved runs of {DURATION:g} s, median (min-max). Two namespaces joined by a "
        f"veth pair (MTU 9000); sender pinned to CPU {SEND_CPU}, receiver to CPU {RECV_CPU}. "
        "CPU is the measured program's own time (user + system, from wait4) per GB moved; on "
        "veth the receive side's kernel TCP work runs on the sender's CPU, so a sender's figure "
        "includes it and a receiver's is what reading (or mapping) costs. Ratios are against "
        "socat in the same run: throughput ours / socat's, CPU per GB socat's / ours (above 1: "
        "we use less). Neither receiver reads the bytes it gets (socat writes them to "
        "/dev/null); socat's sender reads /dev/zero, a copy that wirespeed's sender (which "
        "sends its buffers as they are) does not make. MSG_ZEROCOPY cannot save the sender's "
        "copy here: to a socket on the same host the kernel copies anyway (the completions "
        "say so); toward a NIC it would. The --io-uring rows make the same sends through "
        "io_uring: plain IORING_OP_SEND, and IORING_OP_SEND_ZC from buffers registered with "
        "the ring once, its notices on the completion queue.",
        "",
        "| side | program | Gbit/s | CPU ms/GB | throughput ratio | CPU ratio | notes |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    for name, d in results.items():
        if d["error"]:
            lines.append(f"| {d['side']} | {name} | failed: {d['error']} | | | | |")
            continue
        g, c = med(d["gbps"]), med(d["cpu_ms_per_gb"])
        p = results.get(peer[d["side"]])
        pg = med(p["gbps"]) if p else None
        pc = med(p["cpu_ms_per_gb"]) if p else None
        gr = f"{g / pg:.2f}" if pg else "-"
        cr = f"{pc / c:.2f}" if pc and c else "-"
        notes = []
        det = d["details"][-1] if d["details"] else {}
        if "mapped_share" in det and d["side"] == "receive":
            notes.append(f"mapped {statistics.median(x['mapped_share'] for x in d['details']) * 100:.1f}%, mss {det['mss']}")
        if "completed_zerocopy" in det and d["side"] == "send" and det.get("zerocopy"):
            notes.append(f"completions: {det['completed_zerocopy']} zero-copy, {det['completed_copied']} copied")
        lines.append(
            f"| {d['side']} | {name} | {g:.2f} ({min(d['gbps']):.2f}-{max(d['gbps']):.2f}) | "
            f"{c:.0f} ({min(d['cpu_ms_per_gb']):.0f}-{max(d['cpu_ms_per_gb']):.0f}) | {gr} | {cr} | {'; '.join(notes)} |")
    with open(os.path.join(ROOT, "bench", "ZCOPY.md"), "w") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
