#!/usr/bin/python3
"""make bench-pipe: process to process through shared memory, wirespeed's pipe: port against
DPDK's memif (the shared-memory interface people use between DPDK processes), same run.

No network: each pair of processes meets in shared memory (wirespeed: a file under /dev/shm;
memif: a UNIX socket in a temporary directory, then shared memory). The sender runs pinned to
CPU 0, the receiver to CPU 1, one pair at a time:
  wirespeed                 `gen --port pipe:NAME` -> `bench rxdrop --port pipe:NAME`
                            (descriptors cross; the frames stay where they are)
  testpmd memif             testpmd txonly (memif client) -> testpmd rxonly (memif server),
                            each copying packets into and out of the shared rings
  testpmd memif zero-copy   the same with the client's zero-copy=yes (the server copies
                            out of the client's buffers)
testpmd needs two lcores: its main lcore (statistics only) is on the other CPU.
Each figure is the receiver's steady rate, the same way for both (the median of its
per-second rates without the first two seconds and the last), the median of RUNS runs of
DURATION seconds with (min-max), the runs interleaved. Writes
bench/results/<date>-pipe.json and bench/PIPE.md (ratio: wirespeed / best peer); exits
non-zero, naming them, when a row could not be measured. Environment: RUNS (3), DURATION
(10), SIZES ("64 1500").
"""

import datetime
import json
import os
import signal
import subprocess
import sys
import tempfile
import time

import benchlib
from benchlib import interleaved, spawn_here, steady, stop, stop_all, testpmd_pps, wait_for, ws_json

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
WS = os.path.join(ROOT, "target", "release", "wirespeed")
RUNS = int(os.environ.get("RUNS", "3"))
DURATION = float(os.environ.get("DURATION", "10"))
SIZES = [int(s) for s in os.environ.get("SIZES", "64 1500").split()]
SEND_CPU, RECV_CPU = "0", "1"
PREFIX = f"wspipe{os.getpid() % 100000}"
LAST_CPU = {}


def log(msg):
    print(f"bench-pipe: {msg}", file=sys.stderr, flush=True)


def wirespeed_pair(size, tmp):
    """gen into a pipe, bench rxdrop out of it; returns the receiver's steady Mpps."""
    name = f"{PREFIX}-{size}"
    rpath, spath = os.path.join(tmp, "receiver"), os.path.join(tmp, "sender")
    with open(rpath, "w") as rout, open(spath, "w") as sout:
        r = spawn_here(RECV_CPU, [WS, "bench", "rxdrop", "--port", f"pipe:{name}", "--duration",
                                  str(DURATION), "--quiet", "--json"], rout)
        try:
            wait_for(rpath, r" ready ", r)
            s = spawn_here(SEND_CPU, [WS, "gen", "--port", f"pipe:{name}", "--size", str(size),
                                      "--duration", str(DURATION + 5), "--quiet"], sout)
            r.wait(DURATION + 30)
            stop(s, signal.SIGINT)
        finally:
            stop_all()
    result = ws_json(rpath)
    LAST_CPU.update(result.get("cpu") or {})
    return steady(result.get("per_second_mpps") or [], "wirespeed")


def testpmd_argv(role, mode, size, socket, zero_copy, main_cpu):
    vdev = f"net_memif0,role={role},socket={socket},socket-abstract=no"
    if zero_copy and role == "client":
        vdev += ",zero-copy=yes"
    # Zero-copy shares the client's memory in one file: --single-file-segments.
    segments = ["--single-file-segments"] if zero_copy else []
    argv = ["stdbuf", "-oL", "dpdk-testpmd", "-l", "0,1", "--main-lcore", main_cpu, "--no-huge",
            "-m", "1024", "--no-pci", *segments, "--file-prefix", f"{PREFIX}{role}", "--vdev", vdev, "--",
            f"--forward-mode={mode}", "--stats-period", "1", "--nb-cores=1"]
    if mode == "txonly":
        argv.append(f"--txpkts={size - 4}")
    return argv


