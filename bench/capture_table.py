#!/usr/bin/env python3
"""The capture benchmarks' records and tables (bench/capture.sh): `capture` (wirespeed
capture against tcpdump and netsniff-ng) and `pcap` (tcpdump through pcap-run's libpcap
shim against tcpdump on its own and wirespeed capture).

  capture_table.py record RECORDS key=value...   one capture: tool, size, run, duration,
                                                 written (capinfos' count), out=/err= (the
                                                 tool's output, parsed for its drop count),
                                                 load= (the load's JSON), error=
  capture_table.py report RECORDS --results F --readme R [--bench pcap]
                                                 bench/results/<date>-capture.json (or
                                                 -pcap.json) and the table in bench/README.md
  capture_table.py rerender RESULTS --readme R [--bench pcap]
                                                 the table again from a results file

Standard library only.
"""

import json
import os
import platform
import re
import statistics
import sys
from pathlib import Path

# Each benchmark: its tools (the subject first, then the peers it is compared with), their
# column names, its README section and its goal.
BENCHES = {
    "capture": {
        "tools": ["wirespeed", "tcpdump", "netsniff-ng"],
        "labels": {"wirespeed": "wirespeed (AF_XDP)", "tcpdump": "tcpdump -w", "netsniff-ng": "netsniff-ng"},
        "begin": "<!-- capture:begin (bench/capture.sh writes this part) -->",
        "end": "<!-- capture:end -->",
        "heading": "## Capture\n\n`bench/capture.sh`: wirespeed capture (AF_XDP) against `tcpdump -w` and `netsniff-ng`.",
        "goal": "Goal: ≥ 2.5× tcpdump and ≥ 2.5× netsniff-ng packets written per second, zero drops, 64-byte frames.",
    },
    "pcap": {
        "tools": ["tcpdump-shim", "tcpdump", "wirespeed"],
        "labels": {
            "tcpdump-shim": "tcpdump -w through pcap-run (AF_XDP)",
            "tcpdump": "tcpdump -w (TPACKET_V3)",
            "wirespeed": "wirespeed capture",
        },
        "begin": "<!-- pcap:begin (bench/capture.sh with BENCH=pcap writes this part) -->",
        "end": "<!-- pcap:end -->",
        "heading": "## libpcap programs\n\n`make bench-pcap` (`BENCH=pcap bench/capture.sh`): the same "
        "tcpdump, unmodified, through `wirespeed pcap-run` (libwirespeed_pcap.so, device `xdp:IFACE`) "
        "against tcpdump on its own and `wirespeed capture`.",
        "goal": "Goal: tcpdump through the shim ≥ 2× tcpdump on its own with no drops at 64 bytes, "
        "and ≥ 0.8× wirespeed capture.",
    },
}


def read(path):
    try:
        return Path(path).read_text(errors="replace")
    except OSError:
        return ""


def first_json(text):
    for line in text.splitlines():
        line = line.strip()
        if line.startswith("{"):
            try:
                return json.loads(line)
            except json.JSONDecodeError:
                pass
    return None


def count(pattern, text):
    m = re.search(pattern, text, re.MULTILINE)
    return int(m.group(1)) if m else None


def tool_counts(tool, out, err):
    """What the tool itself says: packets it received and packets it dropped."""
    if tool == "wirespeed":
        j = first_json(out) or {}
        drops = None
        if "dropped_by_kernel" in j:
            drops = j["dropped_by_kernel"] + j["dropped_by_writer"]
        return j.get("received"), drops, j.get("written")
    if tool in ("tcpdump", "tcpdump-shim"):
        kernel = count(r"^(\d+) packets? dropped by kernel", err)
        iface = count(r"^(\d+) packets? dropped by interface", err) or 0
        drops = None if kernel is None else kernel + iface
        return count(r"^(\d+) packets? received by filter", err), drops, count(r"^(\d+) packets? captured", err)
    if tool == "netsniff-ng":
        return (
            count(r"^\s*(\d+)\s+packets incoming", out),
            count(r"^\s*(\d+)\s+packets failed filter \(out of space\)", out),
            count(r"^\s*(\d+)\s+packets passed filter", out),
        )
    return None, None, None


def cmd_record(args):
    path, pairs = args[0], dict(p.partition("=")[::2] for p in args[1:])
    tool = pairs["tool"]
    out, err = read(pairs.get("out", "")), read(pairs.get("err", ""))
    received, drops, reported = tool_counts(tool, out, err)
    load = first_json(read(pairs.get("load", ""))) or {}
    duration = float(pairs["duration"])
    written = int(pairs.get("written") or 0)
    rec = {
        "tool": tool,
        "size": int(pairs["size"]),
        "run": int(pairs["run"]),
        "duration": duration,
        "written": written,
        "written_mpps": written / duration / 1e6,
        "tool_received": received,
        "tool_written": reported,
        "drops": drops,
        "load_mpps": load.get("mpps"),
        "load_packets": load.get("packets"),
        "error": pairs.get("error") or None,
        # Ticks of steal time on the capture's CPU during the run (see capture.sh).
        "steal_ticks": int(pairs.get("steal_ticks") or 0),
    }
    if tool == "wirespeed":
        j = first_json(out) or {}
        rec["wirespeed_drops_by_reason"] = j.get("drops")
        rec["wirespeed_dropped_by_writer"] = j.get("dropped_by_writer")
    rec["ok"] = rec["error"] is None and written > 0
    with open(path, "a") as f:
        f.write(json.dumps(rec) + "\n")
    if rec["ok"]:
        d = "?" if drops is None else drops
        print(
            f"{rec['written_mpps']:.3f} Mpps written, drops {d}, steal {rec['steal_ticks']} ticks",
            file=sys.stderr,
        )
    else:
        print(f"failed: {rec['error'] or 'nothing written'}", file=sys.stderr)


