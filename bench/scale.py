#!/usr/bin/python3
"""make bench-scale: how wirespeed scales with queues and cores, N = 1, 2, 4, 8.

For each N the machine's CPUs allow (a load CPU and a measured CPU per queue: N <= CPUs / 2,
except that a 2-CPU machine runs N = 1 and 2, the load and the measured threads then sharing
the two CPUs; the N left out are named), three namespaces A, M and B and two veth pairs of N
queues, A-M and M-B, made here and removed on every exit. The load is wirespeed's kernel
engine (bench txpush --engine kernel --cpus 0..N-1, 64-byte frames): each CPU sends into its
own queue of M. Rows, each measured while the load runs:
  xdpdrop ceiling      bench xdpdrop on M (the kernel's cost, our XDP program dropping)
  kernel engine        what the load sent, by its own count (its steady second), in the
                       xdpdrop run
  rxdrop 1 thread      bench rxdrop --port xdp:M@all, one thread
  rxdrop N threads     the same with --cpus (a thread per queue)
  capture 1 thread     capture --port xdp:M@all -w /dev/null
  capture N threads    the same with --cpus
  switch               switch, ports xdp:M-side of both pairs, --pmd-cpus with N CPUs, one rule
                       in_port=1 -> 2, counted by an xdpdrop sink on B
  switch --offload     the same, flows forwarded by the switch's XDP program
The measured programs run on CPUs N..2N-1 (on 2 CPUs: the load's). Each figure is the
median of RUNS interleaved runs of DURATION seconds (Mpps; the receivers' own counts over
their run, the switch's at the sink). Writes bench/results/<date>-scale-<host>.json,
bench/SCALE.md (a table per machine, and how each row scales: its N-queue figure over N
times its 1-queue one) and bench/scale-<host>.png. Environment: RUNS (3), DURATION (5), NS_LIST
(the N to try, default "1 2 4 8"), ONLY (a regex of row names).

`bench/scale.py --from RESULTS.json` writes SCALE.md's section and the chart from results
measured elsewhere: bench/many-core/scale.sh runs this script on a lent many-core machine,
which may have no matplotlib.
"""

import datetime
import json
import os
import re
import socket
import statistics
import sys
import tempfile
import time

import benchlib
from benchlib import sh, spawn, stop_all, wait_for, ws_json

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
WS = os.environ.get("WS", os.path.join(ROOT, "target", "release", "wirespeed"))
RUNS = int(os.environ.get("RUNS", "3"))
DURATION = float(os.environ.get("DURATION", "5"))
WANTED = [int(n) for n in os.environ.get("NS_LIST", "1 2 4 8").split()]
ONLY = re.compile(os.environ.get("ONLY", "."))
PREFIX = f"wss{os.getpid() % 100000}"
NS = {k: PREFIX + k for k in ("a", "m", "b")}
IF = {"a": PREFIX + "a0", "m0": PREFIX + "m0", "m1": PREFIX + "m1", "b": PREFIX + "b0"}
CPUS = os.cpu_count()


def log(msg):
    print(f"bench-scale: {msg}", file=sys.stderr, flush=True)


def cpu_list(cpus):
    return ",".join(str(c) for c in cpus)


def plan():
    """The N this machine can measure, and those it leaves out with why."""
    runs, skipped = [], []
    for n in WANTED:
        if 2 * n <= CPUS or (CPUS == 2 and n <= 2):
            runs.append(n)
        else:
            skipped.append(f"N={n} (needs {2 * n} CPUs, this machine has {CPUS})")
    return runs, skipped


def cpus_for(n):
    """(load CPUs, measured CPUs) for N queues."""
    load = list(range(n))
    measured = [(n + i) % CPUS for i in range(n)] if 2 * n <= CPUS else [(i + 1) % CPUS for i in range(n)]
    return load, measured


def setup(n):
    benchlib.three_in_a_row(NS, IF, queues=n)


def cleanup():
    stop_all()
    for ns in NS.values():
        sh("ip", "netns", "del", ns, check=False)


def rules_file(tmp):
    path = os.path.join(tmp, "rules.txt")
    with open(path, "w") as f:
        f.write("priority=1,in_port=1,actions=output:2\n")
    return path


def load_argv(n, seconds):
    return [WS, "bench", "txpush", "--engine", "kernel", "--cpus", cpu_list(range(n)), "--port", f"xdp:{IF['a']}",
            "--duration", str(seconds), "--json", "--quiet"]


