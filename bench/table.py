#!/usr/bin/env python3
"""Tables for scripts/demo.sh and bench/run.sh, from the JSON that `wirespeed bench --json` prints.

  table.py record RECORDS key=value...      append one run to RECORDS (JSON lines); values
                                            that name a file of JSON (measured=, load=, sink=)
                                            are read in
  table.py demo RECORDS                     print the demo's table
  table.py report RECORDS --results F --readme R --machine M.json
                                            write bench/results/<date>.json (raw runs, medians,
                                            goals, machine) and the table in bench/README.md

Standard library only.
"""

import json
import statistics
import sys
from pathlib import Path

from benchlib import steady

BACKEND = {"xdp": "AF_XDP", "packet": "AF_PACKET", "kernel": "XDP (kernel)"}
BEGIN = "<!-- results:begin (bench/run.sh writes this part) -->"
END = "<!-- results:end -->"


def load_json(path):
    try:
        text = Path(path).read_text().strip()
    except OSError:
        return None
    for line in text.splitlines():
        line = line.strip()
        if line.startswith("{"):
            try:
                return json.loads(line)
            except json.JSONDecodeError:
                return None
    return None


def cmd_record(args):
    out, pairs = args[0], args[1:]
    rec = {}
    for p in pairs:
        key, _, value = p.partition("=")
        if key in ("measured", "load", "sink"):
            rec[key] = load_json(value) if value else None
        elif key in ("size", "run"):
            rec[key] = int(value)
        elif key in ("cpus", "steal"):
            rec[key] = dict(kv.split(":", 1) for kv in value.split(",") if kv)
            rec[key] = {k: int(v) for k, v in rec[key].items()}
        else:
            rec[key] = value or None
    m, load, sink = rec.get("measured"), rec.get("load"), rec.get("sink")
    rec["ok"] = m is not None and not rec.get("error")
    rec["mpps"] = m["mpps"] if m else None
    if m and rec.get("kind") == "receive" and m.get("per_second_mpps"):
        # A receiver is ready before the load sends: its steady rate, as bench-peers takes it.
        rec["whole_run_mpps"] = m["mpps"]
        rec["mpps"] = steady(m["per_second_mpps"], "receiver")
    rec["xdp_mode"] = m["xdp_mode"] if m else None
    rec["load_mpps"] = load["mpps"] if load else None
    if rec.get("kind") == "txpush":
        # What arrived: the sink's count over the sender's time.
        if m and sink and m["seconds"] > 0:
            rec["received_mpps"] = sink["packets"] / m["seconds"] / 1e6
            rec["received_packets"] = sink["packets"]
            rec["sent_packets"] = m["packets"]
        else:
            rec["received_mpps"] = None
        if m is None:
            rec["ok"] = False
    with open(out, "a") as f:
        f.write(json.dumps(rec) + "\n")


def read_records(path):
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


def key_of(r):
    return (r["size"], r["kind"], r["bench"], r["backend"], r.get("engine"))


def fmt(x, digits=3):
    return "-" if x is None else f"{x:.{digits}f}"


def ratio(a, b):
    return f"{a / b:.2f}x" if a is not None and b else "-"


# txpush engines as the tables name them (kernel2: a kernel-engine thread on each CPU).
ENGINE = {"kernel": "kernel (CPU 0)", "kernel2": "kernel, from CPUs 0 and 1 (--cpus 0,1)", "socket": "socket"}


def label(r):
    if r["kind"] == "txpush":
        kernel = r["engine"].startswith("kernel")
        return f"txpush {ENGINE.get(r['engine'], r['engine'])} engine" + ("" if kernel else f" ({r['backend']}:)")
    return r["bench"]


# ---------------------------------------------------------------- demo


def cmd_demo(args):
    recs = read_records(args[0])
    ceiling = next((r["mpps"] for r in recs if r["bench"] == "xdpdrop" and r["ok"]), None)
    packet = {r["bench"]: r["mpps"] for r in recs if r["backend"] == "packet" and r["ok"]}
    rows = [("backend", "mode", "benchmark", "Mpps", "vs AF_PACKET", "vs xdpdrop", "load sent Mpps")]
    for r in recs:
        if not r["ok"]:
            rows.append((BACKEND.get(r["backend"], r["backend"]), "-", r["bench"], "failed", "", "", ""))
            continue
        rows.append(
            (
                BACKEND.get(r["backend"], r["backend"]),
                r["xdp_mode"] or "-",
                r["bench"],
                fmt(r["mpps"]),
                "-" if r["bench"] == "xdpdrop" else ratio(r["mpps"], packet.get(r["bench"])),
                ratio(r["mpps"], ceiling),
                fmt(r["load_mpps"], 2),
            )
        )
    widths = [max(len(str(row[i])) for row in rows) for i in range(len(rows[0]))]
    for n, row in enumerate(rows):
        print("  ".join(str(c).ljust(w) if i < 3 else str(c).rjust(w) for i, (c, w) in enumerate(zip(row, widths))).rstrip())
        if n == 0:
            print("  ".join("-" * w for w in widths))
    for r in recs:
        if not r["ok"]:
            print(f"\n{BACKEND.get(r['backend'], r['backend'])} {r['bench']} failed: {r.get('error') or 'no result'}")


