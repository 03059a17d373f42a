#!/usr/bin/python3
"""make bench-tunnel: VXLAN encapsulation and decapsulation (KIND=gre: Ethernet over GRE with a
key), wirespeed switch against Open vSwitch's userspace datapath (netdev, afxdp ports, native
userspace tunnelling), same set-up, same run, interleaved.

Three namespaces in a row, made here and removed on every exit:
    A (hosts) --veth a0/m0-- M (the switch under test) --veth m1/b0 (the underlay)-- B (remote)
The underlay's local address is 192.168.77.1/24, the remote VTEP 192.168.77.2 (B's MAC, as a
permanent neighbour for wirespeed, `ovs-appctl tnl/arp/set` for Open vSwitch: no packet waits
on ARP). VNI 42, UDP port 4789.
  encap: the kernel engine (`wirespeed gen --engine kernel`, one IPv4/UDP frame) sends plain
      frames from A (CPU 0) into the host port; the switch (CPU 1) pushes
      Ethernet/IPv4/UDP/VXLAN and sends them on the underlay; `wirespeed bench xdpdrop` on B's
      end counts what arrives.
  decap: the kernel engine replays one VXLAN frame (`gen --pcap`: outer Ethernet to the
      underlay's MAC, IPv4 192.168.77.2 -> 192.168.77.1, UDP 4789, VNI 42, around the same
      plain frame) from B (CPU 0) into the underlay; the switch pops the outer headers and
      sends the inner frame out of the host port; xdpdrop on A's end counts.
wirespeed: `switch --port 1=xdp:m0 --port 2=xdp:m1 --port 10=vxlan:remote_ip=192.168.77.2,key=42`
with in_port=1 -> 10 and in_port=10 -> 1, the address on m1, `--pmd-cpus 1`.
Open vSwitch (Documentation/howto/userspace-tunneling.rst): br-int (netdev) with m0 (afxdp,
ofport 1) and vxlan0 (remote_ip, key=42, ofport 10), flows in_port=1 -> 10, in_port=10 -> 1;
br-phy (netdev, its MAC set to m1's so both switches own the same addresses) with m1 (afxdp),
the address on br-phy's LOCAL port, flows in_port=m1 -> LOCAL and LOCAL -> m1 (what NORMAL
does with two ports, without its learning); pmd-cpu-mask 0x2. Before each measured run a few
frames go through the set-up under test and the sink's capture is checked (encap: outer
addresses, UDP 4789, VNI 42, the inner frame as sent; decap: the inner frame as sent), and for
Open vSwitch the datapath's flows must hold tnl_push / tnl_pop.
On veth the receiving end's kernel work runs on the sender's CPU: the load's frames enter M's
ports on CPU 0, the switch's own sends are received (by the sink's XDP program) on CPU 1.
Figures: the sink's steady rate (xdpdrop's), and the switch process's user CPU per packet at
/proc/cpuinfo's clock (both switches busy-poll, so it is mostly 1 CPU / rate).
Writes bench/results/<date>-tunnel.json and bench/TUNNEL.md (KIND=gre: <date>-tunnel-gre.json
and bench/TUNNEL-GRE.md; key 42 in the GRE header, no checksum). Environment: RUNS (3), DURATION
(8), SIZES ("64 1500": the plain frame's size on the wire; the underlay's MTU is 1600 so a
1500-byte frame fits once encapsulated), ONLY (regex of row names, e.g. "encap").
`bench/tunnel.py --markdown bench/results/DATE-tunnel.json` rewrites TUNNEL.md from a run's record
(a GRE run's record names its kind).
"""

import datetime
import json
import os
import re
import signal
import statistics
import struct
import subprocess
import sys
import tempfile
import time

import benchlib
from benchlib import cpu_mhz, interleaved, sh, spawn, stop, stop_all, wait_for, ws_json

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
WS = os.path.join(ROOT, "target", "release", "wirespeed")
STAGES = os.path.join(ROOT, "target", "release", "examples", "stages")
RUNS = int(os.environ.get("RUNS", "3"))
DURATION = float(os.environ.get("DURATION", "8"))
SIZES = [int(s) for s in os.environ.get("SIZES", "64 1500").split()]
ONLY = re.compile(os.environ.get("ONLY", "."))
KIND = os.environ.get("KIND", "vxlan")
LOAD_CPU, SWITCH_CPU, SINK_CPU = "0", "1", "0"
P = f"wst{os.getpid() % 100000}"
NS = {"a": P + "a", "m": P + "m", "b": P + "b"}
IF = {"a": P + "a0", "m0": P + "m0", "m1": P + "m1", "b": P + "b0"}
LOCAL_IP, REMOTE_IP, PREFIX_LEN, VNI, VXLAN_PORT = "192.168.77.1", "192.168.77.2", 24, 42, 4789
UNDERLAY_MTU = 1600
# The plain frame (what gen builds by default): to a MAC nobody owns, 10.0.0.1:1024 -> 10.0.0.2:9.
INNER_DST_MAC, INNER_SRC_MAC = "02:00:00:00:00:02", "02:00:00:00:00:01"
WS_TOOL, OVS_TOOL = "wirespeed switch", "Open vSwitch afxdp"
OVS_DIR = None
# User-space and kernel seconds of the switch process over the last measured window, and the
# load's own rate (what it sent, Mpps).
LAST_USER_S, LAST_SYS_S, LAST_SENT = [], [], []
# Per case label: the load's sent Mpps and the switch's kernel cycles per packet of each run.
EXTRA = {}