def with_load(n, tmp, measured_ns, measured_argv, ready=None, sink=False):
    """Runs the load for the measured program's run; returns (the measured program's JSON, the
    load's JSON, the sink's JSON or None). `ready`: a pattern the measured program prints
    once it is set up (it starts before the load); None: it starts once the load runs."""
    mpath, lpath, spath = (os.path.join(tmp, x) for x in ("measured", "load", "sink"))
    with open(mpath, "w") as mout, open(lpath, "w") as lout, open(spath, "w") as sout:
        try:
            m = None
            if ready:
                m = spawn(measured_ns, None, measured_argv, mout)
                wait_for(mpath, ready, m)
            load = spawn(NS["a"], None, load_argv(n, DURATION + 5), lout)
            time.sleep(2)
            if load.poll() is not None:
                raise RuntimeError(f"load exited: {open(lpath).read()[-300:]}")
            s = None
            if sink:
                s = spawn(NS["b"], None, [WS, "bench", "xdpdrop", "--port", f"xdp:{IF['b']}", "--duration",
                                          str(DURATION), "--json", "--quiet"], sout)
                s.wait(DURATION + 30)
            elif m is None:
                m = spawn(measured_ns, None, measured_argv, mout)
                m.wait(DURATION + 30)
            load.wait(DURATION + 30)
        finally:
            stop_all()
    measured = ws_json(mpath) if not sink else None
    return measured, ws_json(lpath), ws_json(spath) if sink else None


def rows(n, tmp):
    load, measured = cpus_for(n)
    one = [str(measured[0])]
    dur = ["--duration", str(DURATION)]
    rx = lambda *extra: [WS, "bench", "rxdrop", "--port", f"xdp:{IF['m0']}@all", *dur, "--json", "-q", *extra]
    cap = lambda *extra: [WS, "capture", "--port", f"xdp:{IF['m0']}@all", "-w", "/dev/null", *dur, "--json", *extra]
    switch = lambda *extra: [WS, "switch", "--port", f"1=xdp:{IF['m0']}", "--port", f"2=xdp:{IF['m1']}",
                             "--flows", rules_file(tmp), "--pmd-cpus", cpu_list(measured), *extra]

    def ceiling():
        j, l, _ = with_load(n, tmp, NS["m"], [WS, "bench", "xdpdrop", "--port", f"xdp:{IF['m0']}", *dur, "--json", "-q"])
        return {"xdpdrop ceiling": j["mpps"], "kernel engine": benchlib.steady(l["per_second_mpps"], "kernel engine")}

    def receiver(name, argv, key="mpps"):
        def run():
            j, _, _ = with_load(n, tmp, NS["m"], argv)
            mpps = j[key] if key == "mpps" else j["received"] / max(j["seconds"], 1e-9) / 1e6
            return {name: mpps}
        return run

    def pinned(argv):
        return ["taskset", "-c", one[0], *argv]

    def switched(name, *extra):
        def run():
            _, _, s = with_load(n, tmp, NS["m"], switch(*extra), ready=r" ready", sink=True)
            return {name: s["mpps"]}
        return run

    cases = [("xdpdrop ceiling", ceiling),
             ("rxdrop 1 thread", receiver("rxdrop 1 thread", pinned(rx()))),
             ("rxdrop N threads", receiver("rxdrop N threads", rx("--cpus", cpu_list(measured)))),
             ("capture 1 thread", receiver("capture 1 thread", pinned(cap()), key="received")),
             ("capture N threads", receiver("capture N threads", cap("--cpus", cpu_list(measured)), key="received")),
             ("switch", switched("switch")),
             ("switch --offload", switched("switch --offload", "--offload"))]
    return [(name, fn) for name, fn in cases if ONLY.search(name)]


def main():
    if len(sys.argv) == 3 and sys.argv[1] == "--from":
        # Results measured elsewhere (bench/many-core/scale.sh on a lent machine): only the
        # section and the chart are written, here, where matplotlib is.
        day = re.match(r"\d{4}-\d{2}-\d{2}", os.path.basename(sys.argv[2]))
        with open(sys.argv[2]) as f:
            publish(json.load(f), day.group(0) if day else datetime.date.today().isoformat())
        return
    if os.geteuid() != 0:
        sys.exit("bench-scale: needs root (namespaces, veths, XDP)")
    import signal
    for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(s, lambda *_: sys.exit(130))
    ns_run, skipped = plan()
    for s in skipped:
        log(f"skipped {s}")
    results = {}  # (row, n) -> list of Mpps, or an error
    errors = {}
    try:
        with tempfile.TemporaryDirectory(prefix="wirespeed-scale-") as tmp:
            for run in range(RUNS):
                for n in ns_run:
                    setup(n)
                    try:
                        for name, fn in rows(n, tmp):
                            if (name, n) in errors:
                                continue
                            try:
                                for row, mpps in fn().items():
                                    results.setdefault((row, n), []).append(mpps)
                                    log(f"run {run + 1}/{RUNS} N={n} {row}: {mpps:.3f} Mpps")
                            except Exception as e:  # noqa: BLE001 - a failed row is reported
                                errors[(name, n)] = str(e)[-300:]
                                log(f"N={n} {name}: failed: {errors[(name, n)]}")
                    finally:
                        cleanup()
    finally:
        cleanup()
    write(results, errors, ns_run, skipped)


