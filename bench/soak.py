#!/usr/bin/python3
"""make soak: gen -> switch -> recv for 30 minutes, with a port flapped every minute and the
flows changed every second, then every packet accounted for by reason and every frame audit
balanced. Not part of make test (it takes half an hour); its result is committed under
bench/results/ and bench/SOAK.md.

Four namespaces, made here and removed on every exit: host A (gen, CPU 0), host B (recv,
CPU 0), host C (a third port, for floods), and the switch between them (CPU 1) with
`in_port=1,actions=output:2` over its learning default. First the rate: 10-second trials at
rising rates, then halving the step between the last that lost nothing and the first that
lost; the soak runs at the highest rate that lost nothing. Then the soak itself:
- every FLAP_EVERY seconds the switch's side of B's link goes down for FLAP_DOWN seconds
  (what is meant for port 2 meanwhile is counted as link_down);
- every second a flow changes: a rule that matches nothing of the load is added or deleted
  in turn (the load's cached flows stay), and every tenth second the forwarding rule is
  modified to itself (the load's cached flows go: it is decided afresh).
At the end: each of A's frames reached port 1 or was counted at port 1 by reason (or by A's
veth, dropped on sending); each was sent out of port 2 or counted there by reason; B
received exactly what port 2 sent, less what the veths of B's link counted as dropped (its
switch end drops what is sent as the link goes down); recv's lost sequence numbers are
exactly those. Environment: SOAK_SECONDS (1800), SOAK_RATE (pps;
skips the search), FLAP_EVERY (60), FLAP_DOWN (5).
"""

import datetime
import json
import os
import signal
import sys
import tempfile
import time

from benchlib import machine, sh, spawn, stop, stop_all, wait_for, ws_json

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
WS = os.path.join(ROOT, "target", "release", "wirespeed")
SECONDS = float(os.environ.get("SOAK_SECONDS", "1800"))
FLAP_EVERY = float(os.environ.get("FLAP_EVERY", "60"))
FLAP_DOWN = float(os.environ.get("FLAP_DOWN", "5"))
TRIAL_SECONDS = 10
LOAD_CPU, SWITCH_CPU = "0", "1"
P = f"wsk{os.getpid() % 100000}"
HOSTS = [P + "a", P + "b", P + "c"]
PORTS = [P + "p0", P + "p1", P + "p2"]
MID = P + "m"
FORWARD = "in_port=1,actions=output:2"
UNRELATED = "priority=200,udp,tp_dst=7,actions=drop"


def log(msg):
    print(f"soak: {msg}", file=sys.stderr, flush=True)


def setup():
    for ns in [MID, *HOSTS]:
        sh("ip", "netns", "add", ns)
        for knob in ["net.ipv6.conf.all.disable_ipv6=1", "net.ipv6.conf.default.disable_ipv6=1"]:
            sh("ip", "netns", "exec", ns, "sysctl", "-qw", knob)
    for host, port in zip(HOSTS, PORTS):
        sh("ip", "link", "add", host, "netns", host, "type", "veth", "peer", "name", port,
           "netns", MID)
        sh("ip", "-n", host, "link", "set", host, "up")
        sh("ip", "-n", MID, "link", "set", port, "up")


def teardown():
    stop_all()
    for ns in [*HOSTS, MID]:
        sh("ip", "netns", "del", ns, check=False)


def veth_drops(ns, dev):
    """rx_dropped and tx_dropped of one veth end."""
    s = json.loads(sh("ip", "-n", ns, "-s", "-j", "link", "show", "dev", dev))[0]["stats64"]
    return {"rx": s["rx"]["dropped"], "tx": s["tx"]["dropped"]}


def ctl(sock, *args, check=True):
    return sh(WS, "ctl", "--ctl", sock, *args, check=check)


class Run:
    """The switch, recv and gen of one run, their outputs in `tmp`."""

    def __init__(self, tmp, tag):
        self.sock = os.path.join(tmp, f"{tag}.sock")
        self.out = {k: os.path.join(tmp, f"{tag}-{k}.txt") for k in ["switch", "recv", "gen"]}
        ports = [a for i, p in enumerate(PORTS) for a in ["--port", f"{i + 1}=xdp:{p}"]]
        self.switch = spawn(MID, SWITCH_CPU, [WS, "switch", *ports, "--ctl", self.sock,
                                              "--json"], open(self.out["switch"], "w"))
        wait_for(self.out["switch"], " ready ", self.switch)
        ctl(self.sock, "add-flow", FORWARD)
        self.recv = spawn(HOSTS[1], LOAD_CPU, [WS, "recv", "--port", f"xdp:{HOSTS[1]}",
                                               "--json", "-q"], open(self.out["recv"], "w"))
        wait_for(self.out["recv"], " ready ", self.recv)
        self.mac_b = sh("ip", "netns", "exec", HOSTS[1], "cat",
                        f"/sys/class/net/{HOSTS[1]}/address").strip()

    def send(self, rate, seconds):
        self.gen = spawn(HOSTS[0], LOAD_CPU, [WS, "gen", "--port", f"xdp:{HOSTS[0]}", "--rate",
                                              str(rate), "--duration", str(seconds),
                                              "--dst-mac", self.mac_b, "--json", "-q"],
                         open(self.out["gen"], "w"))

    def finish(self):
        """Waits for gen, lets the last frames land, stops recv and the switch: their JSON."""
        self.gen.wait()
        time.sleep(0.5)
        gen = ws_json(self.out["gen"])
        stop(self.recv)
        stop(self.switch)
        return gen, ws_json(self.out["recv"]), ws_json(self.out["switch"])