# ---------------------------------------------------------------- benchmark


def summarise(recs):
    groups = {}
    for r in recs:
        groups.setdefault(key_of(r), []).append(r)
    out = []
    for (size, kind, bench, backend, engine), rs in groups.items():
        ok = [r for r in rs if r["ok"] and r["mpps"] is not None]
        vals = [r["mpps"] for r in ok]
        s = {
            "size": size,
            "kind": kind,
            "bench": bench,
            "backend": backend,
            "engine": engine,
            "label": label(rs[0]),
            "xdp_mode": ok[0]["xdp_mode"] if ok else None,
            "runs": len(rs),
            "ok_runs": len(ok),
            "mpps": vals,
            "median": statistics.median(vals) if vals else None,
            "min": min(vals) if vals else None,
            "max": max(vals) if vals else None,
            "errors": sorted({r["error"] for r in rs if r.get("error")}),
        }
        if kind == "txpush":
            rv = [r["received_mpps"] for r in ok if r.get("received_mpps") is not None]
            s["received"] = rv
            s["received_median"] = statistics.median(rv) if rv else None
            s["received_min"] = min(rv) if rv else None
            s["received_max"] = max(rv) if rv else None
        out.append(s)
    return out


def find(meds, size, bench, backend, kind="receive"):
    for m in meds:
        if m["size"] == size and m["bench"] == bench and m["backend"] == backend and m["kind"] == kind:
            return m
    return None


def goals(meds):
    def med(bench, backend):
        m = find(meds, 64, bench, backend)
        return m["median"] if m else None

    xr, pr, ceil, xf = med("rxdrop", "xdp"), med("rxdrop", "packet"), med("xdpdrop", "kernel"), med("l2fwd", "xdp")
    # The best kernel-engine row: one thread, or a thread on each CPU.
    kernel_rows = [m for m in meds if m["size"] == 64 and m["kind"] == "txpush" and m["engine"].startswith("kernel")
                   and m.get("received_median") is not None]
    kt = max(kernel_rows, key=lambda m: m["received_median"], default=None)
    ktr = kt["received_median"] if kt else None
    kts = kt["median"] if kt else None
    kte = f"; {ENGINE[kt['engine']]}" if kt and kt["engine"] != "kernel" else ""

    def goal(name, value, shown, target):
        return {
            "goal": name,
            "value": value,
            "shown": shown,
            "target": target,
            "met": None if value is None else value >= target,
        }

    return [
        goal("AF_XDP rxdrop >= 0.75x xdpdrop (64 B)", xr / ceil if xr and ceil else None,
             f"{xr / ceil:.2f}x ({xr:.2f} / {ceil:.2f} Mpps)" if xr and ceil else "-", 0.75),
        goal("AF_XDP rxdrop >= 2.8x AF_PACKET rxdrop (64 B)", xr / pr if xr and pr else None,
             f"{xr / pr:.2f}x ({xr:.2f} / {pr:.2f} Mpps)" if xr and pr else "-", 2.8),
        goal("kernel-engine txpush >= 13 Mpps into an xdpdrop sink (64 B, received)", ktr,
             f"{ktr:.2f} Mpps received ({kts:.2f} sent{kte})" if ktr is not None and kts is not None else "-", 13.0),
        goal("AF_XDP l2fwd >= 1.9 Mpps (64 B)", xf, f"{xf:.2f} Mpps" if xf else "-", 1.9),
    ]


def spread(m, prefix=""):
    med, lo, hi = m[prefix + "median"], m[prefix + "min"], m[prefix + "max"]
    if med is None:
        return "failed"
    if m["ok_runs"] <= 1:
        return f"{med:.3f}"
    return f"{med:.3f} ({lo:.3f}–{hi:.3f})"


