//! The OpenFlow listener serves at most 64 connections at once: a peer opening more has
//! the one past the limit closed as it comes (no HELLO, no thread), and a place freed is
//! served again. ovs-ofctl works once the flood is gone. A peer that holds a connection
//! without saying HELLO or ending its TLS handshake is closed; one that reads none of its
//! replies is read no further.

mod common;
use common::certs::Ca;
use common::switched::Switched;
use common::*;

/// Opens 64 connections (each must get the switch's HELLO), then one more, then closes one
/// and opens another: prints what became of the last two.
const FLOOD: &str = r#"
import socket, time
def hello(s):
    s.settimeout(5)
    try:
        data = s.recv(8)
    except OSError:
        return False
    return len(data) == 8 and data[1] == 0
held = []
for i in range(64):
    s = socket.create_connection(("127.0.0.1", 6653))
    assert hello(s), f"connection {i} got no HELLO"
    held.append(s)
extra = socket.create_connection(("127.0.0.1", 6653))
print("65th", "served" if hello(extra) else "closed")
held.pop().close()
for attempt in range(30):
    again = socket.create_connection(("127.0.0.1", 6653))
    if hello(again):
        print("after one closed", "served")
        break
    time.sleep(0.1)
else:
    print("after one closed", "closed")
# Gone, and the switch has seen it: a new connection is served before this script ends.
for s in held + [extra, again]:
    s.close()
for attempt in range(30):
    last = socket.create_connection(("127.0.0.1", 6653))
    if hello(last):
        break
    time.sleep(0.1)
last.close()
"#;

/// What `script` (Python) prints, run in the switch's own namespace.
fn python_beside(s: &Switched, script: &str) -> String {
    must(&[
        "ip",
        "netns",
        "exec",
        &s.c.ns_m,
        "/usr/bin/python3",
        "-c",
        script,
    ])
}

#[test]
fn at_most_64_openflow_connections_at_once() {
    let s = Switched::new("ofc", &["--openflow", "ptcp:"]);
    let out = python_beside(&s, FLOOD);
    assert_eq!(out, "65th closed\nafter one closed served\n");
    // The switch frees each place as it sees that connection's end: ovs-ofctl may wait a
    // moment for one.
    let served = (0..30).any(|_| {
        let (ok, text) = s.ofctl(&["show"]);
        std::thread::sleep(std::time::Duration::from_millis(if ok { 0 } else { 100 }));
        ok && text.contains("OFPT_FEATURES_REPLY")
    });
    assert!(served, "ovs-ofctl was not served after the flood");
}

/// A switch dialling a controller at 127.0.0.1:`port`, where `script` (Python, in the
/// switch's namespace, started before the switch) listens and prints a count at its end.
fn dialling_a_listener(tag: &str, port: u16, script: &str) -> (Switched, std::process::Child) {
    let target = format!("tcp:127.0.0.1:{port}");
    Switched::prepared(tag, Default::default(), &["--controller", &target], |c| {
        std::process::Command::new("ip")
            .args(["netns", "exec", &c.ns_m, "/usr/bin/python3", "-c", script])
            .stdout(std::process::Stdio::piped())
            .spawn()
            .expect("python3")
    })
}

/// The count the listener printed as it ended.
fn count_printed(listener: std::process::Child) -> u32 {
    let out = listener.wait_with_output().unwrap();
    String::from_utf8_lossy(&out.stdout).trim().parse().unwrap()
}

/// A controller address where something takes the connection and says nothing (not an
/// OpenFlow controller): the switch keeps trying, quietly; no "connected" is said for it.
#[test]
fn a_peer_that_never_speaks_openflow_is_not_called_a_controller() {
    const SILENT: &str = r#"
import socket, time
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", 6699))
s.listen()
s.settimeout(0.2)
taken, end = 0, time.time() + 4
while time.time() < end:
    try:
        c, _ = s.accept()
        taken += 1
        c.close()
    except socket.timeout:
        pass
print(taken)
"#;
    let (mut s, listener) = dialling_a_listener("ofs", 6699, SILENT);
    let taken = count_printed(listener);
    let (_, stderr) = s.stop();
    assert!(taken >= 1, "the switch never dialled: {stderr}");
    // (A refused first try, before the listener was up, may be said.)
    assert!(!stderr.contains("connected to controller"), "{stderr}");
    assert!(!stderr.contains("went away"), "{stderr}");
}

