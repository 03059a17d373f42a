#!/usr/bin/python3
"""make bench-churn: what changes to the rules cost the switch's datapath, precise
revalidation against emptying the caches at every change.

Runs crates/switch's `rule_churn` example (no I/O; see its header) pinned to CPU 1, for
rule changes every EVERY packets (space-separated list). A controller routes by
destination, one rule a host (10,000); 100,000 UDP flows to those hosts, one megaflow a
host; each change adds a rule for a new host. Both policies run in the same process, in
interleaved rounds (the fastest of 5 each): `precise` (the switch: only the megaflows a
change could decide otherwise go) and `flush` (every megaflow goes: the switch before
precise revalidation, and the peer here, as no other switch can be timed without I/O).
Writes bench/results/<date>-rule-churn.json and bench/CHURN.md.
The largest EVERY (more than PACKETS: no change at all) is what the caches cost alone.
Environment: EVERY ("5000 50000 500000 1000000000"), PACKETS (5000000), CPU (1).
"""

import datetime
import json
import os
import subprocess
import sys

from benchlib import cpu_mhz, machine

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
EXAMPLE = os.path.join(ROOT, "target", "release", "examples", "rule_churn")
EVERY = [int(n) for n in os.environ.get("EVERY", "5000 50000 500000 1000000000").split()]
PACKETS = int(os.environ.get("PACKETS", "5000000"))
CPU = os.environ.get("CPU", "1")


def run(every):
    argv = ["taskset", "-c", CPU, EXAMPLE, "--every", str(every), "--packets", str(PACKETS)]
    r = subprocess.run(argv, capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"bench-churn: {' '.join(argv)}: {r.stderr.strip()[-300:]}")
    return json.loads(r.stdout)


def main():
    if not os.path.exists(EXAMPLE):
        sys.exit(f"bench-churn: {EXAMPLE} missing (cargo build --release -p wirespeed-switch --example rule_churn)")
    rows = []
    for every in EVERY:
        row = run(every)
        print(f"every {every} packets: precise {row['precise']['ns_per_packet']:.1f} ns/packet, "
              f"flush {row['flush']['ns_per_packet']:.1f} ({row['flush_over_precise']:.2f}x)", file=sys.stderr)
        rows.append(row)
    date = datetime.date.today().isoformat()
    host = machine(benchmark=CPU)
    mhz = cpu_mhz()
    with open(os.path.join(ROOT, "bench", "results", f"{date}-rule-churn.json"), "w") as f:
        json.dump({"date": date, "machine": host, "mhz": mhz, "packets": PACKETS, "results": rows}, f, indent=1)
    cycles = lambda ns: f"{ns * mhz / 1000:.0f}" if mhz else "n/a"
    lines = [f"# Rule changes under traffic: precise revalidation against flushing ({date})", "",
             f"Host: {host['cpu']}, {host['cpus']} CPUs, Linux {host['kernel']}; pinned to CPU {CPU}; cycles at "
             f"/proc/cpuinfo's {mhz:.0f} MHz. Made by `make bench-churn` (bench/rule_churn.py, the `rule_churn` "
             "example of crates/switch: parse, caches and slow path, no I/O). 10,000 host rules, 100,000 UDP "
             f"flows to those hosts, {PACKETS:,} packets per round; every N packets a controller adds a rule for "
             "a new host (add, revalidate; as the bridge does it, an add harvests no counts). The fastest of 5 interleaved rounds "
             "per policy. `flush` is the switch before precise revalidation: every change emptied the caches.",
             "A change's cost is its round's time over the round without changes, per change: for "
             "`precise` the test of every megaflow against the new rule (its digest, dpif/digest.rs), for "
             "`flush` the harvest of every count, then the misses after it. Only where changes take a large share of the time (the first "
             "rows) is that figure more than noise: a difference of a few ns a packet between rounds.",
             "", "| a change every | changes | precise ns (cycles)/packet | misses | megaflows removed "
             "| flush ns (cycles)/packet | misses | flush / precise | µs a change, precise / flush |",
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    base = next((r for r in rows if r["precise"]["changes"] == 0), None)

    def per_change(r, policy):
        if not base or not r[policy]["changes"]:
            return "n/a"
        extra_ns = (r[policy]["ns_per_packet"] - base[policy]["ns_per_packet"]) * r["packets"]
        return f"{extra_ns / r[policy]['changes'] / 1000:.0f}"

    for r in rows:
        p, f_ = r["precise"], r["flush"]
        every = f"{r['every']:,} packets" if p["changes"] else "no change"
        lines.append(f"| {every} | {p['changes']} | {p['ns_per_packet']:.1f} ({cycles(p['ns_per_packet'])}) "
                     f"| {p['misses']:,} | {p['stale_megaflows']:,} | {f_['ns_per_packet']:.1f} "
                     f"({cycles(f_['ns_per_packet'])}) | {f_['misses']:,} | {r['flush_over_precise']:.2f}x "
                     f"| {per_change(r, 'precise')} / {per_change(r, 'flush')} |")
    lines.append("")
    with open(os.path.join(ROOT, "bench", "CHURN.md"), "w") as f:
        f.write("\n".join(lines))


if __name__ == "__main__":
    main()