def markdown(doc):
    meds, cfg, mach = doc["medians"], doc["config"], doc["machine"]
    lines = [
        f"Run of {doc['date']}: {cfg['runs']} run(s) of {cfg['duration']} s per cell, median (min–max) in Mpps "
        "(a receiver's run: its steady rate, the median of its per-second rates without the first two and "
        "the last; `whole_run_mpps` in the raw runs is over the whole run); "
        f"kernel {mach['kernel']}, {mach['cpu_model']}, {mach['nproc']} CPUs; "
        f"wirespeed {mach.get('git_rev', '?')}. Raw runs: [`results/{doc['date']}.json`](results/{doc['date']}.json).",
        "",
    ]
    for size in cfg["sizes"]:
        lines += [
            f"### {size}-byte frames: kernel-engine load on CPU 0, receiver on CPU 1",
            "",
            "| benchmark | backend | mode | Mpps | vs AF_PACKET | vs xdpdrop | load sent Mpps |",
            "| --- | --- | --- | ---: | ---: | ---: | ---: |",
        ]
        ceil = find(meds, size, "xdpdrop", "kernel")
        ceil = ceil["median"] if ceil else None
        for m in meds:
            if m["size"] != size or m["kind"] != "receive":
                continue
            base = find(meds, size, m["bench"], "packet")
            base = base["median"] if base else None
            loads = [r["load_mpps"] for r in doc["runs"] if key_of(r) == (size, m["kind"], m["bench"], m["backend"], m["engine"]) and r.get("load_mpps")]
            lines.append(
                f"| {m['bench']} | {BACKEND.get(m['backend'], m['backend'])} | {m['xdp_mode'] or '-'} | {spread(m)} | "
                f"{'-' if m['bench'] == 'xdpdrop' else ratio(m['median'], base)} | {ratio(m['median'], ceil)} | "
                f"{fmt(statistics.median(loads), 2) if loads else '-'} |"
            )
        lines += [
            "",
            f"### {size}-byte frames: txpush alone (sender on CPU 0; the kernel engine also from both CPUs) into an xdpdrop sink (CPU 1)",
            "",
            "| engine | port | sent Mpps | received Mpps |",
            "| --- | --- | ---: | ---: |",
        ]
        for m in meds:
            if m["size"] != size or m["kind"] != "txpush":
                continue
            port = "xdp:" if m["backend"] in ("xdp", "kernel") else "packet:"
            lines.append(f"| {ENGINE.get(m['engine'], m['engine'])} | {port} | {spread(m)} | {spread(m, 'received_') if m['median'] is not None else 'failed'} |")
        lines.append("")
    lines += ["### Goals (issue 2, 64-byte frames)", "", "| goal | measured | |", "| --- | --- | --- |"]
    for g in doc["goals"]:
        met = "not measured" if g["met"] is None else ("met" if g["met"] else "not met")
        lines.append(f"| {g['goal']} | {g['shown']} | {met} |")
    errs = [(m["label"], m["size"], e) for m in meds for e in m["errors"]]
    if errs:
        lines += ["", "Failures:", ""]
        lines += [f"- {lab}, {size} B: {e}" for lab, size, e in errs]
    return "\n".join(lines) + "\n"


def cmd_report(args):
    records = args[0]
    opts = dict(zip(args[1::2], args[2::2]))
    recs = read_records(records)
    machine = json.loads(Path(opts["--machine"]).read_text())
    cfg = machine.pop("config")
    date = machine.pop("date")
    meds = summarise(recs)
    doc = {"date": date, "config": cfg, "machine": machine, "medians": meds, "goals": goals(meds), "runs": recs}
    Path(opts["--results"]).parent.mkdir(parents=True, exist_ok=True)
    Path(opts["--results"]).write_text(json.dumps(doc, indent=1) + "\n")
    table = markdown(doc)
    readme = Path(opts["--readme"])
    text = readme.read_text() if readme.exists() else ""
    if BEGIN in text and END in text:
        head, rest = text.split(BEGIN, 1)
        tail = rest.split(END, 1)[1]
        text = f"{head}{BEGIN}\n{table}{END}{tail}"
    else:
        text = f"{text.rstrip()}\n\n## Results\n\n{BEGIN}\n{table}{END}\n"
    readme.write_text(text)
    print(table)
    print("goals (64 B):")
    for g in doc["goals"]:
        met = "not measured" if g["met"] is None else ("met" if g["met"] else "NOT MET")
        print(f"  {g['goal']}: {g['shown']}: {met}")


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    cmd, args = sys.argv[1], sys.argv[2:]
    {"record": cmd_record, "demo": cmd_demo, "report": cmd_report}.get(cmd, lambda _: sys.exit(__doc__))(args)


if __name__ == "__main__":
    main()