def log(msg):
    print(f"bench-tunnel: {msg}", file=sys.stderr, flush=True)


def inm(*argv, **kw):
    return sh("ip", "netns", "exec", NS["m"], *argv, **kw)


def mac_of(ns, dev):
    return open_in(ns, f"/sys/class/net/{dev}/address").strip()


def open_in(ns, path):
    return sh("ip", "netns", "exec", ns, "cat", path)


def cpu_seconds(pid):
    """User-space and kernel CPU seconds of a process so far (all its threads)."""
    fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return int(fields[11]) / os.sysconf("SC_CLK_TCK"), int(fields[12]) / os.sysconf("SC_CLK_TCK")


def setup():
    benchlib.three_in_a_row(NS, IF)
    for ns, dev in ((NS["m"], IF["m1"]), (NS["b"], IF["b"])):
        sh("ip", "-n", ns, "link", "set", dev, "mtu", str(UNDERLAY_MTU))


def cleanup():
    stop_all()
    ovs_stop()
    for ns in NS.values():
        sh("ip", "netns", "del", ns, check=False)


# ---------------------------------------------------------------- frames

def mac_bytes(mac):
    return bytes(int(x, 16) for x in mac.split(":"))


def ip_checksum(hdr):
    s = sum(struct.unpack(f"!{len(hdr) // 2}H", hdr))
    while s >> 16:
        s = (s & 0xFFFF) + (s >> 16)
    return (~s) & 0xFFFF


def ipv4(src, dst, payload, ident=0, proto=17):
    hdr = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + len(payload), ident, 0x4000, 64, proto, 0,
                      bytes(map(int, src.split("."))), bytes(map(int, dst.split("."))))
    return hdr[:10] + struct.pack("!H", ip_checksum(hdr)) + hdr[12:] + payload


def inner_frame(size):
    """The plain frame of `size` bytes on the wire (FCS included): Ethernet/IPv4/UDP, UDP
    checksum 0, a counting payload."""
    body = size - 4 - 14 - 20 - 8
    payload = bytes(i & 0xFF for i in range(body))
    udp = struct.pack("!HHHH", 1024, 9, 8 + len(payload), 0) + payload
    return mac_bytes(INNER_DST_MAC) + mac_bytes(INNER_SRC_MAC) + b"\x08\x00" + ipv4("10.0.0.1", "10.0.0.2", udp)


def tunnel_frame(size, dst_mac, src_mac):
    """The plain frame of `size` as the remote end sends it through the tunnel of KIND."""
    inner = inner_frame(size)
    outer = mac_bytes(dst_mac) + mac_bytes(src_mac) + b"\x08\x00"
    if KIND == "gre":
        gre = struct.pack("!HHI", 0x2000, 0x6558, VNI) + inner
        return outer + ipv4(REMOTE_IP, LOCAL_IP, gre, proto=47)
    vx = struct.pack("!BBHI", 0x08, 0, 0, VNI << 8) + inner
    udp = struct.pack("!HHHH", 49152, VXLAN_PORT, 8 + len(vx), 0) + vx
    return outer + ipv4(REMOTE_IP, LOCAL_IP, udp)


def outer_len(kind=KIND):
    """What a tunnel of `kind` adds in front of a frame: Ethernet, IPv4, then UDP and VXLAN,
    or GRE with its key."""
    return 42 if kind == "gre" else 50


def write_pcap(path, frames):
    with open(path, "wb") as f:
        f.write(struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 65535, 1))
        for i, fr in enumerate(frames):
            f.write(struct.pack("<IIII", i, 0, len(fr), len(fr)) + fr)


def read_pcap(path):
    data = open(path, "rb").read()
    magic = struct.unpack("<I", data[:4])[0]
    end = "<" if magic in (0xA1B2C3D4, 0xA1B23C4D) else ">"
    off, frames = 24, []
    while off + 16 <= len(data):
        incl = struct.unpack(end + "IIII", data[off:off + 16])[2]
        frames.append(data[off + 16:off + 16 + incl])
        off += 16 + incl
    return frames