def memif_pair(size, tmp, zero_copy):
    """testpmd txonly (client) into testpmd rxonly (server) over memif; returns the
    receiver's steady Mpps."""
    socket = os.path.join(tmp, "memif.sock")
    rpath, spath = os.path.join(tmp, "receiver"), os.path.join(tmp, "sender")
    with open(rpath, "w") as rout, open(spath, "w") as sout:
        # The forwarding lcore is the one that is not the main lcore.
        r = spawn_here(None, testpmd_argv("server", "rxonly", size, socket, zero_copy, SEND_CPU), rout)
        try:
            # A port that did not come up still starts forwarding (with no port): wait for it.
            up = r"Port 0: [0-9A-F]{2}:"
            wait_for(rpath, up, r)
            s = spawn_here(None, testpmd_argv("client", "txonly", size, socket, zero_copy, RECV_CPU), sout)
            wait_for(spath, up, s)
            time.sleep(DURATION + 1)
            stop(r)
            stop(s)
        finally:
            stop_all()
            if os.path.exists(socket):
                os.unlink(socket)
    return testpmd_pps(open(rpath).read(), "Rx-pps")


def rows(size, tmp):
    return [
        ("wirespeed pipe", lambda: wirespeed_pair(size, tmp)),
        ("testpmd memif", lambda: memif_pair(size, tmp, False)),
        ("testpmd memif zero-copy", lambda: memif_pair(size, tmp, True)),
    ]


def measured(fn):
    def run():
        LAST_CPU.clear()
        mpps = fn()
        return mpps, LAST_CPU.get("user_cycles_per_packet")
    return run


def main():
    for tool in ("dpdk-testpmd", "stdbuf", "taskset"):
        if subprocess.run(["which", tool], capture_output=True).returncode != 0:
            sys.exit(f"bench-pipe: {tool} is not installed (make bench-pipe installs it)")
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    log(f"load average {open('/proc/loadavg').read().split()[0]} (numbers are noisy when it is above 0.5)")
    results = []
    try:
        with tempfile.TemporaryDirectory(prefix="wirespeed-pipe.") as tmp:
            for size in SIZES:
                chosen = rows(size, tmp)
                cases = [(f"{size:>5} {tool:<24}", measured(fn)) for tool, fn in chosen]
                for (tool, _), row in zip(chosen, interleaved(cases, RUNS, log)):
                    results.append({"tool": tool, "size": size, **row})
    finally:
        stop_all()
    write(results)
    failed = [f"{r['size']} B {r['tool']}: {r['error']}" for r in results if r.get("error")]
    if failed:
        sys.exit("bench-pipe: could not measure " + "; ".join(failed))


def write(results):
    date = datetime.date.today().isoformat()
    machine = benchlib.machine(sender_cpu=SEND_CPU, receiver_cpu=RECV_CPU)
    os.makedirs(os.path.join(ROOT, "bench", "results"), exist_ok=True)
    with open(os.path.join(ROOT, "bench", "results", f"{date}-pipe.json"), "w") as f:
        json.dump({"date": date, "machine": machine, "runs": RUNS, "duration_s": DURATION, "results": results}, f, indent=1)
    lines = [f"# Process to process through shared memory ({date})", "",
             f"Mpps at the receiver, median of {RUNS} interleaved runs of {DURATION:g} s (min-max): its steady "
             "rate, the median of its per-second rates without the first two seconds and the last. "
             f"Sender on CPU {SEND_CPU}, receiver on CPU {RECV_CPU}; kernel {machine['kernel']}, {machine['cpu']}. "
             "wirespeed: `gen --port pipe:NAME` into `bench rxdrop --port pipe:NAME` (descriptors cross, frames "
             "stay); testpmd: txonly as a memif client into rxonly as the memif server (zero-copy: the client's "
             "zero-copy=yes). Made by `make bench-pipe` (bench/pipe.py). User cycles/packet: the wirespeed "
             "receiver's user CPU time per packet, polling included.", ""]
    for size in sorted({r["size"] for r in results}):
        rs = [r for r in results if r["size"] == size]
        peers = [r["median"] for r in rs if r.get("median") is not None and not r["tool"].startswith("wirespeed")]
        best = max(peers) if peers else None
        lines += [f"## {size}-byte frames", "", "| tool | Mpps | ratio to best peer | user cycles/packet |",
                  "| --- | --- | --- | --- |"]
        for r in rs:
            fig, ratio, cyc = benchlib.table_cells(r, best)
            lines.append(f"| {r['tool']} | {fig} | {ratio} | {cyc} |")
        lines.append("")
    with open(os.path.join(ROOT, "bench", "PIPE.md"), "w") as f:
        f.write("\n".join(lines))


if __name__ == "__main__":
    main()
