//! Open vSwitch's `learn` action, driven by `ovs-ofctl` over OpenFlow 1.3: the MAC-learning
//! pipeline of Open vSwitch's advanced tutorial (learn where each source is, then send by
//! what was learned, flooding what is not known yet). The first ping floods and teaches the
//! switch both hosts; after it, pings go by the learned rules, which ovs-ofctl and
//! `wirespeed ctl` read back as Open vSwitch prints them, with exact counts.

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
    let count = |dump: &str, within: &str| field(dump, within, "n_packets");
    let before = s.ofctl_ok(&["dump-flows"]);

    assert_eq!(s.ping(&s.c.ns_a, "10.9.0.2", 3), 3);
    let after = s.ofctl_ok(&["dump-flows"]);
    for (rule, more) in [
        (format!("dl_dst={mac_a}"), 3),
        (format!("dl_dst={mac_b}"), 3),
        ("reg0=0".to_string(), 0),
        ("output:NXM_NX_REG0".to_string(), 6),
        ("actions=learn".to_string(), 6),
    ] {
        assert_eq!(
            count(&after, &rule) - count(&before, &rule),
            more,
            "{rule}: {after}"
        );
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
        "table=3,actions=learn(table=10,delete_learned,NXM_OF_ETH_DST[])",
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