def write(results, errors, ns_run, skipped):
    """Saves the figures as bench/results/<date>-scale-<host>.json, then publishes them."""
    table = {}
    for (row, n), v in results.items():
        table.setdefault(row, {})[n] = {"median": statistics.median(v), "min": min(v), "max": max(v), "runs": v}
    for (row, n), e in errors.items():
        table.setdefault(row, {})[n] = {"error": e}
    record = {"machine": benchlib.machine(), "hostname": socket.gethostname(), "runs": RUNS, "duration": DURATION,
              "queues": ns_run, "skipped": skipped, "results": table}
    day = datetime.date.today().isoformat()
    path = os.path.join(ROOT, "bench", "results", f"{day}-scale-{host_of(record['machine'])}.json")
    with open(path, "w") as f:
        json.dump(record, f, indent=1, default=str)
    publish(record, day)
    log(f"wrote {path} and bench/SCALE.md")


def host_of(machine):
    return re.sub(r"[^a-z0-9]+", "-", machine["cpu"].lower()).strip("-")[:40] + f"-{machine['cpus']}cpu"


def publish(record, day):
    """Writes a machine's section of bench/SCALE.md, and its chart, from its results record."""
    machine, ns_run, skipped, cpus = record["machine"], record["queues"], record["skipped"], record["machine"]["cpus"]
    host = host_of(machine)
    # Read back from JSON, the queue counts are strings.
    table = {row: {int(n): c for n, c in by_n.items()} for row, by_n in record["results"].items()}
    lines = [f"## {machine['cpu']}, {cpus} CPUs, kernel {machine['kernel']} ({day})", "",
             f"`make bench-scale` (bench/scale.py). Mpps, median of {record['runs']} interleaved runs of "
             f"{record['duration']:g} s (min-max). Load: the kernel engine from CPUs 0..N-1, one queue each; "
             "measured programs on CPUs "
             + ("N..2N-1." if all(2 * n <= cpus for n in ns_run) else
                "1 and 0 (a 2-CPU machine: the load and the measured threads share the CPUs, so N=2 shows "
                "contention, not scaling).")
             + (f" Left out: {'; '.join(skipped)}." if skipped else ""), "",
             "| row | " + " | ".join(f"N={n}" for n in ns_run) + " | N-queue / (N x 1-queue) |",
             "| --- | " + " | ".join("---" for _ in ns_run) + " | --- |"]
    order = ["xdpdrop ceiling", "kernel engine", "rxdrop 1 thread", "rxdrop N threads", "capture 1 thread",
             "capture N threads", "switch", "switch --offload"]
    for row in [r for r in order if r in table]:
        cells = []
        for n in ns_run:
            c = table[row].get(n)
            if c is None:
                cells.append("")
            elif "error" in c:
                cells.append(f"failed: {c['error'][:80]}")
            else:
                cells.append(f"{c['median']:.2f} ({c['min']:.2f}-{c['max']:.2f})")
        first, last = table[row].get(ns_run[0], {}), table[row].get(ns_run[-1], {})
        scaling = ""
        if "median" in first and "median" in last and len(ns_run) > 1 and first["median"] > 0:
            scaling = f"{last['median'] / (ns_run[-1] * first['median']):.2f}"
        lines.append(f"| {row} | " + " | ".join(cells) + f" | {scaling} |")
    lines += ["", f"![scaling on {machine['cpu']}](scale-{host}.png)", ""]
    section = "\n".join(lines)
    md = os.path.join(ROOT, "bench", "SCALE.md")
    text = open(md).read() if os.path.exists(md) else (
        "# Scaling across queues and cores\n\nOne section per machine `make bench-scale` ran on; "
        "goals (issue 33): the kernel engine and the switch (user space and --offload) at N queues "
        ">= 0.8 x N x their 1-queue rate, up to 8.\n\n")
    head = f"## {machine['cpu']}, {cpus} CPUs"
    parts = re.split(r"(?m)^(?=## )", text)
    parts = [p for p in parts if not p.startswith(head)]
    with open(md, "w") as f:
        f.write("".join(parts).rstrip("\n") + "\n\n" + section)
    chart(table, ns_run, host, machine)


def chart(table, ns_run, host, machine):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        log("matplotlib missing: no chart (apt-get install python3-matplotlib)")
        return
    fig, ax = plt.subplots(figsize=(9, 5))
    for row, by_n in table.items():
        pts = [(n, by_n[n]["median"]) for n in ns_run if "median" in by_n.get(n, {})]
        if pts:
            ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", label=row)
    ax.set_xticks(ns_run)
    ax.set_xlabel("queues (N)")
    ax.set_ylabel("Mpps")
    ax.set_title(f"{machine['cpu']}, {machine['cpus']} CPUs")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(os.path.join(ROOT, "bench", f"scale-{host}.png"), dpi=90)


if __name__ == "__main__":
    main()
