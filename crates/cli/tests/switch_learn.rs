//! Open vSwitch's `learn` action, driven by `ovs-ofctl` over OpenFlow 1.3: the MAC-learning
//! pipeline of Open vSwitch's advanced tutorial (learn where each source is, then send by
//! what was learned, flooding what is not known yet). The first ping floods and teaches the
//! switch both hosts; after it, pings go by the learned rules, which ovs-ofctl and
//! `wirespeed ctl` read back as Open vSwitch prints them, with exact counts. Then the
//! tutorial's own VLAN learning switch, its tables as written there, judged by tcpdump on
//! both hosts.

mod common;
use common::switched::{Switched, field, flow_without_duration};
use common::*;

/// Table 0 learns, into table 10, that the source's address is behind the port it came in
/// on; table 10 (what was learned) puts the way to the destination in reg0; table 1 floods
/// when reg0 holds no port, else outputs to it.
const PIPELINE: [&str; 3] = [
    "table=0,priority=10,actions=learn(table=10,NXM_OF_ETH_DST[]=NXM_OF_ETH_SRC[],load:NXM_OF_IN_PORT[]->NXM_NX_REG0[0..15]),resubmit(,10),resubmit(,1)",
    "table=1,priority=10,reg0=0,actions=flood",
    "table=1,priority=5,actions=output:NXM_NX_REG0[0..15]",
];

/// The lines of `table` (`table=10`) in a dump, without durations, sorted.
fn lines(dump: &str, table: &str) -> Vec<String> {
    let mut lines: Vec<String> = dump
        .lines()
        .filter(|l| l.contains(&format!(" {table}, ")))
        .map(flow_without_duration)
        .collect();
    lines.sort();
    lines
}

