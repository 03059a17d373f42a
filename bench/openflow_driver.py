#!/usr/bin/python3
"""The OpenFlow 1.3 controller side of make bench-openflow, the same for every switch measured:
a plain socket client (no controller framework in the way), run inside the switch's namespace.

  openflow_driver.py setup PORT N BATCH     N FLOW_MODs, a BARRIER after every BATCH (waited
                                            for); prints {"flow_mods_per_s", "errors", "flows"}
  openflow_driver.py rtt PORT K IFACE_NS IFACE
                                            a reactive controller: the first packet of each of
                                            K new flows, sent from IFACE in namespace IFACE_NS,
                                            comes up as a PACKET_IN; the FLOW_MOD for it and a
                                            BARRIER go back; prints the median microseconds
                                            from the packet to its PACKET_IN and to the barrier
  openflow_driver.py flows PORT FILE        the FLOW_MODs of FILE (lines of the form the
                                            benchmark writes), then a barrier
  openflow_driver.py hosts PORT FIRST N     a controller's rule a host: N rules
                                            ip,nw_src=FIRST+i -> output:2 (the rest dropped);
                                            prints {"flows", "errors"}
  openflow_driver.py churn PORT RATE SECONDS ADDR [rule|group]
                                            RATE changes a second for SECONDS: a rule for host
                                            ADDR added, then deleted, and so on (rule); or
                                            group 1, which host ADDR's rule sends to, modified
                                            to output to port 1, then to port 2, and so on
                                            (group); each waited for with a BARRIER; prints
                                            {"changes", "errors", "median_us", "p99_us"} (the
                                            barrier's round trip)
"""

import ctypes
import json
import os
import socket
import statistics
import struct
import sys
import time

VERSION = 4
HELLO, ERROR, ECHO_REQUEST, ECHO_REPLY = 0, 1, 2, 3
FEATURES_REQUEST, PACKET_IN, FLOW_MOD, GROUP_MOD, MULTIPART_REQUEST, SET_ASYNC = 5, 10, 14, 15, 18, 28
MULTIPART_REPLY, BARRIER_REQUEST, BARRIER_REPLY = 19, 20, 21
CONTROLLER, ANY = 0xFFFFFFFD, 0xFFFFFFFF


def msg(kind, body=b"", xid=0):
    return struct.pack("!BBHI", VERSION, kind, 8 + len(body), xid) + body


def oxm(field, value):
    return struct.pack("!HBB", 0x8000, field << 1, len(value)) + value


def match(*fields):
    body = b"".join(fields)
    length = 4 + len(body)
    return struct.pack("!HH", 1, length) + body + b"\0" * (-length % 8)


def output(port):
    return struct.pack("!HHIH6x", 0, 16, port, 0xFFFF)


def apply(actions):
    return struct.pack("!HH4x", 4, 8 + len(actions)) + actions


def goto(table):
    return struct.pack("!HHB3x", 1, 8, table)


def flow_mod(table, priority, m, instructions, command=0):
    body = struct.pack("!QQBBHHHIIIH2x", 0, 0, table, command, 0, 0, priority, ANY, ANY, ANY, 0)
    return msg(FLOW_MOD, body + m + instructions)


def group_action(group):
    return struct.pack("!HHI", 22, 8, group)


def indirect_group(group, port, command=0):
    """A GROUP_MOD (0 add, 1 modify) of an indirect group whose one bucket outputs to port."""
    actions = output(port)
    bucket = struct.pack("!HHII4x", 16 + len(actions), 0, ANY, ANY) + actions
    return msg(GROUP_MOD, struct.pack("!HBxI", command, 2, group) + bucket)