def lossless(tmp, rate, trials):
    """One trial: did rate go through with nothing lost anywhere? Noted in `trials`."""
    run = Run(tmp, f"trial{rate}")
    run.send(rate, TRIAL_SECONDS)
    gen, recv, switch = run.finish()
    lost = sum(g["lost"] for g in recv["generators"])
    received = sum(g["received"] for g in recv["generators"])
    drops = sum(sum(p["drops"].values()) for p in switch["ports"])
    ok = received == gen["packets"] and lost == 0 and drops == 0 and gen["rate_reached"]
    log(f"trial {rate} pps: sent {gen['packets']}, received {received}, lost {lost}, "
        f"switch drops {drops}, rate reached {gen['rate_reached']}: {'ok' if ok else 'loss'}")
    trials.append((rate, ok))
    return ok


def find_rate(tmp, trials):
    """Doubles from 100,000 pps until a trial loses, then halves the step between the last
    lossless rate and the first lossy one down to an eighth of the rate."""
    rate, best, worst = 100_000, None, None
    while worst is None and rate <= 4_000_000:
        if lossless(tmp, rate, trials):
            best, rate = rate, rate * 2
        else:
            worst = rate
    if best is None:
        raise RuntimeError("even 100,000 pps lost packets")
    while worst is not None and worst - best > max(best // 8, 25_000):
        mid = (best + worst) // 2
        if lossless(tmp, mid, trials):
            best = mid
        else:
            worst = mid
    return best


def veth_ends():
    """The drop counters of the four veth ends the load crosses."""
    return {"A": veth_drops(HOSTS[0], HOSTS[0]), "switch port 1": veth_drops(MID, PORTS[0]),
            "switch port 2": veth_drops(MID, PORTS[1]), "B": veth_drops(HOSTS[1], HOSTS[1])}


def soak(tmp, rate):
    # The veths' counters run from their creation: the rate trials' drops are taken off.
    before = veth_ends()
    run = Run(tmp, "soak")
    run.send(rate, SECONDS)
    start = time.time()
    flaps, changes, next_flap = 0, 0, start + FLAP_EVERY
    unrelated_in = False
    while run.gen.poll() is None:
        time.sleep(1)
        changes += 1
        if changes % 10 == 0:
            ctl(run.sock, "mod-flows", FORWARD)
        elif unrelated_in:
            ctl(run.sock, "del-flows", "udp,tp_dst=7")
            unrelated_in = False
        else:
            ctl(run.sock, "add-flow", UNRELATED)
            unrelated_in = True
        if time.time() >= next_flap:
            sh("ip", "-n", MID, "link", "set", PORTS[1], "down")
            time.sleep(FLAP_DOWN)
            sh("ip", "-n", MID, "link", "set", PORTS[1], "up")
            flaps += 1
            next_flap += FLAP_EVERY
            ports = ctl(run.sock, "dump-ports", "2")
            log(f"{time.time() - start:.0f} s: flap {flaps} done; port 2: "
                f"{' '.join(ports.split())[:160]}")
    after = veth_ends()
    veth = {end: {k: after[end][k] - before[end][k] for k in ("rx", "tx")} for end in after}
    gen, recv, switch = run.finish()
    return account(rate, gen, recv, switch, flaps, changes, veth)


def account(rate, gen, recv, switch, flaps, changes, veth):
    """Every packet by where it ended, and the checks that they add up."""
    sent = gen["packets"]
    # A's stack sends nothing (no address, no IPv6): what A's veth dropped sending was A's.
    drops_a = veth["A"]["tx"]
    drops_m = sum(veth["switch port 2"].values())
    drops_b = sum(veth["B"].values())
    p1, p2 = switch["ports"][0], switch["ports"][1]
    p1_drops = {k: v for k, v in p1["drops"].items() if v}
    p2_drops = {k: v for k, v in p2["drops"].items() if v}
    g = recv["generators"][0] if recv["generators"] else {"received": 0, "lost": 0}
    checks = {
        "every frame A sent reached port 1, or was counted there or by A's veth":
            p1["rx_packets"] + sum(p1_drops.values()) + drops_a == sent,
        "each was sent out of port 2 or counted there":
            p2["tx_packets"] + sum(p2_drops.values()) == p1["rx_packets"],
        "B received what port 2 sent, less B's veth drops":
            g["received"] + drops_b + drops_m == p2["tx_packets"],
        "recv's lost are exactly those counted":
            g["lost"] == sent - g["received"] and g["duplicated"] == 0,
        "frame audits balance": switch["frames"]["balanced"] and gen["frames"]["balanced"]
        and recv["frames"]["balanced"],
    }
    return {
        "rate_pps": rate, "seconds": gen["seconds"], "flaps": flaps, "flow_changes": changes,
        "sent": sent, "port1_rx": p1["rx_packets"], "port2_tx": p2["tx_packets"],
        "port1_drops": p1_drops, "port2_drops": p2_drops,
        "received": g["received"], "lost": g["lost"],
        "duplicated": g.get("duplicated"), "reordered": g.get("reordered"),
        "veth_dropped": veth,
        "bridge_drops": switch["bridge_drops"], "switch_frames": switch["frames"],
        "latency_ns": g.get("latency_ns"), "checks": checks,
        "passed": all(checks.values()),
    }


def by_reason(drops):
    return ", ".join(f"{k} {v:,}" for k, v in drops.items()) or "none"


def write(result):
    day = datetime.date.today().isoformat()
    os.makedirs(os.path.join(ROOT, "bench", "results"), exist_ok=True)
    path = os.path.join(ROOT, "bench", "results", f"{day}-soak.json")
    with open(path, "w") as f:
        json.dump(result, f, indent=1)
    s = result["soak"]
    lines = [
        "# Soak: gen -> switch -> recv, a port flapped, flows changing",
        "",
        "`make soak` (bench/soak.py). Four namespaces: host A runs `gen` (CPU 0), host B `recv`",
        "(CPU 0), host C is a third port, and `wirespeed switch` (CPU 1) forwards with",
        f"`{FORWARD}`. Every {FLAP_EVERY:.0f} s the switch's side of B's link goes down for",
        f"{FLAP_DOWN:.0f} s; every second a flow changes (an unrelated rule added or deleted in",
        "turn, which leaves the load's cached flows; the forwarding rule modified to itself every",
        "tenth second, which takes them). The rate is the highest of 10-second trials that lost nothing.",
        "",
        f"Measured {day} on {result['machine']['cpu']}, Linux {result['machine']['kernel']}, "
        f"{result['machine']['cpus']} CPUs.",
        "",
        "| | |",
        "| --- | --- |",
        f"| rate | {s['rate_pps']:,} pps for {s['seconds']:.0f} s |",
        f"| flaps, flow changes | {s['flaps']}, {s['flow_changes']} |",
        f"| sent by A | {s['sent']:,} |",
        f"| received on port 1 | {s['port1_rx']:,} |",
        f"| counted at port 1 | {by_reason(s['port1_drops'])} |",
        f"| sent out of port 2 | {s['port2_tx']:,} |",
        f"| counted at port 2 | {by_reason(s['port2_drops'])} |",
        f"| received by B | {s['received']:,} (lost {s['lost']:,}, duplicated {s['duplicated']}) |",
        "| veths' own drops (rx, tx) | "
        + "; ".join(f"{end} {d['rx']:,}, {d['tx']:,}" for end, d in s["veth_dropped"].items())
        + " |",
        "",
        "Checks:",
        "",
    ]
    lines += [f"- {'passed' if ok else 'FAILED'}: {name}" for name, ok in s["checks"].items()]
    lines += ["", "Trials (pps: lossless):", ""]
    lines += [f"- {r:,}: {'yes' if ok else 'no'}" for r, ok in result["trials"]]
    with open(os.path.join(ROOT, "bench", "SOAK.md"), "w") as f:
        f.write("\n".join(lines) + "\n")
    log(f"wrote {path} and bench/SOAK.md")


def main():
    if os.geteuid() != 0:
        sys.exit("make soak: needs root (namespaces, veths, XDP)")
    trials = []
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    with tempfile.TemporaryDirectory(prefix="wirespeed-soak-") as tmp:
        try:
            setup()
            if "SOAK_RATE" in os.environ:
                rate = int(os.environ["SOAK_RATE"])
            else:
                rate = find_rate(tmp, trials)
            log(f"soaking at {rate} pps for {SECONDS:.0f} s")
            result = {"machine": machine(load=LOAD_CPU, switch=SWITCH_CPU),
                      "trials": trials, "soak": soak(tmp, rate)}
        finally:
            teardown()
    write(result)
    for name, ok in result["soak"]["checks"].items():
        log(f"{'passed' if ok else 'FAILED'}: {name}")
    sys.exit(0 if result["soak"]["passed"] else 1)


if __name__ == "__main__":
    main()