# ---------------------------------------------------------------- the switches

def ovs_env():
    env = dict(os.environ)
    for k in ("OVS_RUNDIR", "OVS_DBDIR", "OVS_LOGDIR", "OVS_SYSCONFDIR"):
        env[k] = OVS_DIR
    return env


def vsctl(*argv):
    return inm("ovs-vsctl", f"--db=unix:{OVS_DIR}/db.sock", *argv, env=ovs_env())


def appctl(*argv):
    return inm("ovs-appctl", *argv, env=ovs_env())


def ovs_pid():
    return int(open(f"{OVS_DIR}/ovs-vswitchd.pid").read().strip())


def ovs_start():
    """ovsdb-server and ovs-vswitchd of our own, inside M, with a private run directory, set
    up for native userspace tunnelling."""
    global OVS_DIR
    OVS_DIR = tempfile.mkdtemp(prefix="wirespeed-ovs.")
    inm("/usr/share/openvswitch/scripts/ovs-ctl", "--no-monitor", "--system-id=random", "start", env=ovs_env())
    vsctl("set", "Open_vSwitch", ".", f"other_config:pmd-cpu-mask={1 << int(SWITCH_CPU):#x}")
    vsctl("add-br", "br-int", "--", "set", "bridge", "br-int", "datapath_type=netdev")
    vsctl("add-port", "br-int", IF["m0"], "--", "set", "interface", IF["m0"], "type=afxdp", "ofport_request=1")
    vsctl("add-port", "br-int", "tun0", "--", "set", "interface", "tun0", f"type={KIND}",
          f"options:remote_ip={REMOTE_IP}", f"options:key={VNI}", "ofport_request=10")
    vsctl("add-br", "br-phy", "--", "set", "bridge", "br-phy", "datapath_type=netdev",
          f"other_config:hwaddr={mac_of(NS['m'], IF['m1'])}")
    vsctl("add-port", "br-phy", IF["m1"], "--", "set", "interface", IF["m1"], "type=afxdp", "ofport_request=2")
    inm("ip", "link", "set", "br-phy", "mtu", str(UNDERLAY_MTU))
    inm("ip", "addr", "add", f"{LOCAL_IP}/{PREFIX_LEN}", "dev", "br-phy")
    inm("ip", "link", "set", "br-phy", "up")
    of = lambda *a: inm("ovs-ofctl", *a, env=ovs_env())
    of("del-flows", "br-int")
    of("add-flow", "br-int", "in_port=1,actions=output:10")
    of("add-flow", "br-int", "in_port=10,actions=output:1")
    of("del-flows", "br-phy")
    of("add-flow", "br-phy", "in_port=2,actions=LOCAL")
    of("add-flow", "br-phy", "in_port=LOCAL,actions=output:2")
    # The route to the remote (the kernel's, which ovs-vswitchd reads, is there once br-phy
    # has its address; added by hand if it did not take it) and the remote's MAC.
    deadline = time.time() + 10
    while REMOTE_IP not in appctl("ovs/route/lookup", REMOTE_IP) or "br-phy" not in appctl("ovs/route/lookup", REMOTE_IP):
        if time.time() > deadline:
            appctl("ovs/route/add", f"{REMOTE_IP}/{PREFIX_LEN}", "br-phy")
            break
        time.sleep(0.2)
    appctl("tnl/arp/set", "br-phy", REMOTE_IP, mac_of(NS["b"], IF["b"]))
    time.sleep(1)


def ovs_stop():
    global OVS_DIR
    if OVS_DIR:
        inm("/usr/share/openvswitch/scripts/ovs-ctl", "stop", env=ovs_env(), check=False)
        # The bridges' internal (tap) devices stay otherwise.
        for br in ("br-int", "br-phy"):
            inm("ip", "link", "del", br, check=False)
        sh("rm", "-rf", OVS_DIR, check=False)
        OVS_DIR = None


def ws_up():
    inm("ip", "addr", "add", f"{LOCAL_IP}/{PREFIX_LEN}", "dev", IF["m1"])
    inm("ip", "neigh", "replace", REMOTE_IP, "lladdr", mac_of(NS["b"], IF["b"]), "dev", IF["m1"], "nud", "permanent")


def ws_down():
    inm("ip", "neigh", "del", REMOTE_IP, "dev", IF["m1"], check=False)
    inm("ip", "addr", "flush", "dev", IF["m1"], check=False)


def ws_argv(tmp):
    flows = os.path.join(tmp, "tunnel-flows.txt")
    with open(flows, "w") as f:
        f.write("in_port=1,actions=output:10\nin_port=10,actions=output:1\npriority=0,actions=drop\n")
    return [WS, "switch", "--port", f"1=xdp:{IF['m0']}", "--port", f"2=xdp:{IF['m1']}", "--port",
            f"10={KIND}:remote_ip={REMOTE_IP},key={VNI}", "--flows", flows, "--ctl", os.path.join(tmp, "ctl.sock"),
            "--pmd-cpus", SWITCH_CPU, "--json"]