class Connection:
    def __init__(self, port):
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=30)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.buf = b""
        self.errors = 0
        self.sock.sendall(msg(HELLO, struct.pack("!HHI", 1, 8, 1 << VERSION)))
        self.sock.sendall(msg(FEATURES_REQUEST, xid=1))
        while self.read()[0] != 6:  # FEATURES_REPLY
            pass
        # Open vSwitch's ptcp: connections are service connections, which get no PACKET_IN
        # until they ask: ask, as a master or equal controller would have them.
        self.sock.sendall(msg(SET_ASYNC, struct.pack("!6I", 0b111, 0b111, 0b111, 0b111, 0b1111, 0)))

    def read(self):
        """The next message (kind, body), answering echo requests and counting errors."""
        while True:
            while len(self.buf) < 8 or len(self.buf) < struct.unpack("!H", self.buf[2:4])[0]:
                chunk = self.sock.recv(1 << 16)
                if not chunk:
                    raise RuntimeError("the switch closed the connection")
                self.buf += chunk
            length = struct.unpack("!H", self.buf[2:4])[0]
            m, self.buf = self.buf[:length], self.buf[length:]
            kind, xid = m[1], struct.unpack("!I", m[4:8])[0]
            if kind == ECHO_REQUEST:
                self.sock.sendall(msg(ECHO_REPLY, m[8:], xid))
                continue
            if kind == ERROR:
                self.errors += 1
                if self.errors <= 3:
                    print(f"error {struct.unpack('!HH', m[8:12])}", file=sys.stderr)
            return kind, m[8:]

    def barrier(self, xid=7):
        self.sock.sendall(msg(BARRIER_REQUEST, xid=xid))
        while self.read()[0] != BARRIER_REPLY:
            pass

    def flow_count(self):
        body = struct.pack("!HH4xB3xII4xQQ", 2, 0, 0xFF, ANY, ANY, 0, 0) + match()
        self.sock.sendall(msg(MULTIPART_REQUEST, body, 9))
        while True:
            kind, body = self.read()
            if kind == MULTIPART_REPLY and struct.unpack("!H", body[:2])[0] == 2:
                return struct.unpack("!I", body[24:28])[0]


