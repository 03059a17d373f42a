//! `wirespeed switch --openflow ptcp:` driven by Open vSwitch's own `ovs-ofctl` over OpenFlow
//! 1.3: flows added, changed and removed either way (OpenFlow or `wirespeed ctl`) show both
//! ways and move real packets between namespaces; statistics, port descriptions, packet-out
//! and port-mod answer as ovs-ofctl expects; bundles commit all or nothing; malformed
//! messages get the specification's errors and leave the connection up; over TLS (`pssl:`),
//! each side checks the other's certificate.

mod common;
use common::certs::Ca;
use common::switched::{Switched, field, flow_without_duration};
use common::*;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

/// The flows of `ovs-ofctl dump-flows` without their changing fields (duration).
fn flows(s: &Switched) -> Vec<String> {
    s.ofctl_ok(&["dump-flows"])
        .lines()
        .skip(1)
        .map(flow_without_duration)
        .collect()
}

#[test]
fn ovs_ofctl_adds_changes_and_removes_flows_that_packets_obey() {
    let s = Switched::new("of", &["--openflow", "ptcp:"]);
    let show = s.ofctl_ok(&["show"]);
    let mac_m = mac_of(&s.c.ns_m, &s.c.ma);
    assert!(
        show.contains(&format!("dpid:0000{}", mac_m.replace(':', ""))),
        "{show}"
    );
    assert!(show.contains("n_tables:254, n_buffers:0"), "{show}");
    assert!(
        show.contains(&format!(" 1({}): addr:{mac_m}", s.c.ma)) && show.contains(" 2("),
        "{show}"
    );
    assert_eq!(s.ping(&s.c.ns_a, "10.9.0.2", 2), 2);

    // An OpenFlow flow stops ping and shows in ctl's dump-flows.
    s.ofctl_ok(&["add-flow", "priority=100,icmp,actions=drop"]);
    assert_eq!(s.ping(&s.c.ns_a, "10.9.0.2", 2), 0);
    let ctl_flows = s.ctl_ok(&["dump-flows"]);
    assert!(
        ctl_flows.contains("n_packets=2, n_bytes=196, priority=100,icmp actions=drop"),
        "{ctl_flows}"
    );
    // mod-flows changes its actions, keeping its counters.
    s.ofctl_ok(&["mod-flows", "icmp,actions=NORMAL"]);
    assert_eq!(s.ping(&s.c.ns_a, "10.9.0.2", 2), 2);
    // A ctl flow shows in OpenFlow's FLOW statistics, in table 1 with its goto from 0.
    s.ctl_ok(&[
        "add-flow",
        "table=1,priority=5,cookie=0x7,tcp,tp_dst=80,actions=mod_vlan_vid:5,output:2",
    ]);
    // The ICMP rule counted 2 dropped requests, then 2 requests and 2 replies (98 bytes
    // each); the default rule's count depends on ARP, so only its form is fixed.
    let listed = flows(&s);
    assert_eq!(listed.len(), 3, "{listed:?}");
    assert_eq!(
        listed[0],
        "cookie=0x0, table=0, n_packets=6, n_bytes=588, priority=100,icmp actions=NORMAL"
    );
    assert!(
        listed[1].starts_with("cookie=0x0, table=0, n_packets=")
            && listed[1].ends_with(", priority=0 actions=NORMAL"),
        "{listed:?}"
    );
    assert_eq!(
        listed[2],
        "cookie=0x7, table=1, n_packets=0, n_bytes=0, priority=5,tcp,tp_dst=80 \
         actions=push_vlan:0x8100,set_field:4101->vlan_vid,output:2"
    );
    // What dump-flows gives loads back as it was: diff-flows against it finds nothing
    // (a set_field of the id without its push_vlan was refused by ovs-ofctl).
    let dumped = ScratchFile::new("of-dumped.flows");
    std::fs::write(&dumped, s.ofctl_ok(&["--no-stats", "dump-flows"])).unwrap();
    assert_eq!(s.ofctl_ok(&["diff-flows", &dumped]), "");
    let count = |line: &str, key: &str| -> u64 {
        let at = line.find(key).unwrap() + key.len();
        line[at..]
            .split(|c: char| !c.is_ascii_digit())
            .next()
            .unwrap()
            .parse()
            .unwrap()
    };
    let (packets, bytes): (u64, u64) = listed
        .iter()
        .map(|l| (count(l, "n_packets="), count(l, "n_bytes=")))
        .fold((0, 0), |(p, b), (lp, lb)| (p + lp, b + lb));
    let aggregate = s.ofctl_ok(&["dump-aggregate"]);
    assert!(
        aggregate.contains(&format!(
            "packet_count={packets} byte_count={bytes} flow_count=3"
        )),
        "{aggregate} {listed:?}"
    );
    // A port range by mask, as Open vSwitch takes it: added, shown and deleted strictly.
    s.ofctl_ok(&[
        "add-flow",
        "priority=6,tcp,tp_dst=0x1000/0xf000,actions=drop",
    ]);
    let ranged = s.ofctl_ok(&["dump-flows", "tcp"]);
    assert!(
        ranged.contains("priority=6,tcp,tp_dst=0x1000/0xf000 actions=drop"),
        "{ranged}"
    );
    s.ofctl_ok(&[
        "--strict",
        "del-flows",
        "priority=6,tcp,tp_dst=0x1000/0xf000",
    ]);
    // Strict delete takes only the exact rule; a non-strict one by cookie.
    s.ofctl_ok(&["--strict", "del-flows", "priority=5,icmp"]);
    assert_eq!(flows(&s).len(), 3);
    s.ofctl_ok(&["--strict", "del-flows", "priority=100,icmp"]);
    s.ofctl_ok(&["del-flows", "cookie=0x7/-1"]);
    let left = flows(&s);
    assert!(
        left.len() == 1 && left[0].ends_with(", priority=0 actions=NORMAL"),
        "{left:?}"
    );
    // add-flows, then only what drops ARP; then everything goes.
    let file = ScratchFile::new("of.flows");
    std::fs::write(
        &file,
        "table=0,priority=10,arp,actions=drop\ntable=0,priority=9,ip,actions=goto_table:3\n\
         table=3,priority=1,actions=NORMAL\n",
    )
    .unwrap();
    s.ofctl_ok(&["add-flows", &file]);
    let ctl_flows = s.ctl_ok(&["dump-flows"]);
    assert!(
        ctl_flows.contains("priority=9,ip actions=goto_table:3")
            && ctl_flows.contains("table=3, n_packets=0, n_bytes=0, priority=1 actions=NORMAL"),
        "{ctl_flows}"
    );
    assert_eq!(
        s.ping(&s.c.ns_a, "10.9.0.2", 2),
        2,
        "ip goes through table 3"
    );
    s.ofctl_ok(&["del-flows"]);
    assert!(flows(&s).is_empty());
    assert_eq!(s.ping(&s.c.ns_a, "10.9.0.2", 1), 0, "a table miss drops");
}