# ---------------------------------------------------------------- directions

def direction(name, size, tmp):
    """(namespace, interface) of the load, of the sink, the load's argv for `seconds`, the
    frames the check sends (a pcap) and what the sink must see of each."""
    inner = inner_frame(size)
    if name == "encap":
        pcap = os.path.join(tmp, f"plain-{size}.pcap")
        write_pcap(pcap, [inner])
        load_ns, load_if, sink_ns, sink_if = NS["a"], IF["a"], NS["b"], IF["b"]
    else:
        pcap = os.path.join(tmp, f"{KIND}-{size}.pcap")
        write_pcap(pcap, [tunnel_frame(size, mac_of(NS["m"], IF["m1"]), mac_of(NS["b"], IF["b"]))])
        load_ns, load_if, sink_ns, sink_if = NS["b"], IF["b"], NS["a"], IF["a"]

    def load(seconds):
        return [WS, "gen", "--engine", "kernel", "--port", f"xdp:{load_if}", "--pcap", pcap, "--fast",
                "--loop", "0", "--duration", str(seconds), "--quiet"]

    return load_ns, load_if, sink_ns, sink_if, load, pcap, inner


def check_frames(name, frames, inner, want):
    """What the sink captured of the check's frames is what the direction must make."""
    bad = []
    good = 0
    for fr in frames:
        if name == "decap":
            ok = fr[:len(inner)] == inner and not any(fr[len(inner):])
            why = "not the inner frame"
        else:
            eth, ip, udp, vx = fr[:14], fr[14:34], fr[34:42], fr[42:50]
            checks = [
                (eth[12:14] == b"\x08\x00", "not IPv4"),
                (ip[12:16] == bytes(map(int, LOCAL_IP.split("."))), "outer source"),
                (ip[16:20] == bytes(map(int, REMOTE_IP.split("."))), "outer destination"),
                (fr[outer_len():outer_len() + len(inner)] == inner, "inner frame"),
            ]
            if KIND == "gre":
                checks += [
                    (ip[9] == 47, "not GRE"),
                    (fr[34:42] == struct.pack("!HHI", 0x2000, 0x6558, VNI), "GRE header and key"),
                ]
            else:
                checks += [
                    (ip[9] == 17, "not UDP"),
                    (struct.unpack("!H", udp[2:4])[0] == VXLAN_PORT, "UDP port"),
                    (vx[0] & 0x08 and struct.unpack("!I", vx[4:8])[0] >> 8 == VNI, "VXLAN VNI"),
                ]
            fails = [w for ok_, w in checks if not ok_]
            ok, why = not fails, ", ".join(fails)
        if ok:
            good += 1
        else:
            bad.append(why)
    if good < want:
        raise RuntimeError(f"{name} check: {good} of {len(frames)} captured frames right (want {want}); "
                           f"wrong: {sorted(set(bad))[:3]}")


def check(name, d, tmp):
    """A handful of frames through the set-up, captured at the sink and checked."""
    load_ns, load_if, sink_ns, sink_if, _, pcap, inner = d
    cap = os.path.join(tmp, "check.pcap")
    with open(os.path.join(tmp, "tcpdump"), "w") as out:
        what = "ip proto 47" if KIND == "gre" and name == "encap" else "udp"
        td = spawn(sink_ns, SINK_CPU, ["tcpdump", "-i", sink_if, "-nn", "-U", "-s", "2000", "-w", cap,
                                       "-c", "10", what], out)
        wait_for(os.path.join(tmp, "tcpdump"), r"listening on", td)
        for _ in range(3):
            sh("ip", "netns", "exec", load_ns, WS, "gen", "--port", f"xdp:{load_if}", "--pcap", pcap, "--fast",
               "--loop", "10", "--quiet")
            try:
                td.wait(2)
                break
            except subprocess.TimeoutExpired:
                pass
        stop(td, signal.SIGINT, timeout=3)
    frames = read_pcap(cap) if os.path.exists(cap) else []
    check_frames(name, frames, inner, min(5, max(1, len(frames))) if frames else 1)