#[test]
fn ovs_ofctl_learn_teaches_the_switch_where_hosts_are() {
    let s = Switched::new("oln", &["--openflow", "ptcp:"]);
    for flow in PIPELINE {
        s.ofctl_ok(&["add-flow", flow]);
    }
    let (mac_a, mac_b) = (mac_of(&s.c.ns_a, &s.c.a), mac_of(&s.c.ns_b, &s.c.b));
    // No ARP: the pings alone cross, so each count is theirs.
    permanent_neighbour(&s.c.ns_a, &s.c.a, "10.9.0.2", &mac_b);
    permanent_neighbour(&s.c.ns_b, &s.c.b, "10.9.0.1", &mac_a);
    let mut learned = [
        format!("table=10, dl_dst={mac_a} actions=load:0x1->NXM_NX_REG0[0..15]"),
        format!("table=10, dl_dst={mac_b} actions=load:0x2->NXM_NX_REG0[0..15]"),
    ];
    learned.sort();

    // The first echo floods, and so may its reply: the learned rules come in the control
    // side's next round.
    assert_eq!(s.ping(&s.c.ns_a, "10.9.0.2", 1), 1);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    while lines(&s.ofctl_ok(&["dump-flows"]), "table=10").len() < 2 {
        assert!(std::time::Instant::now() < deadline, "nothing learned");
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let before = s.ofctl_ok(&["dump-flows"]);

    assert_eq!(s.ping(&s.c.ns_a, "10.9.0.2", 3), 3);
    let after = s.ofctl_ok(&["dump-flows"]);
    // Each echo and reply is a 98-byte frame.
    for (rule, more) in [
        (format!("dl_dst={mac_a}"), 3),
        (format!("dl_dst={mac_b}"), 3),
        ("reg0=0".to_string(), 0),
        ("output:NXM_NX_REG0".to_string(), 6),
        ("actions=learn".to_string(), 6),
    ] {
        for (name, unit) in [("n_packets", 1), ("n_bytes", 98)] {
            assert_eq!(
                field(&after, &rule, name) - field(&before, &rule, name),
                more * unit,
                "{rule} {name}: {after}"
            );
        }
    }

    // Learned rules read back as Open vSwitch prints them, by ovs-ofctl and by ctl.
    let strip_counts = |line: &String| {
        line.split(", ")
            .filter(|f| !f.starts_with("n_packets=") && !f.starts_with("n_bytes="))
            .collect::<Vec<_>>()
            .join(", ")
            .replace("cookie=0x0, ", "")
    };
    let from_ovs: Vec<String> = lines(&after, "table=10").iter().map(strip_counts).collect();
    assert_eq!(from_ovs, learned, "ovs-ofctl");
    let from_ctl: Vec<String> = lines(&s.ctl_ok(&["dump-flows"]), "table=10")
        .iter()
        .map(strip_counts)
        .collect();
    assert_eq!(from_ctl, learned, "ctl");
    // Every packet passed it: the first ping's two and the three echoes and replies.
    let learning = lines(&after, "table=0")
        .into_iter()
        .find(|l| l.contains("actions=learn"));
    assert_eq!(
        learning.as_deref(),
        Some(&*format!(
            "cookie=0x0, table=0, n_packets=8, n_bytes=784, priority=10 actions={}",
            PIPELINE[0].split("actions=").nth(1).unwrap()
        )),
        "the learning rule reads back as ovs-ofctl wrote it"
    );

    // A PACKET_OUT learns too, and its rule is there before the next message.
    let frame = format!("ffffffffffff020000000099{:0<100}", "88b5");
    s.ofctl_ok(&[
        "packet-out",
        "1",
        "learn(table=20,NXM_OF_ETH_DST[]=NXM_OF_ETH_SRC[],output:NXM_OF_IN_PORT[])",
        &frame,
    ]);
    let table_20: Vec<String> = lines(&s.ofctl_ok(&["dump-flows", "table=20"]), "table=20")
        .iter()
        .map(strip_counts)
        .collect();
    assert_eq!(
        table_20,
        ["table=20, dl_dst=02:00:00:00:00:99 actions=output:1"]
    );

    // What this switch cannot learn is refused with OpenFlow's error, and nothing is added.
    let (ok, text) = s.ofctl(&[
        "add-flow",
        "table=3,actions=learn(table=10,fin_idle_timeout=5,NXM_OF_ETH_DST[])",
    ]);
    assert!(!ok && text.contains("OFPBAC_BAD_ARGUMENT"), "{text}");
    assert!(!s.ofctl_ok(&["dump-flows"]).contains("table=3"));
}

/// As in Open vSwitch, packets that take the learning path learn the rule again, which
/// restarts its hard timeout: a learned rule with `hard_timeout=2` outlives 2 s while pings
/// keep coming, and goes within the timeout (and a second's housekeeping) of the last one.
#[test]
fn learning_again_keeps_a_learned_rule_while_packets_come() {
    let s = Switched::new("olh", &["--openflow", "ptcp:"]);
    s.ofctl_ok(&[
        "add-flow",
        "table=0,priority=10,actions=learn(table=10,hard_timeout=2,NXM_OF_ETH_DST[]=NXM_OF_ETH_SRC[],load:NXM_OF_IN_PORT[]->NXM_NX_REG0[0..15]),resubmit(,10),resubmit(,1)",
    ]);
    s.ofctl_ok(&["add-flow", PIPELINE[1]]);
    s.ofctl_ok(&["add-flow", PIPELINE[2]]);
    // 20 pings 0.2 s apart: 4 s, twice the hard timeout.
    assert_eq!(s.ping(&s.c.ns_a, "10.9.0.2", 20), 20);
    let dump = s.ofctl_ok(&["dump-flows", "table=10"]);
    let learned: Vec<&str> = dump.lines().filter(|l| l.contains("dl_dst=")).collect();
    assert_eq!(learned.len(), 2, "{dump}");
    for line in learned {
        let seconds: f64 = line
            .split(", ")
            .find_map(|f| f.strip_prefix("duration="))
            .and_then(|d| d.trim_end_matches('s').parse().ok())
            .unwrap_or_else(|| panic!("no duration: {line}"));
        assert!(seconds > 3.0, "learned once, and kept: {line}");
        assert!(line.contains("hard_timeout=2"), "{line}");
    }
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    while s.ofctl_ok(&["dump-flows", "table=10"]).contains("dl_dst=") {
        assert!(
            std::time::Instant::now() < deadline,
            "the learned rules outlived their hard timeout without packets"
        );
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
}

/// `delete_learned`, as in Open vSwitch: deleting the learning rule deletes the rules it
/// learned (those of its learn's table with its learn's cookie), and the controllers hear of
/// each that asked (FLOW_REMOVED, reason delete). Other rules of that table stay.
#[test]
fn deleting_a_delete_learned_rule_deletes_what_it_learned() {
    let s = Switched::new("odl", &["--openflow", "ptcp:"]);
    let learning = "table=0,priority=10,actions=learn(table=10,cookie=0x5,send_flow_rem,\
                    delete_learned,NXM_OF_ETH_DST[]=NXM_OF_ETH_SRC[],\
                    load:NXM_OF_IN_PORT[]->NXM_NX_REG0[0..15]),resubmit(,10),resubmit(,1)";
    for flow in [
        learning,
        PIPELINE[1],
        PIPELINE[2],
        "table=10,cookie=0x6,dl_dst=02:00:00:00:00:99,actions=drop",
    ] {
        s.ofctl_ok(&["add-flow", flow]);
    }
    let (mac_a, mac_b) = (mac_of(&s.c.ns_a, &s.c.a), mac_of(&s.c.ns_b, &s.c.b));
    permanent_neighbour(&s.c.ns_a, &s.c.a, "10.9.0.2", &mac_b);
    permanent_neighbour(&s.c.ns_b, &s.c.b, "10.9.0.1", &mac_a);
    // A controller that stays connected and prints what the switch tells it.
    let monitor = s.monitor();

    assert_eq!(s.ping(&s.c.ns_a, "10.9.0.2", 1), 1);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    while lines(&s.ofctl_ok(&["dump-flows"]), "table=10").len() < 3 {
        assert!(std::time::Instant::now() < deadline, "nothing learned");
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let dump = s.ofctl_ok(&["dump-flows", "table=0"]);
    assert!(
        dump.contains("learn(table=10,send_flow_rem,delete_learned,cookie=0x5,"),
        "ovs-ofctl reads the learn back: {dump}"
    );

    s.ofctl_ok(&["del-flows", "--strict", "table=0,priority=10"]);
    let table_10 = lines(&s.ofctl_ok(&["dump-flows"]), "table=10");
    assert_eq!(table_10.len(), 1, "{table_10:?}");
    assert!(table_10[0].contains("cookie=0x6"), "{table_10:?}");
    // FLOW_REMOVED for each learned rule (they asked), not for the learning rule (it did
    // not).
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    while monitor.told().matches("OFPT_FLOW_REMOVED").count() < 2
        && std::time::Instant::now() < deadline
    {
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    // No more come after them.
    std::thread::sleep(std::time::Duration::from_millis(200));
    let text = monitor.told();
    let removed: Vec<&str> = text
        .lines()
        .filter(|l| l.contains("OFPT_FLOW_REMOVED"))
        .collect();
    assert_eq!(removed.len(), 2, "{text}");
    for mac in [&mac_a, &mac_b] {
        assert!(
            removed.iter().any(|l| l.contains(&format!("dl_dst={mac}"))
                && l.contains("reason=delete")
                && l.contains("table_id=10")),
            "{mac}: {text}"
        );
    }
}

/// Open vSwitch's advanced tutorial, its tables as written there (ports 1 and 2 of its four:
/// 1 a trunk, 2 an access port of VLAN 20): table 0 admits, table 1 tags what the access port
/// sends, table 2 learns each source's port per VLAN, table 3 looks the destination up,
/// table 4 sends it out, untagged on the access port, flooding what is not learned yet.
const TUTORIAL: [&str; 13] = [
    "table=0,dl_src=01:00:00:00:00:00/01:00:00:00:00:00,actions=drop",
    "table=0,dl_dst=01:80:c2:00:00:00/ff:ff:ff:ff:ff:f0,actions=drop",
    "table=0,priority=0,actions=resubmit(,1)",
    "table=1,priority=0,actions=drop",
    "table=1,priority=99,in_port=1,actions=resubmit(,2)",
    "table=1,priority=99,in_port=2,vlan_tci=0,actions=mod_vlan_vid:20,resubmit(,2)",
    "table=2 actions=learn(table=10, NXM_OF_VLAN_TCI[0..11], NXM_OF_ETH_DST[]=NXM_OF_ETH_SRC[], load:NXM_OF_IN_PORT[]->NXM_NX_REG0[0..15]), resubmit(,3)",
    "table=3 priority=50 actions=resubmit(,10), resubmit(,4)",
    "table=3 priority=99 dl_dst=01:00:00:00:00:00/01:00:00:00:00:00 actions=resubmit(,4)",
    "table=4 reg0=1 actions=1",
    "table=4 reg0=2 actions=strip_vlan,2",
    "table=4 reg0=0 priority=99 dl_vlan=20 actions=1,strip_vlan,2",
    "table=4 reg0=0 priority=50 actions=1",
];

#[test]
fn open_vswitch_tutorials_vlan_learning_switch_runs_unchanged() {
    let s = Switched::new("otu", &["--openflow", "ptcp:"]);
    // Through ctl, which reads ovs-ofctl's syntax: over OpenFlow 1.3 ovs-ofctl itself refuses
    // `strip_vlan` where the match does not say the packet is tagged (the tutorial uses
    // OpenFlow 1.0, which this switch does not speak).
    s.ctl_ok(&["del-flows"]);
    for flow in TUTORIAL {
        s.ctl_ok(&["add-flow", flow]);
    }
    // This kernel has no 802.1Q devices: host A's tagged frames come from `gen --vlan 20`.
    let (mac_a, mac_b) = ("02:00:00:00:00:0a", mac_of(&s.c.ns_b, &s.c.b));
    let send = |ns: &str, dev: &str, vlan: Option<&str>, src: &str, dst: &str, count: u32| {
        let port = format!("xdp:{dev}");
        let count = count.to_string();
        let mut args = vec!["gen", "--port", &port, "--src-mac", src, "--dst-mac", dst];
        args.extend(["--count", &count, "--json"]);
        if let Some(vlan) = vlan {
            args.extend(["--vlan", vlan]);
        }
        run_json(ns, &args);
    };
    let learned = |n: usize| {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
        loop {
            let dump = s.ofctl_ok(&["dump-flows", "table=10"]);
            if lines(&dump, "table=10").len() == n {
                return dump;
            }
            assert!(std::time::Instant::now() < deadline, "learned: {dump}");
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
    };
    let id = std::process::id();
    let at_a = Capture::tcpdump_inbound(&s.c.ns_a, &s.c.a, &format!("/tmp/ws-otu-{id}-a.pcap"));
    let at_b = Capture::tcpdump_inbound(&s.c.ns_b, &s.c.b, &format!("/tmp/ws-otu-{id}-b.pcap"));

    // A, on the trunk, to B, not learned yet: flooded, untagged out of the access port.
    send(&s.c.ns_a, &s.c.a, Some("20"), mac_a, &mac_b, 5);
    learned(1);
    // B, on the access port, to A, learned: tagged out of the trunk only.
    send(&s.c.ns_b, &s.c.b, None, &mac_b, mac_a, 7);
    learned(2);
    // A to B, learned now: untagged out of the access port only.
    send(&s.c.ns_a, &s.c.a, Some("20"), mac_a, &mac_b, 5);

    let from = |frames: Vec<Vec<u8>>, mac: &str| -> Vec<Vec<u8>> {
        let mac: Vec<u8> = mac
            .split(':')
            .map(|h| u8::from_str_radix(h, 16).unwrap())
            .collect();
        frames
            .into_iter()
            .filter(|f| f.len() > 14 && f[6..12] == mac[..])
            .collect()
    };
    let at_a = from(at_a.stop(false).frames, &mac_b);
    let at_b = from(at_b.stop(false).frames, mac_a);
    assert_eq!(at_a.len(), 7, "B's frames on the trunk");
    for f in &at_a {
        assert_eq!(f[12..16], [0x81, 0x00, 0x00, 20], "tagged VLAN 20");
        assert_eq!(f.len(), 64, "B's 60 bytes and the tag");
    }
    assert_eq!(at_b.len(), 10, "A's frames on the access port");
    for f in &at_b {
        assert_eq!(f[12..14], [0x08, 0x00], "untagged");
        assert_eq!(f.len(), 60, "A's 64 bytes less the tag");
    }

    let after = s.ofctl_ok(&["dump-flows"]);
    // gen's default frames: B's untagged 60 bytes (64 on the wire); A's tagged ones the
    // smallest that hold the tag, the headers and gen's test payload, 64 bytes.
    let (from_a, from_b) = (64, 60);
    for (rule, packets, size) in [
        ("dl_vlan=20", 5, from_a),
        ("reg0=0x1 ", 7, from_b),
        ("reg0=0x2 ", 5, from_a),
        ("priority=50,reg0=0", 0, from_a),
        ("in_port=2,vlan_tci=0x0000", 7, from_b),
        (&*format!("dl_dst={mac_a}"), 7, from_b),
        (&*format!("dl_dst={mac_b}"), 5, from_a),
    ] {
        assert_eq!(field(&after, rule, "n_packets"), packets, "{rule}: {after}");
        let bytes = field(&after, rule, "n_bytes");
        assert_eq!(bytes, packets * size, "{rule}: {after}");
    }
    let learned = lines(&after, "table=10");
    let mut tails: Vec<&str> = learned
        .iter()
        .map(|l| l.split(", ").last().unwrap_or_default())
        .collect();
    tails.sort();
    let mut expected = [
        format!("vlan_tci=0x0014/0x0fff,dl_dst={mac_a} actions=load:0x1->NXM_NX_REG0[0..15]"),
        format!("vlan_tci=0x0014/0x0fff,dl_dst={mac_b} actions=load:0x2->NXM_NX_REG0[0..15]"),
    ];
    expected.sort();
    assert_eq!(tails, expected, "{after}");
    assert_eq!(
        lines(&s.ctl_ok(&["dump-flows"]), "table=10"),
        learned,
        "ctl prints them as ovs-ofctl"
    );
}