/// A peer that takes the connection and holds it, silent (a hung controller, or a proxy in
/// front of one): until it says HELLO it does not control the bridge, so fail mode
/// standalone keeps forwarding as a learning switch, as Open vSwitch's fail-open does.
/// (Before: forwarding stopped as the connection opened, for good but a second every 11.)
#[test]
fn a_silent_controller_connection_leaves_a_standalone_switch_forwarding() {
    const HOLD: &str = r#"
import socket, time
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", 6698))
s.listen()
s.settimeout(0.2)
held, end = [], time.time() + 6
while time.time() < end:
    try:
        held.append(s.accept()[0])
    except socket.timeout:
        pass
print(len(held))
"#;
    let (mut s, listener) = dialling_a_listener("ofh", 6698, HOLD);
    // The switch has dialled by now (its first try comes at once, the next a second on).
    std::thread::sleep(std::time::Duration::from_millis(1500));
    assert_eq!(s.ping(&s.c.ns_a, "10.9.0.2", 4), 4);
    let held = count_printed(listener);
    let (_, stderr) = s.stop();
    assert!(held >= 1, "the switch never dialled: {stderr}");
    assert!(!stderr.contains("connected to controller"), "{stderr}");
}

/// A controller of another OpenFlow version (1.0 here): HELLO_FAILED to it, and to the
/// operator the reason, said once however many times the switch dials again.
#[test]
fn a_controller_of_another_version_is_said_once() {
    const OF10: &str = r#"
import socket, struct, time
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", 6697))
s.listen()
s.settimeout(0.2)
failed, end = 0, time.time() + 5
while time.time() < end:
    try:
        c, _ = s.accept()
    except socket.timeout:
        continue
    c.settimeout(2)
    c.sendall(struct.pack("!BBHI", 1, 0, 8, 1))
    data = b""
    try:
        while True:
            more = c.recv(4096)
            if not more:
                break
            data += more
    except OSError:
        pass
    # The switch's HELLO, then an ERROR (1) of type HELLO_FAILED (0).
    at = 0
    while at + 8 <= len(data):
        kind, length = data[at + 1], struct.unpack("!H", data[at + 2:at + 4])[0]
        if kind == 1 and data[at + 8:at + 10] == b"\x00\x00":
            failed += 1
        at += max(length, 8)
    c.close()
print(failed)
"#;
    let (mut s, listener) = dialling_a_listener("ofv", 6697, OF10);
    let failed = count_printed(listener);
    let (_, stderr) = s.stop();
    assert!(failed >= 2, "HELLO_FAILED {failed} times: {stderr}");
    let said = "controller 127.0.0.1:6697: it speaks OpenFlow version 0x01 only, and wirespeed \
                1.3 (0x04); trying again";
    assert_eq!(stderr.matches(said).count(), 1, "{stderr}");
    assert!(!stderr.contains("connected to controller"), "{stderr}");
}

/// A controller nobody listens for: the failure is said once with its reason (not at every
/// try), as Open vSwitch logs a controller it cannot reach. (A name that does not resolve
/// is said the same way, "cannot resolve NAME: ...", but how long a resolver takes to say
/// so depends on the host's: not tested here.)
#[test]
fn a_controller_that_cannot_be_reached_is_said_once_with_the_reason() {
    let mut s = Switched::new("ofu", &["--controller", "tcp:127.0.0.1:6698"]);
    // Said by the first try (a refusal is at once); tries at 1 and 3 s must not say it
    // again.
    std::thread::sleep(std::time::Duration::from_millis(3500));
    let (_, stderr) = s.stop();
    let said = |needle: &str| stderr.lines().filter(|l| l.contains(needle)).count();
    assert_eq!(
        said(
            "OpenFlow: controller 127.0.0.1:6698: connect to 127.0.0.1:6698: Connection refused \
             (os error 111); trying again (every 8 s at most)"
        ),
        1,
        "{stderr}"
    );
    assert_eq!(said("trying again"), 1, "{stderr}");
}