def measure(name, size, tool, tmp):
    """Mpps arriving at the sink while the load runs through `tool` in direction `name`."""
    d = direction(name, size, tmp)
    load_ns, _, sink_ns, sink_if, load, _, _ = d
    spath, wpath, lpath = (os.path.join(tmp, n) for n in ("sink", "switch", "load"))
    w = None
    try:
        with open(spath, "w") as sout, open(wpath, "w") as wout, open(lpath, "w") as lout:
            if tool == WS_TOOL:
                ws_up()
                w = spawn(NS["m"], SWITCH_CPU, ws_argv(tmp), wout)
                wait_for(wpath, r" ready", w)
                pid = w.pid
            else:
                ovs_start()
                pid = ovs_pid()
            check(name, d, tmp)
            gen = spawn(load_ns, LOAD_CPU, load(DURATION + 4), lout)
            time.sleep(2)
            if gen.poll() is not None:
                raise RuntimeError(f"load exited: {open(lpath).read()[-300:]}")
            if tool == OVS_TOOL:
                flows = appctl("dpctl/dump-flows")
                want = "tnl_push" if name == "encap" else "tnl_pop"
                if want not in flows:
                    raise RuntimeError(f"Open vSwitch's datapath flows have no {want}: {flows.strip()[-300:]}")
            before = cpu_seconds(pid)
            sink = spawn(sink_ns, SINK_CPU, [WS, "bench", "xdpdrop", "--port", f"xdp:{sink_if}", "--duration",
                                            str(DURATION), "--quiet", "--json"], sout)
            sink.wait(DURATION + 30)
            after = cpu_seconds(pid)
            LAST_USER_S.append(after[0] - before[0])
            LAST_SYS_S.append(after[1] - before[1])
            mpps = ws_json(spath)["mpps"]
            gen.wait(DURATION + 30)
            sent = re.findall(r"= ([0-9.]+) Mpps", open(lpath).read())
            LAST_SENT.append(float(sent[-1]) if sent else None)
            if w is not None:
                stop(w, signal.SIGINT)
                tun = ws_json(wpath).get("tunnels", [{}])[0]
                if not tun.get("encap_packets" if name == "encap" else "decap_packets"):
                    raise RuntimeError(f"wirespeed's tunnel counters show no {name}: {tun}")
    finally:
        stop_all()
        if tool == WS_TOOL:
            ws_down()
        else:
            ovs_stop()
    return mpps


def builds_running():
    """Processes of a cargo or rustc build (another user's work on this machine skews the
    figures: recorded, not waited for)."""
    names = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            comm = open(f"/proc/{pid}/comm").read().strip()
        except OSError:
            continue
        if comm in ("cargo", "rustc") or comm.startswith("rustc"):
            names.append(comm)
    return names


LOADAVG = []
# Runs during which a build was seen running (at their start or end).
DISTURBED = []


def measured(name, size, tool, tmp):
    def run():
        for acc in (LAST_USER_S, LAST_SYS_S, LAST_SENT):
            acc.clear()
        if builds_running():
            DISTURBED.append(f"{size} {name} {tool}")
        mpps = measure(name, size, tool, tmp)
        if builds_running() and (not DISTURBED or DISTURBED[-1] != f"{size} {name} {tool}"):
            DISTURBED.append(f"{size} {name} {tool}")
        mhz = cpu_mhz()
        per_packet = lambda secs: secs * mhz * 1e6 / (mpps * 1e6 * DURATION) if mpps > 0 and mhz else None
        cycles = per_packet(LAST_USER_S[0]) if LAST_USER_S else None
        extra = EXTRA.setdefault((size, name, tool), {"load_sent_mpps": [], "kernel_cycles_per_packet": []})
        extra["load_sent_mpps"].append(LAST_SENT[0] if LAST_SENT else None)
        sys_cycles = per_packet(LAST_SYS_S[0]) if LAST_SYS_S else None
        extra["kernel_cycles_per_packet"].append(round(sys_cycles) if sys_cycles is not None else None)
        return mpps, cycles
    return run


def main():
    if KIND not in KIND_TEXT:
        sys.exit(f"bench-tunnel: KIND={KIND}: vxlan or gre")
    if len(sys.argv) == 3 and sys.argv[1] == "--markdown":
        write_md(json.load(open(sys.argv[2])))
        return
    if os.geteuid() != 0:
        sys.exit("bench-tunnel: needs root (namespaces, XDP): try sudo make bench-tunnel")
    for tool in ("ovs-vsctl", "ovs-vswitchd", "tcpdump", "taskset", WS):
        if subprocess.run(["which", tool], capture_output=True).returncode != 0:
            sys.exit(f"bench-tunnel: {tool} is missing (make bench-tunnel installs and builds it)")
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    LOADAVG.append(open("/proc/loadavg").read().split()[0])
    log(f"load average {LOADAVG[0]} (numbers are noisy when it is above 0.5)")
    results = []
    try:
        setup()
        with tempfile.TemporaryDirectory(prefix="wirespeed-tunnel.") as tmp:
            for size in SIZES:
                chosen = [(n, t) for n in ("encap", "decap") for t in (WS_TOOL, OVS_TOOL)
                          if ONLY.search(f"{size} {n} {t}")]
                cases = [(f"{size:>5} {n:<5} {t:<18}", measured(n, size, t, tmp)) for n, t in chosen]
                for (n, t), row in zip(chosen, interleaved(cases, RUNS, log)):
                    results.append({"direction": n, "tool": t, "size": size, **row,
                                    **EXTRA.get((size, n, t), {})})
    finally:
        cleanup()
    write(results, stages())
    failed = [f"{r['size']} B {r['direction']} {r['tool']}: {r['error']}" for r in results if r.get("error")]
    if failed:
        sys.exit("bench-tunnel: could not measure " + "; ".join(failed))