def median(values):
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None


def summarize(records, bench):
    tools = bench["tools"]
    rows = []
    for size in sorted({r["size"] for r in records}):
        row = {"size": size}
        for tool in tools:
            runs = [r for r in records if r["tool"] == tool and r["size"] == size and r["ok"]]
            mpps = [r["written_mpps"] for r in runs]
            row[tool] = {
                "runs": len(runs),
                "written_mpps": median(mpps),
                "min": min(mpps) if mpps else None,
                "max": max(mpps) if mpps else None,
                "drops": median([r["drops"] for r in runs]),
                "load_mpps": median([r["load_mpps"] for r in runs]),
            }
        subject = row[tools[0]]["written_mpps"]
        for peer in tools[1:]:
            p = row[peer]["written_mpps"]
            row[f"ratio_vs_{peer}"] = subject / p if subject and p else None
        rows.append(row)
    return rows


def fmt(v, digits=2):
    return "–" if v is None else f"{v:.{digits}f}"


def table(rows, machine, bench):
    tools, labels = bench["tools"], bench["labels"]
    peers = tools[1:]
    lines = [
        f"Capture to pcap on tmpfs under `txpush --engine kernel` (load on CPU {machine['load_cpu']}, "
        f"capture on CPU {machine['measured_cpu']}), {machine['runs']} run(s) of {machine['duration']} s, "
        f"median (min–max) packets written per second; drops as each tool reports them. "
        f"{machine['date']}, {machine['cpu_model']}, Linux {machine['kernel']}.",
        "",
        "| frame | " + " | ".join(labels[t] for t in tools) + " | "
        + " | ".join(f"vs {p}" for p in peers)
        + f" | drops ({' / '.join(tools)}) | load sent, Mpps ({' / '.join(tools)}) |",
        "|" + " --- |" * (1 + len(tools) + len(peers) + 2),
    ]
    for row in rows:
        cells = []
        for tool in tools:
            t = row[tool]
            cells.append(f"{fmt(t['written_mpps'], 3)} Mpps ({fmt(t['min'], 3)}–{fmt(t['max'], 3)})")
        drops = " / ".join(fmt(row[t]["drops"], 0) for t in tools)
        load = " / ".join(fmt(row[t]["load_mpps"], 2) for t in tools)
        ratios = " | ".join(f"{fmt(row[f'ratio_vs_{p}'])}×" for p in peers)
        lines.append(f"| {row['size']} B | {' | '.join(cells)} | {ratios} | {drops} | {load} |")
    lines.append("")
    lines.append(
        "On veth the receiving end's kernel work (XDP redirect and copy into the UMEM for "
        "AF_XDP; the socket path into the ring for tcpdump and netsniff-ng) runs on the load's "
        "CPU, so the load sends only as fast as that path takes packets: the last column."
    )
    lines.append("")
    lines.append(bench["goal"])
    return "\n".join(lines)


def machine_info():
    env = os.environ
    model = "unknown"
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return {
        "date": env.get("WS_DATE"),
        "runs": int(env.get("WS_RUNS", "0")),
        "duration": float(env.get("WS_DURATION", "0")),
        "sizes": [int(s) for s in env.get("WS_SIZES", "").split()],
        "load_cpu": int(env.get("WS_LOAD_CPU", "0")),
        "measured_cpu": int(env.get("WS_MEAS_CPU", "0")),
        "kernel": platform.release(),
        "cpu_model": model,
        "nproc": os.cpu_count(),
        "loadavg_at_start": float(env.get("WS_LOADAVG", "0")),
        "git_rev": env.get("WS_GIT"),
        "tcpdump": env.get("WS_TCPDUMP"),
        "netsniff_ng": env.get("WS_NETSNIFF"),
    }


def cmd_report(args):
    records_path = args[0]
    opts = dict(zip(args[1::2], args[2::2]))
    records = [json.loads(l) for l in Path(records_path).read_text().splitlines() if l.strip()]
    machine = machine_info()
    write_report(records, machine, opts)


def cmd_rerender(args):
    """Rewrites the README table from a results file (after the table's format changed)."""
    results = json.loads(Path(args[0]).read_text())
    opts = dict(zip(args[1::2], args[2::2]))
    opts["--results"] = args[0]
    write_report(results["runs"], results["machine"], opts)


def write_report(records, machine, opts):
    bench = BENCHES[opts.get("--bench", "capture")]
    rows = summarize(records, bench)
    results = Path(opts["--results"])
    results.parent.mkdir(parents=True, exist_ok=True)
    results.write_text(json.dumps({"machine": machine, "summary": rows, "runs": records}, indent=2) + "\n")
    readme = Path(opts["--readme"])
    text = readme.read_text() if readme.exists() else "# Benchmarks\n"
    begin, end = bench["begin"], bench["end"]
    section = f"{begin}\n{table(rows, machine, bench)}\n{end}"
    if begin in text and end in text:
        head, rest = text.split(begin, 1)
        text = head + section + rest.split(end, 1)[1]
    else:
        text = text.rstrip("\n") + "\n\n" + bench["heading"] + "\n\n" + section + "\n"
    readme.write_text(text)
    print(table(rows, machine, bench))


def main():
    if len(sys.argv) < 3:
        print(__doc__, file=sys.stderr)
        sys.exit(2)
    {"record": cmd_record, "report": cmd_report, "rerender": cmd_rerender}[sys.argv[1]](sys.argv[2:])


if __name__ == "__main__":
    main()