#[test]
fn ovs_ofctl_statistics_packet_out_and_port_mod() {
    let s = Switched::new("ofs", &["--openflow", "ptcp:"]);
    assert_eq!(s.ping(&s.c.ns_a, "10.9.0.2", 3), 3);
    let ports = s.ofctl_ok(&["dump-ports"]);
    assert!(
        ports.starts_with("OFPST_PORT reply (OF1.3)") && ports.contains("2 ports"),
        "{ports}"
    );
    // Each port received as many as the switch's own dump-ports says.
    let ctl_ports = s.ctl_ok(&["dump-ports"]);
    for n in ["1", "2"] {
        let rx = |text: &str| {
            let at = text.find(&format!("port  {n}: rx pkts=")).unwrap();
            text[at..].split(',').next().unwrap().to_string()
        };
        assert_eq!(rx(&ports), rx(&ctl_ports), "{ports}\n{ctl_ports}");
    }
    let desc = s.ofctl_ok(&["dump-ports-desc"]);
    assert!(
        desc.contains(&format!(" 1({}): addr:", s.c.ma)) && desc.contains("state:      LIVE"),
        "{desc}"
    );
    // Table 0's one rule (normal) took every packet that looked it up: the pings' six and
    // the hosts' own (ARP, IPv6); table 1 was never looked up.
    let tables = s.ofctl_ok(&["dump-tables"]);
    let table0 = tables
        .split_once("table 0:\n    active=1, lookup=")
        .and_then(|(_, rest)| rest.split_once(", matched="))
        .and_then(|(lookups, rest)| Some((lookups.parse::<u64>().ok()?, rest.lines().next()?)))
        .unwrap_or_else(|| panic!("{tables}"));
    assert!(
        table0.0 >= 6 && table0.1 == table0.0.to_string(),
        "{tables}"
    );
    assert!(
        tables.contains("table 1:\n    active=0, lookup=0, matched=0"),
        "{tables}"
    );
    let desc = s.ofctl_ok(&["dump-desc"]);
    assert!(desc.contains("Manufacturer: wirespeed"), "{desc}");
    // Without --no-names, ovs-ofctl reads the table features (for table names) before a
    // flow mod, and refuses a reply without the eight properties OpenFlow 1.3 requires.
    let plain = |args: &[&str]| ovs_ofctl13(&s.c.ns_m, args);
    let features = plain(&["dump-table-features"]);
    assert!(
        features.contains("table 0 (\"table0\"):")
            && features.contains("next tables: 1-253")
            && features.contains(
                "instructions: meter apply_actions clear_actions write_actions \
                 write_metadata goto_table"
            )
            && features.contains("table 253 (\"table253\")"),
        "{features}"
    );
    plain(&[
        "add-flow",
        "table=3,priority=7,tun_src=192.0.2.9,actions=goto_table:5",
    ]);
    let ctl_flows = s.ctl_ok(&["dump-flows"]);
    assert!(
        ctl_flows.contains(
            "table=3, n_packets=0, n_bytes=0, priority=7,tun_src=192.0.2.9 \
             actions=goto_table:5"
        ),
        "{ctl_flows}"
    );
    plain(&["del-flows", "table=3"]);

    // packet-out: a UDP packet from the controller out of port 2 reaches host B; so does
    // one from no port (in_port=none, OFPP_ANY on the wire), which Open vSwitch takes too
    // (it was refused BAD_PORT).
    let mut capture = std::process::Command::new("ip")
        .args([
            "netns", "exec", &s.c.ns_b, "tcpdump", "-i", &s.c.b, "-nn", "-c", "2",
        ])
        .args(["-l", "udp", "port", "9"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(800));
    let packet = "ffffffffffff020000000001080045000020000100004011f9c70a0900630a090002\
                  3039000900080000deadbeef";
    let packet: String = packet.split_whitespace().collect();
    s.ofctl_ok(&["packet-out", "CONTROLLER", "output:2", &packet]);
    s.ofctl_ok(&["packet-out", "none", "output:2", &packet]);
    let out = wait_output(&mut capture, Duration::from_secs(5));
    assert_eq!(
        out.matches("IP 10.9.0.99.12345 > 10.9.0.2.9: UDP, length 0")
            .count(),
        2,
        "{out}"
    );
    // mod-port: down, as show and the interface say; then up again.
    s.ofctl_ok(&["mod-port", "2", "down"]);
    let show = s.ofctl_ok(&["show"]);
    assert!(show.contains("config:     PORT_DOWN"), "{show}");
    s.ofctl_ok(&["mod-port", "2", "up"]);
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(s.ping(&s.c.ns_a, "10.9.0.2", 2), 2);
    // The flags never set here: clearing one is done already, setting one is refused.
    for done in ["forward", "receive", "packet-in"] {
        s.ofctl_ok(&["mod-port", "2", done]);
    }
    let (ok, out) = s.ofctl(&["mod-port", "2", "no-forward"]);
    assert!(!ok && out.contains("OFPPMFC_BAD_CONFIG"), "{out}");
    assert!(
        s.ofctl_ok(&["show"])
            .contains("capabilities: FLOW_STATS TABLE_STATS PORT_STATS GROUP_STATS")
    );
}

#[test]
fn metadata_ecn_and_arp_hardware_addresses_steer_packets() {
    let s = Switched::new("ofm", &["--openflow", "ptcp:", "--datapath-id", "0xabc"]);
    // Both doors say the datapath id given.
    assert!(s.ofctl_ok(&["show"]).contains("dpid:0000000000000abc"));
    assert!(s.ctl_ok(&["show"]).contains("dpid:0000000000000abc"));
    let mac_a = mac_of(&s.c.ns_a, &s.c.a);
    // ARP from host A writes metadata 1, other ARP 2; table 1 forwards 1 and counts 2
    // before forwarding it too. ICMP marked ECT(1) is dropped.
    s.ofctl_ok(&["del-flows"]);
    let flows = ScratchFile::new("ofm.flows");
    std::fs::write(
        &flows,
        format!(
            "table=0,priority=10,arp,arp_sha={mac_a},actions=write_metadata:0x1/0xff,goto_table:1\n\
             table=0,priority=5,arp,actions=write_metadata:0x2/0xff,goto_table:1\n\
             table=0,priority=20,icmp,ip_ecn=1,actions=drop\n\
             table=0,priority=1,ip,actions=NORMAL\n\
             table=1,priority=5,metadata=0x1/0xff,actions=NORMAL\n\
             table=1,priority=4,metadata=0x2/0xff,actions=NORMAL\n"
        ),
    )
    .unwrap();
    s.ofctl_ok(&["add-flows", &flows]);
    assert_eq!(s.ping(&s.c.ns_a, "10.9.0.2", 2), 2);
    let ecn = sh(&[
        "ip", "netns", "exec", &s.c.ns_a, "ping", "-n", "-c", "2", "-i", "0.2", "-W", "1", "-Q",
        "1", "10.9.0.2",
    ]);
    assert!(!ecn.status.success(), "ECT(1) pings were dropped");
    let dumped = s.ofctl_ok(&["dump-flows"]);
    let count = |needle: &str| -> u64 {
        let line = dumped
            .lines()
            .find(|l| l.contains(needle))
            .unwrap_or_else(|| panic!("no '{needle}' in {dumped}"));
        let at = line.find("n_packets=").unwrap() + "n_packets=".len();
        line[at..].split(',').next().unwrap().parse().unwrap()
    };
    // A's one request (B answers from its own address: arp_sha is B's).
    assert_eq!(
        count(&format!(
            "arp,arp_sha={mac_a} actions=write_metadata:0x1/0xff"
        )),
        1
    );
    assert_eq!(
        count("priority=5,arp actions=write_metadata:0x2/0xff,goto_table:1"),
        1
    );
    assert_eq!(count("metadata=0x1/0xff actions=NORMAL"), 1);
    assert_eq!(count("metadata=0x2/0xff actions=NORMAL"), 1);
    assert_eq!(count("priority=20,icmp,nw_ecn=1 actions=drop"), 2);
    assert_eq!(count("priority=1,ip actions=NORMAL"), 4);
    // ctl's own view, in the same syntax.
    let ctl = s.ctl_ok(&["dump-flows"]);
    assert!(
        ctl.contains(&format!(
            "arp,arp_sha={mac_a} actions=write_metadata:0x1/0xff,goto_table:1"
        )) && ctl.contains("table=1, n_packets=1, n_bytes=42, priority=5,metadata=0x1/0xff"),
        "{ctl}"
    );
}

#[test]
fn ovs_ofctl_over_tls_shows_a_certificate_and_checks_ours() {
    let ca = Ca::new("oft");
    let (ours, client) = (ca.issue("switch"), ca.issue("ovs-ofctl"));
    let mut extra = vec!["--openflow".to_string(), "pssl:".to_string()];
    extra.extend(ours.options(&ca));
    let extra: Vec<&str> = extra.iter().map(String::as_str).collect();
    let s = Switched::new("oft", &extra);
    let ssl = "ssl:127.0.0.1:6653";
    let ofctl = |args: &[&str]| {
        let (ok, text) = s.ofctl_via(ssl, &client.options(&ca), args);
        assert!(ok, "ovs-ofctl {args:?}: {text}");
        text
    };
    let show = ofctl(&["show"]);
    assert!(show.contains("n_tables:254, n_buffers:0"), "{show}");
    ofctl(&["add-flow", "priority=100,icmp,actions=drop"]);
    assert_eq!(s.ping(&s.c.ns_a, "10.9.0.2", 2), 0);
    let dumped = ofctl(&["dump-flows", "icmp"]);
    assert!(
        dumped.contains("n_packets=2, n_bytes=196, priority=100,icmp actions=drop"),
        "{dumped}"
    );
    ofctl(&["del-flows", "icmp"]);
    assert_eq!(s.ping(&s.c.ns_a, "10.9.0.2", 2), 2);
    // Many messages each way: 3,000 flows in, their statistics (several replies) out.
    let file = ScratchFile::new("oft.flows");
    let many: String = (0..3000)
        .map(|n| {
            format!(
                "priority=5,ip,nw_dst=10.1.{}.{},actions=drop\n",
                n / 256,
                n % 256
            )
        })
        .collect();
    std::fs::write(&file, many).unwrap();
    ofctl(&["add-flows", &file]);
    let dumped = ofctl(&["dump-flows"]);
    assert_eq!(dumped.matches("priority=5,ip,nw_dst=10.1.").count(), 3000);
    ofctl(&["del-flows", "ip,nw_dst=10.1.0.0/16"]);

    // Refused: a client whose certificate another CA signed, a client that trusts another CA
    // (so not our certificate), and a client without TLS.
    let other = Ca::new("ofx");
    let stranger = other.issue("stranger");
    let (ok, text) = s.ofctl_via(ssl, &stranger.options(&ca), &["show"]);
    assert!(!ok, "a stranger's certificate was taken: {text}");
    let (ok, text) = s.ofctl_via(ssl, &client.options(&other), &["show"]);
    assert!(
        !ok,
        "a certificate the client cannot check was taken: {text}"
    );
    let (ok, text) = s.ofctl_via("tcp:127.0.0.1:6653", &[], &["show"]);
    assert!(!ok, "TCP without TLS was served: {text}");
    // None of them broke the listener.
    assert!(ofctl(&["dump-flows"]).contains("priority=0 actions=NORMAL"));
    // The switch said why it refused the stranger.
    let mut s = s;
    let (_, log) = s.stop();
    assert!(
        log.contains("wirespeed switch: OpenFlow: 127.0.0.1:")
            && log.contains("TLS: invalid peer certificate: UnknownIssuer"),
        "{log}"
    );
}

#[test]
fn tls_without_its_files_or_with_a_bad_one_is_refused_before_anything_opens() {
    let ca = Ca::new("ofe");
    let ours = ca.issue("switch");
    let run = |extra: &[&str]| {
        let mut argv = vec![wirespeed(), "switch", "--port", "1=xdp:wsnone0"];
        argv.extend_from_slice(extra);
        let out = sh(&argv);
        assert!(!out.status.success());
        String::from_utf8_lossy(&out.stderr).into_owned()
    };
    let err = run(&["--openflow", "pssl:7000"]);
    assert!(
        err.contains("pssl:7000:127.0.0.1: TLS needs --private-key, --certificate and --ca-cert"),
        "{err}"
    );
    // The CA's file holds a certificate but the key file given holds none.
    let key = format!("--private-key={}", &*ca.cert);
    let cert = format!("--certificate={}", &*ours.cert);
    let ca_cert = format!("--ca-cert={}", &*ca.cert);
    let err = run(&["--controller", "ssl:127.0.0.1", &key, &cert, &ca_cert]);
    assert!(
        err.contains(&format!("{}: no private key in it", &*ca.cert)),
        "{err}"
    );
    let missing = format!("--ca-cert={}.missing", &*ca.cert);
    let key = format!("--private-key={}", &*ours.key);
    let err = run(&["--controller", "ssl:127.0.0.1", &key, &cert, &missing]);
    assert!(err.contains(".missing: No such file or directory"), "{err}");
    // What only an OpenFlow side (or a TLS one) uses is refused without it, not ignored:
    // a secure fail mode forwarded as a learning switch, and the others did nothing.
    for (extra, says) in [
        (
            &["--fail-mode", "secure"][..],
            "--fail-mode secure: says what the switch does while no --controller is connected",
        ),
        (
            &["--datapath-id", "0xabc"],
            "--datapath-id: is what controllers see; give --openflow or --controller",
        ),
        (
            &[&key[..]],
            "--private-key: is for ssl: and pssl: targets, and none is given",
        ),
        (
            &["--openflow", "ptcp:", &cert],
            "--certificate: is for ssl: and pssl: targets, and none is given",
        ),
        (
            &["--duration", "inf"],
            "--duration inf: must be more than 0 seconds and at most a year",
        ),
    ] {
        let err = run(extra);
        assert!(err.contains(says), "{extra:?}: {err}");
    }
}

/// Waits for a child to exit (at most `limit`, then kills it): its output.
fn wait_output(child: &mut std::process::Child, limit: Duration) -> String {
    let until = std::time::Instant::now() + limit;
    while std::time::Instant::now() < until {
        if let Ok(Some(_)) = child.try_wait() {
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let _ = child.kill();
    let _ = child.wait();
    let mut out = String::new();
    child
        .stdout
        .take()
        .unwrap()
        .read_to_string(&mut out)
        .unwrap();
    out
}

/// A raw OpenFlow client in the switch's namespace: sends `bytes`, reads messages.
struct RawClient {
    stream: TcpStream,
}

impl RawClient {
    /// Connects from inside `ns` (a thread that enters it), exchanging HELLOs.
    fn connect(ns: &str) -> RawClient {
        let ns = ns.to_string();
        let stream = std::thread::spawn(move || {
            let netns = std::fs::File::open(format!("/run/netns/{ns}")).unwrap();
            nix::sched::setns(netns, nix::sched::CloneFlags::CLONE_NEWNET).unwrap();
            TcpStream::connect("127.0.0.1:6653").unwrap()
        })
        .join()
        .unwrap();
        stream
            .set_read_timeout(Some(Duration::from_secs(3)))
            .unwrap();
        let mut c = RawClient { stream };
        let hello = c.read();
        assert_eq!(&hello[..2], &[4, 0], "the switch's HELLO: {hello:?}");
        c
    }

    fn send(&mut self, bytes: &[u8]) {
        self.stream.write_all(bytes).unwrap();
    }

    /// One whole message.
    fn read(&mut self) -> Vec<u8> {
        let mut header = [0u8; 8];
        self.stream.read_exact(&mut header).unwrap();
        let len = usize::from(u16::from_be_bytes([header[2], header[3]]));
        let mut body = vec![0u8; len - 8];
        self.stream.read_exact(&mut body).unwrap();
        [header.to_vec(), body].concat()
    }

    /// Reads the ERROR expected next: (type, code, echoed bytes).
    fn error(&mut self) -> (u16, u16, Vec<u8>) {
        let m = self.read();
        assert_eq!(m[1], 1, "an ERROR: {m:?}");
        (
            u16::from_be_bytes([m[8], m[9]]),
            u16::from_be_bytes([m[10], m[11]]),
            m[12..].to_vec(),
        )
    }

    /// An echo request answered: the connection is up.
    fn is_up(&mut self) -> bool {
        self.send(&[4, 2, 0, 12, 0, 0, 0, 99, 1, 2, 3, 4]);
        let m = self.read();
        m == [4, 3, 0, 12, 0, 0, 0, 99, 1, 2, 3, 4]
    }
}

#[test]
fn malformed_messages_get_the_specifications_errors() {
    let s = Switched::new("ofe", &["--openflow", "ptcp:"]);
    let mut c = RawClient::connect(&s.c.ns_m);
    c.send(&[4, 0, 0, 8, 0, 0, 0, 1]);
    // An unknown message type: BAD_REQUEST / BAD_TYPE with the request echoed.
    c.send(&[4, 99, 0, 8, 0, 0, 0, 2]);
    assert_eq!(c.error(), (1, 1, vec![4, 99, 0, 8, 0, 0, 0, 2]));
    // A FLOW_MOD whose match length runs past the message: BAD_MATCH / BAD_LEN.
    let mut flow_mod = vec![4, 14, 0, 56, 0, 0, 0, 3];
    flow_mod.extend_from_slice(&[0; 40]);
    flow_mod.extend_from_slice(&[0, 1, 0, 200, 0, 0, 0, 0]);
    c.send(&flow_mod);
    let (kind, code, echoed) = c.error();
    assert_eq!((kind, code), (4, 1));
    assert_eq!(echoed, flow_mod);
    // A set-field on a field without its prerequisite: BAD_MATCH / BAD_PREREQ (tcp_dst
    // without ip_proto).
    let mut flow_mod = vec![4, 14, 0, 64, 0, 0, 0, 4];
    flow_mod.extend_from_slice(&[0; 40]);
    flow_mod.extend_from_slice(&[0, 1, 0, 10, 0x80, 0, 28, 2, 0, 80, 0, 0, 0, 0, 0, 0]);
    c.send(&flow_mod);
    let (kind, code, _) = c.error();
    assert_eq!((kind, code), (4, 9));
    // An instruction this switch does not have (type 7): BAD_INSTRUCTION / UNKNOWN_INST.
    let mut flow_mod = vec![4, 14, 0, 64, 0, 0, 0, 5];
    flow_mod.extend_from_slice(&[0; 40]);
    flow_mod.extend_from_slice(&[0, 1, 0, 4, 0, 0, 0, 0]);
    flow_mod.extend_from_slice(&[0, 7, 0, 8, 0, 0, 0, 1]);
    c.send(&flow_mod);
    let (kind, code, _) = c.error();
    assert_eq!((kind, code), (3, 0));
    // A meter instruction naming a meter the switch does not have: METER_MOD_FAILED /
    // INVALID_METER, as Open vSwitch answers.
    flow_mod[57] = 6;
    c.send(&flow_mod);
    let (kind, code, _) = c.error();
    assert_eq!((kind, code), (12, 2));
    assert!(c.is_up(), "the connection stays up after errors");
    assert_eq!(
        s.ctl_ok(&["dump-flows"]).lines().count(),
        1,
        "nothing was added"
    );
    // A length under the header's own eight bytes: the stream cannot be framed past it,
    // so the switch says BAD_LEN and closes.
    c.send(&[4, 2, 0, 4, 0, 0, 0, 6]);
    assert_eq!(c.error().0, 1);
    let mut rest = Vec::new();
    let _ = c.stream.read_to_end(&mut rest);
    assert!(rest.is_empty(), "closed after BAD_LEN: {rest:?}");
    // A client of OpenFlow 1.0 only: HELLO_FAILED / INCOMPATIBLE, then closed.
    let mut old = RawClient::connect(&s.c.ns_m);
    old.send(&[1, 0, 0, 8, 0, 0, 0, 1]);
    let (kind, code, text) = old.error();
    assert_eq!((kind, code), (0, 0));
    assert!(String::from_utf8_lossy(&text).contains("1.3"), "{text:?}");
    // The switch is unharmed.
    assert_eq!(s.ping(&s.c.ns_a, "10.9.0.2", 2), 2);
}

#[test]
fn ovs_ofctl_groups_and_the_action_set() {
    let s = Switched::new("ofg", &["--openflow", "ptcp:"]);
    assert_eq!(s.ping(&s.c.ns_a, "10.9.0.2", 1), 1);
    s.ofctl_ok(&["add-group", "group_id=1,type=all,bucket=output:2"]);
    s.ofctl_ok(&[
        "add-group",
        "group_id=2,type=select,bucket=weight:1,output:1,bucket=weight:0,output:2",
    ]);
    s.ofctl_ok(&["add-flow", "priority=50,in_port=1,icmp,actions=group:1"]);
    s.ofctl_ok(&["add-flow", "priority=50,in_port=2,icmp,actions=group:2"]);
    assert_eq!(s.ping(&s.c.ns_a, "10.9.0.2", 3), 3);
    let groups = s.ofctl_ok(&["dump-groups"]);
    assert!(
        groups.contains(" group_id=1,type=all,bucket=actions=output:2")
            && groups.contains(
                " group_id=2,type=select,bucket=actions=output:1,\
                 bucket=weight:0,actions=output:2"
            ),
        "{groups}"
    );
    let stats = s.ofctl_ok(&["dump-group-stats"]);
    assert!(
        stats.contains("group_id=1,duration=")
            && stats.contains("ref_count=1,packet_count=3,byte_count=294"),
        "{stats}"
    );
    // The select group counts the bucket it chose, never the one of weight 0.
    assert!(
        stats.contains(
            "ref_count=1,packet_count=3,byte_count=294,bucket0:packet_count=3,\
             byte_count=294,bucket1:packet_count=0,byte_count=0"
        ),
        "{stats}"
    );
    // ctl sees the flow with its group action.
    let ctl_flows = s.ctl_ok(&["dump-flows"]);
    assert!(
        ctl_flows.contains("priority=50,icmp,in_port=1 actions=group:1"),
        "{ctl_flows}"
    );
    // A bucket that sends back out of the input port sends nothing (OpenFlow's rule).
    s.ofctl_ok(&["mod-group", "group_id=1,type=all,bucket=output:1"]);
    assert_eq!(s.ping(&s.c.ns_a, "10.9.0.2", 2), 0);
    // A flow naming a group that does not exist is refused.
    let (ok, text) = s.ofctl(&["add-flow", "priority=60,icmp,actions=group:9"]);
    assert!(!ok && text.contains("OFPBAC_BAD_OUT_GROUP"), "{text}");
    // Deleting a group deletes the flows that send to it.
    s.ofctl_ok(&["del-groups", "group_id=1"]);
    let flows = s.ofctl_ok(&["dump-flows"]);
    assert!(
        !flows.contains("group:1") && flows.contains("group:2"),
        "{flows}"
    );
    assert_eq!(s.ping(&s.c.ns_a, "10.9.0.2", 2), 2);
    // The action set: written in table 0, run when the pipeline ends in table 1.
    s.ofctl_ok(&[
        "add-flow",
        "priority=70,in_port=1,icmp,actions=write_actions(output:2),goto_table:1",
    ]);
    s.ofctl_ok(&["add-flow", "table=1,priority=1,actions=drop"]);
    assert_eq!(s.ping(&s.c.ns_a, "10.9.0.2", 2), 2);
    let flows = s.ofctl_ok(&["dump-flows"]);
    assert!(
        flows.contains("priority=70,icmp,in_port=1 actions=write_actions(output:2),goto_table:1"),
        "{flows}"
    );
    let ctl_flows = s.ctl_ok(&["dump-flows"]);
    assert!(
        ctl_flows.contains("actions=write_actions(output:2),goto_table:1"),
        "{ctl_flows}"
    );
    // clear_actions after it, in table 1: nothing is left to send.
    s.ofctl_ok(&["add-flow", "table=1,priority=2,icmp,actions=clear_actions"]);
    assert_eq!(s.ping(&s.c.ns_a, "10.9.0.2", 2), 0);
}

/// A controller may name ports this switch lacks, as Open vSwitch lets it (a controller's
/// configuration may list more ports than the bridge has, and its flooding and group rules
/// name them all): its flows, groups and packet-outs are taken, and what goes to those
/// ports is dropped and counted as unknown_port. ctl still refuses them (a typo there).
#[test]
fn a_controller_may_name_ports_the_switch_lacks() {
    let s = Switched::new("ofu", &["--openflow", "ptcp:"]);
    assert_eq!(s.ping(&s.c.ns_a, "10.9.0.2", 1), 1);
    let unknown = |s: &Switched| field(&s.ctl_ok(&["dump-ports"]), "bridge:", "unknown_port");
    assert_eq!(unknown(&s), 0);
    // Each echo request goes to port 2 and to port 9, which the bridge lacks.
    s.ofctl_ok(&[
        "add-flow",
        "priority=50,in_port=1,icmp,actions=output:2,output:9",
    ]);
    assert_eq!(s.ping(&s.c.ns_a, "10.9.0.2", 3), 3);
    assert_eq!(unknown(&s), 3);
    let flows = s.ofctl_ok(&["dump-flows"]);
    assert!(
        flows.contains(
            "n_packets=3, n_bytes=294, priority=50,icmp,in_port=1 actions=output:2,output:9"
        ),
        "{flows}"
    );
    // A group whose one bucket sends to port 9: the requests go nowhere.
    s.ofctl_ok(&["add-group", "group_id=1,type=all,bucket=output:9"]);
    s.ofctl_ok(&["add-flow", "priority=60,in_port=1,icmp,actions=group:1"]);
    assert_eq!(s.ping(&s.c.ns_a, "10.9.0.2", 2), 0);
    assert_eq!(unknown(&s), 5);
    let packet = "ffffffffffff020000000001080045000020000100004011f9c70a0900630a090002\
                  3039000900080000deadbeef";
    let packet: String = packet.split_whitespace().collect();
    s.ofctl_ok(&["packet-out", "CONTROLLER", "output:9", &packet]);
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    while unknown(&s) != 6 {
        assert!(std::time::Instant::now() < deadline, "{}", unknown(&s));
        std::thread::sleep(Duration::from_millis(50));
    }
    // A fast failover bucket watching port 9 is never live: the group goes on to port 2.
    s.ofctl_ok(&[
        "add-group",
        "group_id=2,type=ff,bucket=watch_port:9,output:9,bucket=watch_port:2,output:2",
    ]);
    s.ofctl_ok(&["add-flow", "priority=70,in_port=1,icmp,actions=group:2"]);
    assert_eq!(s.ping(&s.c.ns_a, "10.9.0.2", 2), 2);
    assert_eq!(unknown(&s), 6);
    // ctl keeps refusing them: on its command line a port the bridge lacks is a typo.
    let out = s.ctl(&["add-flow", "priority=70,icmp,actions=output:9"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && err.contains("output:9: no such port (the bridge has ports 1, 2)"),
        "{err}"
    );
}

/// A file of flows for ovs-ofctl, removed when the test ends.
fn flows_file(tag: &str, text: &str) -> ScratchFile {
    let path = ScratchFile::new(&format!("{tag}.flows"));
    std::fs::write(&*path, text).unwrap();
    path
}

/// `recv` on B's end, ready: it counts each generator's frames until interrupted.
fn receiver_on_b(s: &Switched) -> Running {
    let port_b = format!("xdp:{}", s.c.b);
    let args = [
        "recv",
        "--port",
        &port_b,
        "--duration",
        "60",
        "--json",
        "-q",
    ];
    let mut rx = spawn_in(&s.c.ns_b, &args);
    rx.wait_ready();
    rx
}

/// `gen`'s arguments for `count` UDP frames from A's end at `rate` a second, as
/// generator `id`.
fn gen_from_a(s: &Switched, count: u32, rate: u32, id: u16) -> Vec<String> {
    let port_a = format!("xdp:{}", s.c.a);
    let (count, rate, id) = (count.to_string(), rate.to_string(), id.to_string());
    [
        "gen",
        "--port",
        &port_a,
        "--count",
        &count,
        "--rate",
        &rate,
        "--generator-id",
        &id,
        "--json",
        "-q",
    ]
    .map(String::from)
    .to_vec()
}

/// `ovs-ofctl dump-tables`: each table's rules, the packets that looked it up and those
/// that found a rule there, as the datapath's caches count them. 1000 UDP frames go
/// through table 0 to table 1, which sends them to table 2, where they miss.
#[test]
fn ovs_ofctl_dump_tables_counts_lookups_and_matches() {
    let s = Switched::new("oft", &["--openflow", "ptcp:"]);
    s.ofctl_ok(&["add-flow", "table=0,priority=10,udp,actions=goto_table:1"]);
    s.ofctl_ok(&[
        "add-flow",
        "table=1,priority=10,udp,in_port=1,actions=goto_table:2",
    ]);
    let argv = gen_from_a(&s, 1000, 100_000, 5);
    let argv: Vec<&str> = argv.iter().map(String::as_str).collect();
    assert_eq!(run_json(&s.c.ns_a, &argv)["packets"], 1000);
    let text = s.ofctl_ok(&["dump-tables"]);
    // "  table N:" then "    active=A, lookup=L, matched=M".
    let table = |n: u8| -> (u64, u64, u64) {
        let head = format!("table {n}:");
        let mut lines = text.lines().skip_while(|l| l.trim() != head);
        let counts = lines.nth(1).unwrap_or_else(|| panic!("{head} in {text}"));
        let number = |name: &str| {
            let (_, rest) = counts.split_once(&format!("{name}=")).expect(&text);
            rest.split(',')
                .next()
                .unwrap()
                .trim()
                .parse::<u64>()
                .unwrap()
        };
        (number("active"), number("lookup"), number("matched"))
    };
    assert_eq!(table(1), (1, 1000, 1000), "{text}");
    assert_eq!(table(2), (0, 1000, 0), "{text}");
    // Table 0 also takes the hosts' own packets (normal): every lookup finds a rule.
    let (active, lookups, matched) = table(0);
    assert!(
        active == 2 && lookups >= 1000 && matched == lookups,
        "{text}"
    );
}

/// `ovs-ofctl --bundle` (ONF's bundles in OpenFlow 1.3): a file's flows staged and committed
/// as one. A bundle with one flow the switch refuses changes nothing (ovs-ofctl reports that
/// flow's error, then the commit's MSG_FAILED); replace-flows moves the table to a file's in
/// one commit; a group, and the flow that uses it, go in bundles too.
#[test]
fn ovs_ofctl_bundles_commit_all_or_nothing() {
    let s = Switched::new("ofb", &["--openflow", "ptcp:"]);
    let good = flows_file(
        "ofb-good",
        "priority=50,in_port=1,icmp,actions=output:2\npriority=50,in_port=2,icmp,actions=output:1\n",
    );
    s.ofctl_ok(&["--bundle", "add-flows", &good]);
    assert_eq!(s.ping(&s.c.ns_a, "10.9.0.2", 3), 3);
    let committed = flows(&s);
    assert_eq!(
        committed[..2],
        [
            "cookie=0x0, table=0, n_packets=3, n_bytes=294, priority=50,icmp,in_port=1 actions=output:2",
            "cookie=0x0, table=0, n_packets=3, n_bytes=294, priority=50,icmp,in_port=2 actions=output:1",
        ],
        "{committed:?}"
    );
    assert_eq!(committed.len(), 3, "and the normal rule: {committed:?}");

    let bad = flows_file(
        "ofb-bad",
        "priority=60,icmp,actions=drop\npriority=61,udp,actions=group:9\n",
    );
    let (ok, text) = s.ofctl(&["--bundle", "add-flows", &bad]);
    assert!(
        !ok && text.contains("Error OFPBAC_BAD_OUT_GROUP for: OFPT_FLOW_MOD")
            && text.contains("actions=group:9")
            && text.contains("Error OFPBFC_MSG_FAILED for: ONFT_BUNDLE_CONTROL"),
        "{text}"
    );
    assert_eq!(flows(&s), committed, "nothing of the refused bundle");
    assert_eq!(
        s.ping(&s.c.ns_a, "10.9.0.2", 2),
        2,
        "its drop rule is not in"
    );

    let replacement = flows_file(
        "ofb-replace",
        "priority=0,actions=normal\npriority=70,udp,actions=drop\n",
    );
    s.ofctl_ok(&["--bundle", "replace-flows", &replacement]);
    let replaced: Vec<String> = flows(&s)
        .iter()
        .map(|f| f.rsplit(", ").next().unwrap().to_string())
        .collect();
    assert_eq!(
        replaced,
        ["priority=70,udp actions=drop", "priority=0 actions=NORMAL"]
    );
    assert_eq!(s.ping(&s.c.ns_a, "10.9.0.2", 2), 2);

    s.ofctl_ok(&[
        "--bundle",
        "add-group",
        "group_id=1,type=all,bucket=output:2",
    ]);
    s.ofctl_ok(&[
        "--bundle",
        "add-flow",
        "priority=80,in_port=1,icmp,actions=group:1",
    ]);
    assert_eq!(s.ping(&s.c.ns_a, "10.9.0.2", 2), 2);
    let stats = s.ofctl_ok(&["dump-group-stats"]);
    assert!(
        stats.contains("group_id=1,")
            && stats.contains("ref_count=1,packet_count=2,byte_count=196"),
        "{stats}"
    );
}

/// A bundle is one change for the packets too: UDP from A crosses by a flow that ten
/// bundles delete and put back while 20,000 frames go through, over a rule that drops UDP.
/// Were a bundle's two changes applied apart, the frames between them would meet the drop
/// rule; B receives every one and the drop rule none.
#[test]
fn no_packet_meets_a_bundle_half_applied() {
    let s = Switched::new("ofa", &["--openflow", "ptcp:"]);
    s.ofctl_ok(&["add-flow", "priority=1,udp,actions=drop"]);
    s.ofctl_ok(&["add-flow", "priority=50,in_port=1,udp,actions=output:2"]);
    let swap = flows_file(
        "ofa-swap",
        "delete in_port=1,udp\nadd priority=50,in_port=1,udp,actions=output:2\n",
    );
    let rx = receiver_on_b(&s);
    let argv = gen_from_a(&s, 20_000, 20_000, 4);
    let argv: Vec<&str> = argv.iter().map(String::as_str).collect();
    let mut tx = spawn_in(&s.c.ns_a, &argv);
    tx.wait_ready();
    for _ in 0..10 {
        s.ofctl_ok(&["--bundle", "add-flows", &swap]);
        std::thread::sleep(Duration::from_millis(50));
    }
    let (code, stdout, stderr) = tx.exit();
    assert_eq!(code, Some(0), "{stderr}");
    let g: serde_json::Value = serde_json::from_str(stdout.trim()).unwrap();
    assert_eq!(g["packets"], 20000, "{g}");
    let (rj, _) = rx.interrupt();
    assert_eq!(rj["generators"][0]["generator"], 4, "{rj}");
    assert_eq!(rj["generators"][0]["received"], 20000, "{rj}");
    let drop_rule = flows(&s)
        .into_iter()
        .find(|f| f.ends_with("priority=1,udp actions=drop"))
        .expect("the drop rule");
    assert!(drop_rule.contains("n_packets=0,"), "{drop_rule}");
}

/// A meter from ovs-ofctl: one packet a second with a burst of 10, on the UDP flow from A.
/// Of 1000 frames sent in a hundredth of a second, B receives exactly the burst; the meter's
/// statistics, the switch's drops and ovs-ofctl agree on the 990 its band dropped. A flow
/// naming a missing meter is refused, and deleting the meter deletes its flow.
#[test]
fn ovs_ofctl_meters_drop_what_exceeds_their_rate() {
    let mut s = Switched::new("ofm", &["--openflow", "ptcp:"]);
    let features = s.ofctl_ok(&["meter-features"]);
    assert!(
        features.contains("max_meter:4096")
            && features.contains("band_types: drop")
            && features.contains("capabilities: kbps pktps burst stats")
            && features.contains("max_bands:1"),
        "{features}"
    );
    let meter = "meter=1,pktps,burst,stats,bands=type=drop,rate=1,burst_size=10";
    s.ofctl_ok(&["add-meter", meter]);
    let (ok, text) = s.ofctl(&["add-meter", meter]);
    assert!(!ok && text.contains("OFPMMFC_METER_EXISTS"), "{text}");
    s.ofctl_ok(&[
        "add-flow",
        "priority=50,in_port=1,udp,actions=meter:1,output:2",
    ]);
    let rx = receiver_on_b(&s);
    let argv = gen_from_a(&s, 1000, 100_000, 3);
    let argv: Vec<&str> = argv.iter().map(String::as_str).collect();
    let g = run_json(&s.c.ns_a, &argv);
    let frame = g["bytes"].as_u64().unwrap() / 1000;
    let (rj, _) = rx.interrupt();
    assert_eq!(rj["generators"][0]["generator"], 3, "{rj}");
    assert_eq!(rj["generators"][0]["received"], 10, "{rj}");
    let stats = s.ofctl_ok(&["meter-stats"]);
    let counts = format!(
        "meter:1 flow_count:1 packet_in_count:1000 byte_in_count:{} duration:",
        1000 * frame
    );
    let band = format!("0: packet_count:990 byte_count:{}", 990 * frame);
    assert!(stats.contains(&counts) && stats.contains(&band), "{stats}");
    // The same counts for Prometheus (published once a second), which promtool accepts.
    let dropped = "wirespeed_switch_meter_dropped_packets_total{meter=\"1\"} 990";
    let until = std::time::Instant::now() + Duration::from_secs(5);
    let mut metrics = s.ctl_ok(&["metrics"]);
    while !metrics.contains(dropped) && std::time::Instant::now() < until {
        std::thread::sleep(Duration::from_millis(100));
        metrics = s.ctl_ok(&["metrics"]);
    }
    assert!(
        metrics.contains(dropped)
            && metrics.contains("wirespeed_switch_meter_packets_total{meter=\"1\"} 1000"),
        "{metrics}"
    );
    common::prometheus::assert_promtool_accepts(&metrics);
    let meters = s.ofctl_ok(&["dump-meters"]);
    assert!(
        meters.contains("meter=1 pktps burst stats bands=")
            && meters.contains("type=drop rate=1 burst_size=10"),
        "{meters}"
    );
    let of_flows = flows(&s).join("\n");
    assert!(
        of_flows.contains("priority=50,udp,in_port=1 actions=meter:1,output:2"),
        "{of_flows}"
    );
    let ctl_flows = s.ctl_ok(&["dump-flows"]);
    assert!(
        ctl_flows.contains("priority=50,udp,in_port=1 actions=meter:1,output:2"),
        "{ctl_flows}"
    );
    // A flow naming a meter the switch does not have is refused, as Open vSwitch does; ctl
    // says where meters come from.
    let (ok, text) = s.ofctl(&["add-flow", "priority=60,udp,actions=meter:9,output:2"]);
    assert!(!ok && text.contains("OFPMMFC_INVALID_METER"), "{text}");
    let refused = s.ctl(&["add-flow", "priority=60,udp,actions=meter:9,output:2"]);
    assert!(
        !refused.status.success()
            && String::from_utf8_lossy(&refused.stderr)
                .contains("meter:9: no such meter (ctl add-meter adds one, as OpenFlow can)"),
        "{refused:?}"
    );
    // Deleting the meter deletes the flow that used it.
    s.ofctl_ok(&["del-meter", "meter=1"]);
    assert!(!flows(&s).join("\n").contains("meter:1"));
    assert_eq!(s.ofctl_ok(&["dump-meters"]).lines().count(), 1);
    let (j, _) = s.stop();
    assert_metered_alone(&j, 990);
}

/// Open vSwitch's `meter=controller`, which every packet-in passes: at one a second with a
/// burst of 5, of 1000 frames a flow sends to the controller 5 become packet-ins and 995
/// are counted as metered, by the meter and by the switch.
#[test]
fn the_controllers_meter_limits_packet_ins() {
    let mut s = Switched::new("ofc", &["--openflow", "ptcp:"]);
    s.ofctl_ok(&[
        "add-meter",
        "meter=controller,pktps,burst,stats,bands=type=drop,rate=1,burst_size=5",
    ]);
    s.ofctl_ok(&["add-flow", "priority=50,in_port=1,udp,actions=controller"]);
    let port_a = format!("xdp:{}", s.c.a);
    run_json(
        &s.c.ns_a,
        &[
            "gen", "--port", &port_a, "--count", "1000", "--rate", "100000", "--json", "-q",
        ],
    );
    let stats = s.ofctl_ok(&["meter-stats"]);
    assert!(
        stats.contains("meter:controller flow_count:0 packet_in_count:1000 ")
            && stats.contains("0: packet_count:995 "),
        "{stats}"
    );
    let (j, _) = s.stop();
    assert_eq!(j["to_controller"], 5, "{j}");
    assert_metered_alone(&j, 995);
}

/// The switch's summary counts `metered` drops and no other datapath drop but table misses
/// (the hosts' own neighbour and router chatter, which no flow takes).
fn assert_metered_alone(j: &serde_json::Value, metered: u64) {
    let drops = j["bridge_drops"].as_object().unwrap();
    for (reason, n) in drops {
        let want = match reason.as_str() {
            "metered" => metered,
            "table_miss" => continue,
            _ => 0,
        };
        assert_eq!(n.as_u64(), Some(want), "{reason}: {j}");
    }
    assert!(drops.contains_key("metered"), "{j}");
}

/// A FLOW_MOD as a controller sends it, from ovs-ofctl's flow syntax.
fn flow_mod(text: &str, command: u8, flags: u16, xid: u32) -> Vec<u8> {
    use wirespeed_switch::openflow::message::OfFlowMod;
    let rule = wirespeed_switch::parse_rule(text).unwrap();
    OfFlowMod::for_rule(rule, command, flags).encode(xid)
}

/// A bundle opened and then left alone for 10 s is dropped with ONF's TIMEOUT error echoing
/// the request that opened it, as Open vSwitch does; the connection stays up, and the
/// bundle's id is free again.
#[test]
fn an_idle_bundle_times_out() {
    use wirespeed_switch::openflow::bundle::{BundleControl, control};
    let s = Switched::new("obt", &["--openflow", "ptcp:"]);
    let mut c = RawClient::connect(&s.c.ns_m);
    c.stream
        .set_read_timeout(Some(Duration::from_secs(8)))
        .unwrap();
    c.send(&[4, 0, 0, 8, 0, 0, 0, 1]);
    let open = |xid| {
        let request = BundleControl {
            bundle_id: 9,
            kind: control::OPEN_REQUEST,
            flags: 0,
        };
        (request.encode(xid), request.reply(xid))
    };
    let (request, reply) = open(42);
    c.send(&request);
    assert_eq!(c.read(), reply);
    let opened = std::time::Instant::now();
    let error = loop {
        let m = c.read();
        // The switch's ECHO_REQUESTs while it waits: answered, as a live controller does.
        if m[1] == 2 {
            let mut answer = m.clone();
            answer[1] = 3;
            c.send(&answer);
            continue;
        }
        break m;
    };
    let waited = opened.elapsed();
    // ERROR, xid 42; type EXPERIMENTER, code 2314 (TIMEOUT), ONF's id; the request echoed.
    assert_eq!(&error[..2], &[4, 1], "{error:?}");
    assert_eq!(&error[4..8], &42u32.to_be_bytes());
    assert_eq!(&error[8..12], &[0xff, 0xff, 0x09, 0x0a], "{error:?}");
    assert_eq!(&error[12..16], &0x4f4e_4600u32.to_be_bytes());
    assert_eq!(&error[16..], &request[..]);
    assert!(
        waited >= Duration::from_secs(9) && waited < Duration::from_secs(17),
        "{waited:?}"
    );
    let (request, reply) = open(43);
    c.send(&request);
    assert_eq!(c.read(), reply, "the id is free again");
}

/// Rules deleted by `ctl` rather than by a controller: the controllers hear of each that
/// asked (FLOW_REMOVED, as a delete by another controller is told), whether `del-flows`,
/// `replace-flows`, `del-groups` or `del-meter` took it, and of none that did not ask.
#[test]
fn ctl_deletes_send_flow_removed() {
    const SEND_FLOW_REM: u16 = 1;
    let s = Switched::new("ofd", &["--openflow", "ptcp:"]);
    let mut c = RawClient::connect(&s.c.ns_m);
    c.send(&[4, 0, 0, 8, 0, 0, 0, 1]);
    let add = |c: &mut RawClient, text: &str, flags: u16, xid: u32| {
        c.send(&flow_mod(text, 0, flags, xid));
    };
    add(
        &mut c,
        "cookie=0x51,priority=8,tcp,actions=drop",
        SEND_FLOW_REM,
        2,
    );
    add(&mut c, "cookie=0x52,priority=8,udp,actions=drop", 0, 3);
    add(
        &mut c,
        "cookie=0x53,priority=8,sctp,actions=drop",
        SEND_FLOW_REM,
        4,
    );
    assert!(c.is_up(), "the adds are in");
    s.ctl_ok(&["add-group", "group_id=1,type=all,bucket=output:2"]);
    add(
        &mut c,
        "cookie=0x54,priority=9,icmp,actions=group:1",
        SEND_FLOW_REM,
        5,
    );
    s.ctl_ok(&["add-meter", "meter=1,pktps,bands=type=drop,rate=10"]);
    add(
        &mut c,
        "cookie=0x55,priority=9,arp,actions=meter:1,normal",
        SEND_FLOW_REM,
        6,
    );
    assert!(c.is_up());
    // (message type, cookie, priority, reason)
    let removed = |c: &mut RawClient| {
        let m = c.read();
        (
            m[1],
            u64::from_be_bytes(m[8..16].try_into().unwrap()),
            u16::from_be_bytes([m[16], m[17]]),
            m[18],
        )
    };

    s.ctl_ok(&["del-flows", "tcp"]);
    assert_eq!(removed(&mut c), (11, 0x51, 8, 2), "del-flows: DELETE");
    s.ctl_ok(&["del-groups", "group_id=1"]);
    assert_eq!(
        removed(&mut c),
        (11, 0x54, 9, 3),
        "del-groups: GROUP_DELETE"
    );
    s.ctl_ok(&["del-meter", "meter=1"]);
    assert_eq!(removed(&mut c), (11, 0x55, 9, 2), "del-meter: DELETE");
    let file = common::ScratchFile::new("ofd.flows");
    std::fs::write(
        &*file,
        "priority=0,actions=normal
",
    )
    .unwrap();
    assert_eq!(
        s.ctl_ok(&["replace-flows", &file]).trim(),
        "0 flows added, 0 changed, 2 deleted, 1 kept"
    );
    assert_eq!(removed(&mut c), (11, 0x53, 8, 2), "replace-flows: DELETE");
    assert!(c.is_up(), "nothing for the udp rule, which did not ask");
}

#[test]
fn flow_removed_roles_port_status_and_echo() {
    const SEND_FLOW_REM: u16 = 1;
    let s = Switched::new("ofr", &["--openflow", "ptcp:"]);
    let mut c = RawClient::connect(&s.c.ns_m);
    c.send(&[4, 0, 0, 8, 0, 0, 0, 1]);
    // A hard timeout of 1 s: FLOW_REMOVED, reason HARD_TIMEOUT (1), with the rule's cookie.
    c.send(&flow_mod(
        "cookie=0x42,hard_timeout=1,priority=7,udp,actions=drop",
        0,
        SEND_FLOW_REM,
        2,
    ));
    let removed = c.read();
    assert_eq!(removed[1], 11, "FLOW_REMOVED: {removed:?}");
    assert_eq!(&removed[8..16], &0x42u64.to_be_bytes());
    assert_eq!(
        (u16::from_be_bytes([removed[16], removed[17]]), removed[18]),
        (7, 1)
    );
    // A delete of a rule that asked: reason DELETE (2); one that did not ask: nothing.
    c.send(&flow_mod(
        "cookie=0x43,priority=8,tcp,actions=drop",
        0,
        SEND_FLOW_REM,
        3,
    ));
    c.send(&flow_mod(
        "cookie=0x44,priority=9,tcp,actions=drop",
        0,
        0,
        4,
    ));
    c.send(&flow_mod("tcp,actions=drop", 3, 0, 5));
    let removed = c.read();
    assert_eq!(
        (removed[1], &removed[8..16], removed[18]),
        (11, &0x43u64.to_be_bytes()[..], 2)
    );
    assert!(c.is_up(), "nothing else came before the echo reply");

    // Roles: master with generation 5; a second client's master request of generation 4 is
    // stale; as slave it may not change flows; the first is still master.
    let role = |role: u32, generation: u64| {
        let mut m = vec![4, 24, 0, 24, 0, 0, 0, 9];
        m.extend_from_slice(&role.to_be_bytes());
        m.extend_from_slice(&[0; 4]);
        m.extend_from_slice(&generation.to_be_bytes());
        m
    };
    c.send(&role(2, 5));
    let reply = c.read();
    assert_eq!((reply[1], &reply[8..12]), (25, &2u32.to_be_bytes()[..]));
    let mut other = RawClient::connect(&s.c.ns_m);
    other.send(&role(2, 4));
    let (kind, code, _) = other.error();
    assert_eq!((kind, code), (11, 0), "a stale generation");
    other.send(&role(3, 6));
    assert_eq!(other.read()[1], 25);
    other.send(&flow_mod("priority=9,udp,actions=drop", 0, 0, 10));
    let (kind, code, _) = other.error();
    assert_eq!((kind, code), (1, 10), "a slave may not modify state");

    // A port's interface set down and up: PORT_STATUS, reason MODIFY, config PORT_DOWN and
    // state LINK_DOWN, then config 0 and state LIVE.
    for (state, config, bit) in [("down", 1u32, 1u32), ("up", 0, 4)] {
        must(&["ip", "-n", &s.c.ns_m, "link", "set", &s.c.ma, state]);
        let status = c.read();
        assert_eq!((status[1], status[8]), (12, 2), "PORT_STATUS: {status:?}");
        assert_eq!(&status[16..20], &1u32.to_be_bytes(), "port 1");
        let word = |at: usize| u32::from_be_bytes(status[at..at + 4].try_into().unwrap());
        assert_eq!(
            (word(48), word(52)),
            (config, bit),
            "config, state: {state}"
        );
    }
    // Silence: an ECHO_REQUEST after 5 s; no answer, and the connection is closed.
    other
        .stream
        .set_read_timeout(Some(Duration::from_secs(8)))
        .unwrap();
    // A slave hears of ports too (the specification's default): two PORT_STATUS first.
    for _ in 0..2 {
        assert_eq!(other.read()[1], 12);
    }
    let echo = other.read();
    assert_eq!(echo[1], 2, "ECHO_REQUEST: {echo:?}");
    let mut rest = Vec::new();
    let _ = other.stream.read_to_end(&mut rest);
    assert!(rest.is_empty(), "closed: {rest:?}");
}

/// `nw_ttl`, which ovs-ofctl sends over OpenFlow 1.3 as Nicira's `NXM_NX_IP_TTL` (the basic
/// class has no TTL): pings leave host A with TTL 64 and take the rule that asks for it.
#[test]
fn ovs_ofctl_matches_the_ttl() {
    let s = Switched::new("ofl", &["--openflow", "ptcp:"]);
    s.ofctl_ok(&[
        "add-flow",
        "priority=20,icmp,in_port=1,nw_ttl=64,actions=output:2",
    ]);
    s.ofctl_ok(&[
        "add-flow",
        "priority=20,icmp,in_port=1,nw_ttl=63,actions=drop",
    ]);
    assert_eq!(s.ping(&s.c.ns_a, "10.9.0.2", 3), 3);
    let mut ttl_lines: Vec<String> = flows(&s)
        .into_iter()
        .filter(|l| l.contains("nw_ttl"))
        .collect();
    ttl_lines.sort();
    assert_eq!(
        ttl_lines,
        [
            "cookie=0x0, table=0, n_packets=0, n_bytes=0, priority=20,icmp,in_port=1,nw_ttl=63 actions=drop",
            "cookie=0x0, table=0, n_packets=3, n_bytes=294, priority=20,icmp,in_port=1,nw_ttl=64 actions=output:2",
        ]
    );
}

/// `set_queue` (a QoS controller's way of choosing an egress queue) installs, reads back as
/// written, and forwards: these ports have one queue each, as an Open vSwitch port without
/// QoS has.
#[test]
fn ovs_ofctl_set_queue_installs_and_forwards() {
    let s = Switched::new("ofq", &["--openflow", "ptcp:"]);
    s.ofctl_ok(&[
        "add-flow",
        "priority=20,icmp,in_port=1,actions=set_queue:3,output:2",
    ]);
    s.ofctl_ok(&[
        "add-flow",
        "priority=20,icmp,in_port=2,actions=write_actions(set_queue:4,output:1)",
    ]);
    assert_eq!(s.ping(&s.c.ns_a, "10.9.0.2", 3), 3);
    let mut queue_lines: Vec<String> = flows(&s)
        .into_iter()
        .filter(|l| l.contains("set_queue"))
        .collect();
    queue_lines.sort();
    assert_eq!(
        queue_lines,
        [
            "cookie=0x0, table=0, n_packets=3, n_bytes=294, priority=20,icmp,in_port=1 actions=set_queue:3,output:2",
            "cookie=0x0, table=0, n_packets=3, n_bytes=294, priority=20,icmp,in_port=2 actions=write_actions(set_queue:4,output:1)",
        ]
    );
    let ctl = s.ctl_ok(&["dump-flows"]);
    assert!(
        ctl.contains("icmp,in_port=1 actions=set_queue:3,output:2"),
        "{ctl}"
    );
    // No port has queues configured: every port's list and one port's are empty, as Open
    // vSwitch answers for ports without QoS; a port the bridge lacks is BAD_PORT. (The
    // request was refused BAD_TYPE.)
    let all = s.ofctl_ok(&["queue-get-config"]);
    assert_eq!(all.trim(), "OFPT_QUEUE_GET_CONFIG_REPLY (OF1.3) (xid=0x2):");
    let one = s.ofctl_ok(&["queue-get-config", "2"]);
    assert_eq!(one.trim(), "OFPT_QUEUE_GET_CONFIG_REPLY (OF1.3) (xid=0x2):");
    // (ovs-ofctl prints the error and exits 0.)
    let (_, text) = s.ofctl(&["queue-get-config", "9"]);
    assert!(
        text.contains("OFPT_ERROR (OF1.3) (xid=0x2): OFPQOFC_BAD_PORT"),
        "{text}"
    );
}

/// ctl takes the flow syntax an Open vSwitch user writes: OpenFlow 1.2's field names,
/// pop_vlan, the send_flow_rem flag (which ovs-ofctl then shows) and out_port= to select.
#[test]
fn ctl_takes_ovs_ofctl_names_flags_and_out_port() {
    let s = Switched::new("ofn", &["--openflow", "ptcp:"]);
    s.ctl_ok(&[
        "add-flow",
        "priority=20,icmp,in_port=1,send_flow_rem,actions=output:2",
    ]);
    s.ctl_ok(&[
        "add-flow",
        "priority=20,icmp,in_port=2,actions=pop_vlan,output:1",
    ]);
    s.ctl_ok(&[
        "add-flow",
        "priority=30,tcp,in_port=1,tcp_dst=8080,actions=set_field:80->tcp_dst,output:2",
    ]);
    assert_eq!(s.ping(&s.c.ns_a, "10.9.0.2", 2), 2);
    let mut listed: Vec<String> = flows(&s)
        .into_iter()
        .filter(|l| l.contains("priority=20") || l.contains("priority=30"))
        .collect();
    listed.sort();
    assert_eq!(
        listed,
        [
            "cookie=0x0, table=0, n_packets=0, n_bytes=0, priority=30,tcp,in_port=1,tp_dst=8080 actions=set_field:80->tcp_dst,output:2",
            "cookie=0x0, table=0, n_packets=2, n_bytes=196, priority=20,icmp,in_port=2 actions=pop_vlan,output:1",
            "cookie=0x0, table=0, n_packets=2, n_bytes=196, send_flow_rem priority=20,icmp,in_port=1 actions=output:2",
        ]
    );
    let out2 = s.ctl_ok(&["dump-flows", "out_port=2"]);
    assert_eq!(out2.lines().count(), 2, "the two rules to port 2:\n{out2}");
    assert!(!out2.contains("in_port=2"), "{out2}");
}