def stages():
    """What a port of KIND adds to the datapath's own work, timed without I/O on the switch's CPU
    (crates/switch/examples/stages.rs: pop and push beside parse, lookup and actions), the
    fastest of 3 runs (each already the fastest of 5 rounds), in cycles at /proc/cpuinfo's clock."""
    if not os.path.exists(STAGES):
        log(f"{STAGES} missing (cargo build --release -p wirespeed-switch --example stages): no stage table")
        return None
    best = {}
    for _ in range(3):
        argv = ["taskset", "-c", str(SWITCH_CPU), STAGES] + (["--gre", "1"] if KIND == "gre" else [])
        r = subprocess.run(argv, capture_output=True, text=True)
        if r.returncode != 0:
            log(f"stages: {r.stderr.strip()[-200:]}")
            return None
        for k, v in json.loads(r.stdout)["ns_per_packet"].items():
            best[k] = min(best.get(k, v), v)
    mhz = cpu_mhz()
    return {"ns_per_packet": best, "mhz": mhz,
            "cycles_per_packet": {k: round(v * mhz / 1e3) for k, v in best.items()} if mhz else None}


def write(results, stage_row=None):
    date = datetime.date.today().isoformat()
    machine = benchlib.machine(load_cpu=LOAD_CPU, switch_cpu=SWITCH_CPU, sink_cpu=SINK_CPU)
    ovs = sh("ovs-vswitchd", "--version", check=False).splitlines()[:1]
    ws_version = sh(WS, "--version", check=False).strip()
    commit = sh("git", "-C", ROOT, "describe", "--always", "--dirty", check=False).strip()
    built = datetime.datetime.fromtimestamp(os.path.getmtime(WS), datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    commit = f"tree {commit} at the run, binary built {built}" if commit else f"binary built {built}"
    record = {"date": date, "kind": KIND, "machine": machine, "runs": RUNS, "duration_s": DURATION,
              "wirespeed": f"{ws_version} ({commit})" if commit else ws_version, "ovs": ovs[0] if ovs else None,
              "set_up": {"local_ip": LOCAL_IP, "remote_ip": REMOTE_IP, "vni": VNI, "udp_port": VXLAN_PORT,
                         "underlay_mtu": UNDERLAY_MTU},
              "load_average_at_start": LOADAVG[0] if LOADAVG else None,
              "runs_with_a_build_running": sorted(set(DISTURBED)), "results": results,
              "stages": stage_row}
    os.makedirs(os.path.join(ROOT, "bench", "results"), exist_ok=True)
    with open(os.path.join(ROOT, "bench", "results", f"{date}-{files(KIND)[0]}.json"), "w") as f:
        json.dump(record, f, indent=1)
    write_md(record)


def files(kind):
    """A run's record's name (without the date and .json) and its Markdown's, for `kind`."""
    return ("tunnel", "TUNNEL.md") if kind == "vxlan" else (f"tunnel-{kind}", f"TUNNEL-{kind.upper()}.md")


# What the Markdown says of each kind: its name, what the switch pushes, the far end's frame.
KIND_TEXT = {
    "vxlan": ("VXLAN", "Ethernet/IPv4/UDP/VXLAN", f"VNI {VNI}, UDP {VXLAN_PORT}",
              "(Ethernet, IPv4 header and checksum, UDP port, VXLAN flags)",
              "(lengths, IPv4 checksum, the UDP source port from the inner flow's hash, the VNI)"),
    "gre": ("GRE", "Ethernet/IPv4/GRE (key, no checksum)",
            f"GRE key {VNI} (Ethernet inside, no checksum, no sequence number)",
            "(Ethernet, IPv4 header and checksum, GRE flags, protocol and key)",
            "(lengths, IPv4 checksum, the key)"),
}


def write_md(record):
    """bench/TUNNEL.md from a run's record (`bench/tunnel.py --markdown FILE.json` redoes it)."""
    date, machine, results = record["date"], record["machine"], record["results"]
    kind = record.get("kind", "vxlan")
    name, pushed, keyed, popped_checks, pushed_fields = KIND_TEXT[kind]
    raw, md = files(kind)
    outer = outer_len(kind)
    runs, duration, disturbed = record["runs"], record["duration_s"], record["runs_with_a_build_running"]
    ws_version, ovs = record["wirespeed"], [record["ovs"]] if record.get("ovs") else []
    get = lambda size, n, t: next((r for r in results if r["size"] == size and r["direction"] == n
                                   and r["tool"] == t), None)
    runs_done = sum(len(r["runs"]) for r in results)
    quiet = (f"A cargo/rustc build was running during some of the {runs_done} runs "
             f"({', '.join(disturbed)}): those figures are disturbed."
             if disturbed else "No cargo/rustc build ran during any run.")
    lines = [f"# {name} encapsulation and decapsulation: wirespeed switch against Open vSwitch ({date})", "",
             f"Host: {machine['cpu']}, {machine['cpus']} CPUs, kernel {machine['kernel']} (a VM). "
             f"{ws_version}; {ovs[0] if ovs else 'Open vSwitch'}. Load average at the start "
             f"{record.get('load_average_at_start') or '?'}. {quiet} Made by "
             f"`{'KIND=gre ' if kind == 'gre' else ''}make bench-tunnel` (bench/tunnel.py). "
             f"Raw runs: [`results/{date}-{raw}.json`](results/{date}-{raw}.json).", "",
             "## Method", "",
             "Three namespaces: A (hosts) --veth-- M (the switch) --veth (the underlay, MTU "
             f"{UNDERLAY_MTU})-- B (the remote VTEP). Local address {LOCAL_IP}/{PREFIX_LEN} on the underlay, remote "
             f"{REMOTE_IP} (B's MAC, a permanent neighbour for wirespeed, `ovs-appctl tnl/arp/set` for Open vSwitch), "
             f"{keyed}.", "",
             f"- encap: the kernel engine (`wirespeed gen --engine kernel --pcap`, one plain IPv4/UDP frame) on CPU "
             f"{LOAD_CPU} sends from A into the switch's host port; the switch pushes {pushed} and "
             "sends on the underlay; `wirespeed bench xdpdrop` on B's end counts.",
             f"- decap: the same engine replays one {name} frame (to the underlay's MAC, {REMOTE_IP} -> {LOCAL_IP}, "
             f"{keyed}, around the same plain frame) from B into the underlay; the switch pops "
             "the outer headers and sends the inner frame out of the host port; xdpdrop on A's end counts.",
             "- wirespeed: `wirespeed switch --port 1=xdp:M0 --port 2=xdp:M1 --port "
             f"10={kind}:remote_ip={REMOTE_IP},key={VNI} --pmd-cpus {SWITCH_CPU}`, flows in_port=1 -> 10, in_port=10 -> 1, "
             "the local address on M1.",
             "- Open vSwitch, userspace datapath with native tunnelling (its Documentation/howto/userspace-tunneling.rst): "
             f"br-int (datapath_type=netdev) with M0 (type=afxdp, ofport 1) and tun0 (type={kind}, "
             f"options:remote_ip={REMOTE_IP}, options:key={VNI}, ofport 10), flows in_port=1 -> 10 and in_port=10 -> 1; "
             "br-phy (netdev, other_config:hwaddr = M1's MAC, so both switches own the same addresses) with M1 "
             "(afxdp), the local address on br-phy's LOCAL port, flows M1 -> LOCAL and LOCAL -> M1 (NORMAL's "
             f"work with two ports); pmd-cpu-mask={1 << int(SWITCH_CPU):#x}.",
             "- Each run starts the switch afresh (wirespeed or ovsdb-server + ovs-vswitchd in a private run "
             "directory), sends ten frames through it with tcpdump on the sink, and checks them byte for byte "
             f"(encap: IPv4 {LOCAL_IP} -> {REMOTE_IP}, {keyed}, the inner frame as sent; decap: "
             "the inner frame as sent); then checks that Open vSwitch's datapath flows hold tnl_push (encap) or "
             "tnl_pop (decap), or that wirespeed's tunnel counters moved; only then is the sink's rate taken "
             f"over {duration:g} s (its steady rate: the median second without the first two and the last). Runs "
             "interleave the four cases (every case once, then again); each figure is the median of "
             f"{runs} runs (min-max).",
             f"- CPUs: the load on CPU {LOAD_CPU}, the switch's poll-mode thread on CPU {SWITCH_CPU}. On veth the "
             f"receiving end's kernel work runs on the sender's CPU: the copy of the load's frames into the switch's "
             f"AF_XDP rings runs on CPU {LOAD_CPU} (which limits the load both switches get: the same for both), "
             f"the sink's XDP drop of what the switch sends on CPU {SWITCH_CPU}. AF_XDP on veth is copy mode.",
             f"- Size: the plain (inner) frame on the wire, FCS included; encapsulated it is {outer} bytes longer. "
             "User cycles/packet: the switch process's user-space CPU time over the window (/proc/PID/stat) per "
             "packet that reached the sink, at /proc/cpuinfo's clock; both switches poll, so it counts empty "
             "polls too. Kernel cycles/packet: its kernel time likewise (on veth, what the switch sends is received "
             "by the sink's XDP program inside the switch's own send call). Load sent: the rate the kernel engine "
             "reported for its whole run (frames the switch's full rings refused included).", ""]
    summary = []
    for size in sorted({r["size"] for r in results}):
        lines += [f"## {size}-byte frames", "", "| direction | tool | Mpps | user cycles/packet | kernel cycles/packet | load sent Mpps | wirespeed / OVS |",
                  "| --- | --- | --- | --- | --- | --- | --- |"]
        for n in ("encap", "decap"):
            ovs_row = get(size, n, OVS_TOOL)
            for t in (WS_TOOL, OVS_TOOL):
                r = get(size, n, t)
                if not r:
                    continue
                if r.get("median") is None:
                    lines.append(f"| {n} | {t} | failed: {(r.get('error') or '')[:100]} | | | | |")
                    continue
                fig = f"{r['median']:.3f} ({r['min']:.3f}-{r['max']:.3f})"
                cyc = f"{r['user_cycles_per_packet']:.0f}" if r.get("user_cycles_per_packet") is not None else ""
                ratio = ""
                if t == WS_TOOL and ovs_row and ovs_row.get("median"):
                    x = r["median"] / ovs_row["median"]
                    ratio = f"{x:.2f}x"
                    summary.append(f"- {n}, {size} B: {x:.2f}x ({r['median']:.3f} / {ovs_row['median']:.3f} Mpps): "
                                   f"{'met' if x >= 1.0 else 'not met'}")
                kern = [c for c in r.get("kernel_cycles_per_packet", []) if c is not None]
                sent = [x for x in r.get("load_sent_mpps", []) if x is not None]
                kcyc = f"{statistics.median(kern):.0f}" if kern else ""
                sent_fig = f"{statistics.median(sent):.2f}" if sent else ""
                lines.append(f"| {n} | {t} | {fig} | {cyc} | {kcyc} | {sent_fig} | {ratio} |")
        lines.append("")
    shares = []
    for r in results:
        kern = [c for c in r.get("kernel_cycles_per_packet", []) if c is not None]
        if r.get("user_cycles_per_packet") and kern:
            k = statistics.median(kern)
            shares.append(k / (k + r["user_cycles_per_packet"]))
    if shares:
        lines += ["## Where the switch's CPU goes", "",
                  f"Kernel time is {min(shares):.0%}-{max(shares):.0%} of the switch process's CPU in every case, "
                  "for both switches: on veth, AF_XDP runs in copy mode, and a copy-mode send runs the veth "
                  "transmit and the receiving end's NAPI poll (the sink's XDP program) inside the sender's own "
                  "send call, so the CPU both switches share out is mostly the kernel's, and a difference in "
                  "user cycles per packet moves the rate little. Where the ranges of two rows overlap, the "
                  "ratio is within this VM's run-to-run spread.", ""]
    lines += ["## wirespeed / Open vSwitch (goal >= 1.0x)", "", *(summary or ["- no ratio: a case failed"]), ""]
    st = record.get("stages")
    if st and st.get("cycles_per_packet"):
        c = st["cycles_per_packet"]
        lines += ["## What the tunnel adds to the datapath, without I/O (goal <= 60 cycles for push or pop)", "",
                  "crates/switch/examples/stages.rs on the switch's CPU, 64-byte frames, one flow, the fastest of "
                  f"3 runs of 5 rounds, at {st['mhz']:.0f} MHz. pop: a packet an underlay received checked "
                  f"{popped_checks} and its tunnel port found; push: "
                  f"the outer headers written from the tunnel's template {pushed_fields} in front of the frame. "
                  "For scale, the datapath's "
                  "own stages on the same run (bench/SWITCH.md's table):", "",
                  "| parse | lookup | actions | datapath total | tunnel pop | tunnel push |",
                  "| --- | --- | --- | --- | --- | --- |",
                  f"| {c['parse']} | {c['lookup']} | {c['actions']} | {c['total']} | {c['tunnel_pop']} | "
                  f"{c['tunnel_push']} |", "",
                  f"- pop: {c['tunnel_pop']} cycles ({'met' if c['tunnel_pop'] <= 60 else 'not met'}); "
                  f"push: {c['tunnel_push']} cycles ({'met' if c['tunnel_push'] <= 60 else 'not met'})", ""]
    with open(os.path.join(ROOT, "bench", md), "w") as f:
        f.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