def setup_rate(port, n, batch):
    c = Connection(port)
    c.sock.sendall(flow_mod(0xFF, 0, match(), b"", command=3))  # delete all
    c.barrier()
    start = time.perf_counter()
    for first in range(0, n, batch):
        out = []
        for i in range(first, min(n, first + batch)):
            dst = bytes([10, 100 + i // 65536, i // 256 % 256, i % 256])
            m = match(oxm(5, b"\x08\x00"), oxm(10, b"\x11"), oxm(12, dst), oxm(16, struct.pack("!H", 5000)))
            out.append(flow_mod(0, 100, m, apply(output(2))))
        c.sock.sendall(b"".join(out))
        c.barrier()
    seconds = time.perf_counter() - start
    print(json.dumps({"flow_mods_per_s": n / seconds, "seconds": seconds, "errors": c.errors,
                      "flows": c.flow_count()}))


def enter_netns(name):
    libc = ctypes.CDLL("libc.so.6", use_errno=True)
    with open(f"/run/netns/{name}") as f:
        if libc.setns(f.fileno(), 0x40000000) != 0:  # CLONE_NEWNET
            raise OSError(ctypes.get_errno(), "setns")


def udp_frame(src_mac, dport):
    ip = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 28, 0, 0, 64, 17, 0, bytes([10, 9, 0, 1]), bytes([10, 9, 0, 2]))
    csum = sum(struct.unpack("!10H", ip))
    csum = (csum & 0xFFFF) + (csum >> 16)
    ip = ip[:10] + struct.pack("!H", ~csum & 0xFFFF) + ip[12:]
    return b"\xff" * 6 + src_mac + b"\x08\x00" + ip + struct.pack("!HHHH", 4000, dport, 8, 0)


def rtt(port, k, iface_ns, iface):
    c = Connection(port)
    c.sock.sendall(flow_mod(0xFF, 0, match(), b"", command=3))
    c.sock.sendall(flow_mod(0, 0, match(), apply(output(CONTROLLER))))
    c.barrier()
    enter_netns(iface_ns)  # the TCP connection stays where it was made
    raw = socket.socket(socket.AF_PACKET, socket.SOCK_RAW)
    raw.bind((iface, 0))
    src_mac = raw.getsockname()[4]
    to_packet_in, to_barrier = [], []
    lost = 0
    c.sock.settimeout(2)
    for i in range(k):
        dport = 10000 + i
        frame = udp_frame(src_mac, dport)
        t0 = time.perf_counter()
        raw.send(frame)
        udp = struct.pack("!HH", 4000, dport)  # the frame may come padded to 60 bytes
        try:
            while True:
                kind, body = c.read()
                if kind == PACKET_IN and udp in body:
                    break
        except socket.timeout:
            lost += 1
            if lost >= 5 and not to_packet_in:
                raise RuntimeError(f"no PACKET_IN for the first {lost} packets")
            continue
        t1 = time.perf_counter()
        m = match(oxm(5, b"\x08\x00"), oxm(10, b"\x11"), oxm(16, struct.pack("!H", dport)))
        c.sock.sendall(flow_mod(0, 10, m, apply(output(2))))
        c.barrier(xid=100 + i)
        t2 = time.perf_counter()
        to_packet_in.append((t1 - t0) * 1e6)
        to_barrier.append((t2 - t0) * 1e6)
        time.sleep(0.002)
    if not to_packet_in:
        raise RuntimeError(f"no PACKET_IN for any of {k} packets")
    print(json.dumps({"packet_in_us": statistics.median(to_packet_in),
                      "flow_in_effect_us": statistics.median(to_barrier),
                      "samples": len(to_packet_in), "lost": lost, "errors": c.errors}))


def flows(port, path):
    """Lines: TABLE PRIORITY kind args (see bench/openflow.py's rules)."""
    c = Connection(port)
    out = []
    for line in open(path):
        f = line.split()
        table, priority, kind = int(f[0]), int(f[1]), f[2]
        if kind == "decoy":  # udp to an address the load never uses, dropped
            dst = bytes(int(x) for x in f[3].split("."))
            m = match(oxm(5, b"\x08\x00"), oxm(10, b"\x11"), oxm(12, dst), oxm(16, struct.pack("!H", int(f[4]))))
            out.append(flow_mod(table, priority, m, b""))
        elif kind == "goto":
            out.append(flow_mod(table, priority, match(oxm(0, struct.pack("!I", 1))), goto(int(f[3]))))
        elif kind == "output":
            out.append(flow_mod(table, priority, match(oxm(0, struct.pack("!I", 1))), apply(output(int(f[3])))))
    for i in range(0, len(out), 1000):
        c.sock.sendall(b"".join(out[i:i + 1000]))
        c.barrier()
    print(json.dumps({"flows": c.flow_count(), "errors": c.errors}))


def host_rule(addr, command=0, priority=100):
    """A host rule: ip,nw_src=ADDR (dotted) -> output:2, priority PRIORITY."""
    src = bytes(int(x) for x in addr.split("."))
    m = match(oxm(5, b"\x08\x00"), oxm(11, src))
    return flow_mod(0, priority, m, apply(output(2)) if command == 0 else b"", command=command)


def hosts(port, first, n):
    c = Connection(port)
    c.sock.sendall(flow_mod(0xFF, 0, match(), b"", command=3))  # delete all
    base = struct.unpack("!I", bytes(int(x) for x in first.split(".")))[0]
    rules = [host_rule(".".join(str(b) for b in struct.pack("!I", base + i))) for i in range(n)]
    for i in range(0, n, 1000):
        c.sock.sendall(b"".join(rules[i:i + 1000]))
        c.barrier()
    print(json.dumps({"flows": c.flow_count(), "errors": c.errors}))


def churn(port, rate, seconds, addr, change="rule"):
    c = Connection(port)
    add, delete = host_rule(addr), host_rule(addr, command=4)  # DELETE_STRICT
    if change == "group":
        src = bytes(int(x) for x in addr.split("."))
        c.sock.sendall(indirect_group(1, 2) + flow_mod(0, 100, match(oxm(5, b"\x08\x00"), oxm(11, src)),
                                                       apply(group_action(1))))
        c.barrier(xid=99)
        add, delete = indirect_group(1, 1, command=1), indirect_group(1, 2, command=1)
    elif change == "touch":
        # A rule above the host's own, with its actions: the host's flow is decided anew by
        # each change (its megaflow and kernel entry go), though its packets go where they went.
        add, delete = host_rule(addr, priority=200), host_rule(addr, command=4, priority=200)
    waits = []
    start = time.perf_counter()
    n = int(rate * seconds)
    for i in range(n):
        pause = start + i / rate - time.perf_counter()
        if pause > 0:
            time.sleep(pause)
        t0 = time.perf_counter()
        c.sock.sendall(delete if i % 2 else add)
        c.barrier(xid=100 + i)
        waits.append((time.perf_counter() - t0) * 1e6)
    waits.sort()
    print(json.dumps({"changes": n, "errors": c.errors, "seconds": time.perf_counter() - start,
                      "median_us": statistics.median(waits) if waits else None,
                      "p99_us": waits[int(len(waits) * 0.99)] if waits else None}))


if __name__ == "__main__":
    mode, port = sys.argv[1], int(sys.argv[2])
    if mode == "setup":
        setup_rate(port, int(sys.argv[3]), int(sys.argv[4]))
    elif mode == "rtt":
        rtt(port, int(sys.argv[3]), sys.argv[4], sys.argv[5])
    elif mode == "flows":
        flows(port, sys.argv[3])
    elif mode == "hosts":
        hosts(port, sys.argv[3], int(sys.argv[4]))
    elif mode == "churn":
        churn(port, float(sys.argv[3]), float(sys.argv[4]), sys.argv[5], *sys.argv[6:7])
    else:
        sys.exit(__doc__)
