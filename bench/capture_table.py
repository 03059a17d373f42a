#!/usr/bin/env python3
"""The capture benchmark's records and table (bench/capture.sh).

  capture_table.py record RECORDS key=value...   one capture: tool, size, run, duration,
                                                 written (capinfos' count), out=/err= (the
                                                 tool's output, parsed for its drop count),
                                                 load= (the load's JSON), error=
  capture_table.py report RECORDS --results F --readme R
                                                 bench/results/<date>-capture.json and the
                                                 capture table in bench/README.md
  capture_table.py rerender RESULTS --readme R   the table again from a results file

Standard library only.
"""

import json
import os
import platform
import re
import statistics
import sys
from pathlib import Path

BEGIN = "<!-- capture:begin (bench/capture.sh writes this part) -->"
END = "<!-- capture:end -->"
TOOLS = ["wirespeed", "tcpdump", "netsniff-ng"]


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
    if tool == "tcpdump":
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


def summarize(records):
    rows = []
    for size in sorted({r["size"] for r in records}):
        row = {"size": size}
        for tool in TOOLS:
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
        ws = row["wirespeed"]["written_mpps"]
        for peer in ("tcpdump", "netsniff-ng"):
            p = row[peer]["written_mpps"]
            row[f"ratio_vs_{peer}"] = ws / p if ws and p else None
        rows.append(row)
    return rows


def fmt(v, digits=2):
    return "–" if v is None else f"{v:.{digits}f}"


def table(rows, machine):
    lines = [
        f"Capture to pcap on tmpfs under `txpush --engine kernel` (load on CPU {machine['load_cpu']}, "
        f"capture on CPU {machine['measured_cpu']}), {machine['runs']} run(s) of {machine['duration']} s, "
        f"median (min–max) packets written per second; drops as each tool reports them. "
        f"{machine['date']}, {machine['cpu_model']}, Linux {machine['kernel']}.",
        "",
        "| frame | wirespeed (AF_XDP) | tcpdump -w | netsniff-ng | vs tcpdump | vs netsniff-ng "
        "| drops (ws / tcpdump / netsniff-ng) | load sent, Mpps (ws / tcpdump / netsniff-ng) |",
        "| --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for row in rows:
        cells = []
        for tool in TOOLS:
            t = row[tool]
            cells.append(f"{fmt(t['written_mpps'], 3)} Mpps ({fmt(t['min'], 3)}–{fmt(t['max'], 3)})")
        drops = " / ".join(fmt(row[t]["drops"], 0) for t in TOOLS)
        load = " / ".join(fmt(row[t]["load_mpps"], 2) for t in TOOLS)
        lines.append(
            f"| {row['size']} B | {' | '.join(cells)} | {fmt(row['ratio_vs_tcpdump'])}× | "
            f"{fmt(row['ratio_vs_netsniff-ng'])}× | {drops} | {load} |"
        )
    lines.append("")
    lines.append(
        "On veth the receiving end's kernel work (XDP redirect and copy into the UMEM for "
        "AF_XDP; the socket path into the ring for tcpdump and netsniff-ng) runs on the load's "
        "CPU, so the load sends only as fast as that path takes packets: the last column."
    )
    lines.append("")
    lines.append("Goal: ≥ 2.5× tcpdump and ≥ 2.5× netsniff-ng packets written per second, zero drops, 64-byte frames.")
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
    rows = summarize(records)
    results = Path(opts["--results"])
    results.parent.mkdir(parents=True, exist_ok=True)
    results.write_text(json.dumps({"machine": machine, "summary": rows, "runs": records}, indent=2) + "\n")
    readme = Path(opts["--readme"])
    text = readme.read_text() if readme.exists() else "# Benchmarks\n"
    section = f"{BEGIN}\n{table(rows, machine)}\n{END}"
    if BEGIN in text and END in text:
        head, rest = text.split(BEGIN, 1)
        text = head + section + rest.split(END, 1)[1]
    else:
        text = text.rstrip("\n") + "\n\n## Capture\n\n`bench/capture.sh`: " \
            "wirespeed capture (AF_XDP) against `tcpdump -w` and `netsniff-ng`.\n\n" + section + "\n"
    readme.write_text(text)
    print(table(rows, machine))


def main():
    if len(sys.argv) < 3:
        print(__doc__, file=sys.stderr)
        sys.exit(2)
    {"record": cmd_record, "report": cmd_report, "rerender": cmd_rerender}[sys.argv[1]](sys.argv[2:])


if __name__ == "__main__":
    main()