/// Three peers that hold a connection without doing what OpenFlow asks, each printing how
/// it ended:
/// - `tcp-hello`: says no HELLO, sends an ECHO_REQUEST every 2 s (each within the read
///   timeout): the seconds until the switch closed it;
/// - `tls-handshake`: opens a TLS record of 512 bytes and sends one byte of it every 2 s:
///   likewise;
/// - `unread`: says HELLO, then writes 1,000 ECHO_REQUESTs of 64 KiB and reads nothing for
///   3 s: how many the switch took meanwhile; then reads: how many ECHO_REPLYs came back,
///   and whether their xids were 1 to 1,000 in order.
const HOLDERS: &str = r#"
import socket, struct, threading, time
out = {}
def closed_after(sock, send, began):
    sock.settimeout(2)
    while time.time() - began < 40:
        try:
            if sock.recv(65536) == b"":
                return round(time.time() - began)
        except socket.timeout:
            pass
        except OSError:
            return round(time.time() - began)
        try:
            send(sock)
        except OSError:
            return round(time.time() - began)
    return None
def tcp_hello():
    began = time.time()
    s = socket.create_connection(("127.0.0.1", 6653))
    echo = struct.pack("!BBHI", 4, 2, 8, 7)
    out["tcp-hello"] = closed_after(s, lambda s: s.sendall(echo), began)
def tls_handshake():
    began = time.time()
    s = socket.create_connection(("127.0.0.1", 6654))
    s.sendall(b"\x16\x03\x01\x02\x00")
    out["tls-handshake"] = closed_after(s, lambda s: s.sendall(b"\x01"), began)
def read_message(s):
    head = b""
    while len(head) < 8:
        head += s.recv(8 - len(head))
    length = struct.unpack("!H", head[2:4])[0]
    body = b""
    while len(body) < length - 8:
        body += s.recv(length - 8 - len(body))
    return head, body
def unread():
    s = socket.create_connection(("127.0.0.1", 6653))
    s.sendall(struct.pack("!BBHI", 4, 0, 8, 1))
    sent = [0]
    payload = b"\x5a" * (65535 - 8)
    def writer():
        for xid in range(1, 1001):
            s.sendall(struct.pack("!BBHI", 4, 2, 65535, xid) + payload)
            sent[0] = xid
    w = threading.Thread(target=writer)
    w.start()
    time.sleep(3)
    out["taken-unread"] = sent[0]
    xids = []
    while len(xids) < 1000:
        head, body = read_message(s)
        if head[1] == 3:
            assert body == payload
            xids.append(struct.unpack("!I", head[4:8])[0])
    w.join()
    out["replies"] = len(xids)
    out["in-order"] = xids == list(range(1, 1001))
threads = [threading.Thread(target=f) for f in (tcp_hello, tls_handshake, unread)]
for t in threads:
    t.start()
for t in threads:
    t.join()
for key in sorted(out):
    print(key, out[key])
"#;

/// A peer that connects and never says HELLO (an ECHO now and then), or never ends its TLS
/// handshake (a byte now and then, each within the read timeout), is closed after 10 s:
/// each held one of the 64 connections for as long as it liked. A peer that writes
/// requests and reads none of the replies is read no further once 4 MiB of replies wait
/// for it: it took all 1,000 ECHO_REQUESTs of 64 KiB, 64 MiB of replies held for it; once
/// it reads, every reply comes, in order.
#[test]
fn peers_that_hold_a_connection_without_openflow_are_closed_or_held_back() {
    let ca = Ca::new("ofh");
    let ours = ca.issue("switch");
    let mut extra: Vec<String> = ["--openflow", "ptcp:", "--openflow", "pssl:6654"]
        .map(String::from)
        .to_vec();
    extra.extend(ours.options(&ca));
    let extra: Vec<&str> = extra.iter().map(String::as_str).collect();
    let s = Switched::new("ofh", &extra);
    let out = python_beside(&s, HOLDERS);
    let said: std::collections::HashMap<&str, &str> =
        out.lines().filter_map(|l| l.split_once(' ')).collect();
    for peer in ["tcp-hello", "tls-handshake"] {
        let seconds: u64 = said[peer].parse().unwrap_or_else(|_| panic!("{out}"));
        assert!(
            (10..=13).contains(&seconds),
            "{peer} closed after {seconds} s: {out}"
        );
    }
    let taken: u64 = said["taken-unread"].parse().unwrap();
    // 4 MiB of replies, and what the sockets' buffers hold besides.
    assert!(
        taken * 65535 < 24 << 20,
        "{taken} requests taken unread: {out}"
    );
    assert_eq!(
        (said["replies"], said["in-order"]),
        ("1000", "True"),
        "{out}"
    );
}
