//! Revalidation under traffic: a forwarding rule is replaced by a drop rule while packets
//! flow; no packet sent after `wirespeed ctl` returned reaches the far side, whether the flow
//! was forwarded in user space or by the kernel's fast path (`--offload`). And revalidation
//! is precise, in user space's caches and in the kernel's: a rule a controller adds for
//! another host leaves the cached flows of these two, while one that concerns them takes
//! their packets at once; so does a change to a group, for the flows that pass through it.

mod common;
use common::prometheus::{assert_promtool_accepts, sample};
use common::switched::{Switched, field};
use common::*;

/// A controller's forwarding by destination, one rule a host (table 1, behind table 0),
/// added with ovs-ofctl. A rule for a third host cannot decide A's or B's packets
/// otherwise: their cached flows stay, and ping's next packets are all cache hits. A rule
/// that outranks B's takes A's echoes to B at once, and only that one flow is revalidated.
#[test]
fn a_rule_for_another_host_leaves_the_cached_flows() {
    let s = Switched::new("rp", &["--openflow", "ptcp:"]);
    let (mac_a, mac_b) = forward_by_destination(&s);
    assert_eq!(s.ping(&s.c.ns_a, "10.9.0.2", 3), 3);
    // One translation a direction.
    assert_eq!(cache_state(&s).0, 2);

    s.ofctl_ok(&["add-flow", ANOTHER_HOST]);
    assert_eq!(s.ping(&s.c.ns_a, "10.9.0.2", 3), 3);
    assert_eq!(
        cache_state(&s),
        (2, 0, 0),
        "the rule for another host revalidated A's or B's flow"
    );

    let drop = format!("table=1,priority=40000,icmp,dl_dst={mac_b},actions=drop");
    s.ofctl_ok(&["add-flow", &drop]);
    assert_eq!(s.ping(&s.c.ns_a, "10.9.0.2", 2), 0);
    assert_eq!(
        cache_state(&s),
        (3, 1, 0),
        "only A's echoes to B were translated again"
    );
    let metrics = s.ctl_ok(&["metrics"]);
    assert_promtool_accepts(&metrics);
    let thread = [("thread", "0")];
    assert_eq!(
        sample(&metrics, "wirespeed_switch_stale_megaflows_total", &thread),
        1.0
    );
    let flows = s.ofctl_ok(&["dump-flows"]);
    assert_eq!(
        field(&flows, "priority=40000,icmp", "n_packets"),
        2,
        "{flows}"
    );
    assert_eq!(
        field(&flows, &format!("dl_dst={mac_a}"), "n_packets"),
        6,
        "{flows}"
    );
}

/// The caches' translations, megaflows revalidated away and flushes (`dump-cache`).
fn cache_state(s: &Switched) -> (u64, u64, u64) {
    let stat = |name| field(&s.ctl_ok(&["dump-cache"]), "emc_hits=", name);
    (stat("misses"), stat("stale"), stat("flushes"))
}

/// The kernel's fast path (`dump-cache`): its entries (now, ever installed, revalidated
/// away), flushes, stops and the packets it forwarded.
fn kernel_state(s: &Switched) -> ((u64, u64, u64), u64, u64, u64) {
    let fast = |name| field(&s.ctl_ok(&["dump-cache"]), "fast_path:", name);
    let entries = (fast("flows"), fast("installed"), fast("revalidated"));
    (entries, fast("flushes"), fast("stops"), fast("kernel_hits"))
}

/// A rule for a third host, above the hosts' rules (a rule below them could not win, so only
/// its match keeps A's and B's flows).
const ANOTHER_HOST: &str = "table=1,priority=40000,dl_dst=02:00:00:00:00:99,actions=output:2";

/// Table 0 goes to table 1, where one rule a host outputs to its port (added with
/// ovs-ofctl); the hosts know each other's addresses, so only their pings cross. Their
/// MAC addresses, A's and B's.
fn forward_by_destination(s: &Switched) -> (String, String) {
    let (mac_a, mac_b) = (mac_of(&s.c.ns_a, &s.c.a), mac_of(&s.c.ns_b, &s.c.b));
    permanent_neighbour(&s.c.ns_a, &s.c.a, "10.9.0.2", &mac_b);
    permanent_neighbour(&s.c.ns_b, &s.c.b, "10.9.0.1", &mac_a);
    for flow in [
        "table=0,actions=goto_table:1".to_string(),
        format!("table=1,dl_dst={mac_a},actions=output:1"),
        format!("table=1,dl_dst={mac_b},actions=output:2"),
    ] {
        s.ofctl_ok(&["add-flow", &flow]);
    }
    (mac_a, mac_b)
}

/// A controller adds B's rule again, unchanged (an ADD on the same match and priority
/// replaces the rule, its counts kept): the echoes the kernel forwarded under the old rule
/// are counted by the new one, and its entry is made again under it.
#[test]
fn a_rule_replaced_keeps_what_the_kernel_counted() {
    let s = offloading_switch("rc");
    let (_, mac_b) = forward_by_destination(&s);
    assert_eq!(s.ping(&s.c.ns_a, "10.9.0.2", 3), 3);
    let to_b = format!("table=1,dl_dst={mac_b},actions=output:2");
    s.ofctl_ok(&["add-flow", &to_b]);
    let packets = |s: &Switched| {
        let flows = s.ofctl_ok(&["dump-flows"]);
        field(
            &flows,
            &format!("dl_dst={mac_b} actions=output:2"),
            "n_packets",
        )
    };
    assert_eq!(packets(&s), 3, "the kernel's echoes went with the old rule");
    assert_eq!(s.ping(&s.c.ns_a, "10.9.0.2", 2), 2);
    assert_eq!(packets(&s), 5);
    // One stop: before the old rule went, its echoes' entry read.
    let (entries, _, stops, _) = kernel_state(&s);
    assert_eq!((entries, stops), ((2, 3, 1), 1));
}

/// A switch that offloads, with an OpenFlow listener; the hosts' veths take the kernel's
/// XDP redirects (NAPI on).
fn offloading_switch(tag: &str) -> Switched {
    let s = Switched::new(tag, &["--openflow", "ptcp:", "--offload"]);
    for (ns, dev) in [(&s.c.ns_a, &s.c.a), (&s.c.ns_b, &s.c.b)] {
        must(&["ip", "netns", "exec", ns, "ethtool", "-K", dev, "gro", "on"]);
    }
    s
}

/// The same with `--offload`: each direction's first echo installs its flow in the kernel,
/// which forwards the rest. A rule for another host leaves both entries, and the kernel
/// forwards every later packet; the rule that outranks B's takes only A's echoes to B out
/// of the kernel, and every packet is counted once, by the rule that decided it.
#[test]
fn a_rule_for_another_host_leaves_the_kernel_s_flows() {
    let s = offloading_switch("rk");
    let (mac_a, mac_b) = forward_by_destination(&s);
    assert_eq!(s.ping(&s.c.ns_a, "10.9.0.2", 3), 3);
    let (entries, _, _, kernel_hits) = kernel_state(&s);
    // The first echo and its reply went up; the rest the kernel forwarded.
    assert_eq!((entries, kernel_hits), ((2, 2, 0), 4));

    // Alone, and in a bundle with one more: the kernel never stops forwarding.
    s.ofctl_ok(&["add-flow", ANOTHER_HOST]);
    let bundled = ANOTHER_HOST.replace(":99", ":98");
    s.ofctl_ok(&["--bundle", "add-flow", &bundled]);
    assert_eq!(s.ping(&s.c.ns_a, "10.9.0.2", 3), 3);
    assert_eq!(
        kernel_state(&s),
        ((2, 2, 0), 0, 0, 10),
        "the rules for other hosts took A's or B's flow out of the kernel, or stopped it"
    );

    let drop = format!("table=1,priority=40000,icmp,dl_dst={mac_b},actions=drop");
    s.ofctl_ok(&["add-flow", &drop]);
    assert_eq!(s.ping(&s.c.ns_a, "10.9.0.2", 2), 0);
    assert_eq!(
        kernel_state(&s),
        ((1, 2, 1), 0, 1, 10),
        "only A's echoes to B left the kernel"
    );
    let flows = s.ofctl_ok(&["dump-flows"]);
    for (rule, packets) in [
        ("priority=40000,icmp".to_string(), 2),
        (format!("dl_dst={mac_a}"), 6),
        (format!("dl_dst={mac_b} actions=output:2"), 6),
    ] {
        assert_eq!(
            field(&flows, &rule, "n_packets"),
            packets,
            "{rule}: {flows}"
        );
    }
}

use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// The forwarding rule replaced: the same match and priority.
const REPLACING_DROP: &str = "priority=100,in_port=1,actions=drop";
/// A rule that outranks it: the forwarding rule stays, and the kernel goes on forwarding
/// through the change (`Offload::watch`) until its entry is found touched.
const OUTRANKING_DROP: &str = "priority=200,in_port=1,actions=drop";

#[test]
fn no_packet_sent_after_ctl_returns_is_forwarded() {
    replace_forwarding_with_drop("sr", false, REPLACING_DROP, By::Ctl);
}

#[test]
fn no_packet_sent_after_ctl_returns_is_forwarded_by_the_kernel() {
    replace_forwarding_with_drop("so", true, REPLACING_DROP, By::Ctl);
}

#[test]
fn no_packet_sent_after_ctl_adds_a_rule_above_is_forwarded_by_the_kernel() {
    replace_forwarding_with_drop("sa", true, OUTRANKING_DROP, By::Ctl);
}

/// The same over OpenFlow: ovs-ofctl returns at the BARRIER_REPLY behind its FLOW_MOD,
/// which the switch sends before the stopped class of the entry it removed forwards again.
#[test]
fn no_packet_sent_after_a_barrier_is_forwarded_by_the_kernel() {
    replace_forwarding_with_drop("sb", true, OUTRANKING_DROP, By::OpenFlow);
}

/// Who makes the change: `wirespeed ctl`, or a controller (ovs-ofctl, with a barrier).
enum By {
    Ctl,
    OpenFlow,
}

fn replace_forwarding_with_drop(tag: &str, offload: bool, drop: &str, by: By) {
    let mut args = match by {
        By::Ctl => vec![],
        By::OpenFlow => vec!["--openflow", "ptcp:"],
    };
    if offload {
        args.push("--offload");
    }
    let s = Switched::new(tag, &args);
    if offload {
        // The far host's veth receives the kernel's XDP redirects only with NAPI on.
        must(&[
            "ip", "netns", "exec", &s.c.ns_b, "ethtool", "-K", &s.c.b, "gro", "on",
        ]);
    }
    s.ctl_ok(&["add-flow", "priority=100,in_port=1,actions=output:2"]);
    let file = format!("/tmp/wirespeed-reval-{}-{tag}.pcap", std::process::id());
    let cap = Capture::tcpdump_inbound(&s.c.ns_b, &s.c.b, &file);
    let mut tx = spawn_in(
        &s.c.ns_a,
        &[
            "bench",
            "txpush",
            "--port",
            &format!("xdp:{}", s.c.a),
            "--duration",
            "3",
            "--json",
            "-q",
        ],
    );
    tx.wait_ready();
    std::thread::sleep(Duration::from_millis(1000));
    match by {
        By::Ctl => s.ctl_ok(&["add-flow", drop]),
        By::OpenFlow => s.ofctl_ok(&["add-flow", drop]),
    };
    let returned = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_nanos() as u64;
    let (sent, _) = tx.finish();
    let frames = cap.stop(false).frames;
    const MASK: u64 = (1 << 48) - 1; // the payload carries the low 48 bits of the send time
    let t0 = returned & MASK;
    let mut before = 0;
    for f in &frames {
        let Some(p) = wirespeed_packet::read_test_payload(f) else {
            continue;
        };
        let after = (p.timestamp_ns.wrapping_sub(t0) & MASK) < (1 << 47);
        assert!(
            !after,
            "packet {} was sent {} ns after the change returned and still arrived",
            p.seq,
            (p.timestamp_ns.wrapping_sub(t0)) & MASK
        );
        before += 1;
    }
    assert!(
        before > 1000,
        "only {before} packets crossed before the change; sender {sent}"
    );
    let flows = s.ctl_ok(&["dump-flows"]);
    let (rule, _) = drop.rsplit_once(",actions").unwrap();
    assert!(flows.contains(&format!("{rule} actions=drop")), "{flows}");
    if offload {
        let cache = s.ctl_ok(&["dump-cache"]);
        let hits: u64 = cache
            .split([',', ' '])
            .find_map(|w| w.strip_prefix("kernel_hits="))
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| panic!("{cache}"));
        assert!(
            hits > 1000,
            "the flow must have been forwarded by the kernel before the change: {cache}"
        );
    }
}

/// Table 0 goes to table 1, where A's rule outputs to its port and B's passes through group
/// 1, which does (added with ovs-ofctl); the hosts know each other's addresses.
fn forward_through_group(s: &Switched) {
    let (mac_a, mac_b) = (mac_of(&s.c.ns_a, &s.c.a), mac_of(&s.c.ns_b, &s.c.b));
    permanent_neighbour(&s.c.ns_a, &s.c.a, "10.9.0.2", &mac_b);
    permanent_neighbour(&s.c.ns_b, &s.c.b, "10.9.0.1", &mac_a);
    s.ofctl_ok(&["add-group", "group_id=1,type=indirect,bucket=output:2"]);
    for flow in [
        "table=0,actions=goto_table:1".to_string(),
        format!("table=1,dl_dst={mac_a},actions=output:1"),
        format!("table=1,dl_dst={mac_b},actions=group:1"),
    ] {
        s.ofctl_ok(&["add-flow", &flow]);
    }
}

/// Group 2, which no flow passes through, added, modified and deleted by a controller.
fn change_an_unused_group(s: &Switched) {
    s.ofctl_ok(&["add-group", "group_id=2,type=indirect,bucket=output:2"]);
    s.ofctl_ok(&["mod-group", "group_id=2,type=all,bucket=output:1"]);
    s.ofctl_ok(&["del-groups", "group_id=2"]);
}

/// Group 1's packets since it was added or last modified.
fn group_1_packets(s: &Switched) -> u64 {
    field(
        &s.ofctl_ok(&["dump-group-stats", "group_id=1"]),
        "group_id=1",
        "packet_count",
    )
}

/// A controller changes its groups: a group no flow passes through leaves every cached
/// flow, and group 1 modified takes only A's echoes to B (which pass through it) to be
/// translated again.
#[test]
fn a_group_changed_revalidates_only_the_flows_through_it() {
    let s = Switched::new("rg", &["--openflow", "ptcp:"]);
    forward_through_group(&s);
    assert_eq!(s.ping(&s.c.ns_a, "10.9.0.2", 3), 3);
    assert_eq!(cache_state(&s).0, 2);

    change_an_unused_group(&s);
    assert_eq!(s.ping(&s.c.ns_a, "10.9.0.2", 3), 3);
    assert_eq!(
        cache_state(&s),
        (2, 0, 0),
        "group 2 revalidated A's or B's flow"
    );
    assert_eq!(group_1_packets(&s), 6);

    s.ofctl_ok(&["mod-group", "group_id=1,type=all,bucket=output:2"]);
    assert_eq!(group_1_packets(&s), 0, "a modify starts the counts anew");
    assert_eq!(s.ping(&s.c.ns_a, "10.9.0.2", 2), 2);
    assert_eq!(
        cache_state(&s),
        (3, 1, 0),
        "only A's echoes to B were translated again"
    );
    assert_eq!(group_1_packets(&s), 2);
}

/// The same with `--offload`: group 2's changes leave both kernel entries forwarding, and
/// group 1 modified takes only A's echoes to B out of the kernel, its counts credited to
/// the group as it was.
#[test]
fn a_group_changed_leaves_the_kernel_s_other_flows() {
    let s = offloading_switch("rj");
    forward_through_group(&s);
    assert_eq!(s.ping(&s.c.ns_a, "10.9.0.2", 3), 3);
    let (entries, _, _, kernel_hits) = kernel_state(&s);
    assert_eq!((entries, kernel_hits), ((2, 2, 0), 4));

    change_an_unused_group(&s);
    assert_eq!(s.ping(&s.c.ns_a, "10.9.0.2", 3), 3);
    assert_eq!(
        kernel_state(&s),
        ((2, 2, 0), 0, 0, 10),
        "group 2 took A's or B's flow out of the kernel, or stopped it"
    );
    assert_eq!(group_1_packets(&s), 6);

    // The kernel forwards one more echo, not yet read when the group changes.
    assert_eq!(s.ping(&s.c.ns_a, "10.9.0.2", 1), 1);
    s.ofctl_ok(&["mod-group", "group_id=1,type=all,bucket=output:2"]);
    assert_eq!(
        group_1_packets(&s),
        0,
        "a modify starts the counts anew, the kernel's echo counted before"
    );
    assert_eq!(s.ping(&s.c.ns_a, "10.9.0.2", 2), 2);
    // One stop: before the group changed, the entry through it read and then removed.
    assert_eq!(
        kernel_state(&s),
        ((2, 3, 1), 0, 1, 15),
        "only A's echoes to B left the kernel"
    );
    assert_eq!(group_1_packets(&s), 2);
}

/// A controller changes a meter's rate: only the flows it meters are translated again (they
/// held the meter as it was), and a meter no flow uses, added, modified and deleted, leaves
/// every cached flow. A's echoes to B pass meter 1; B's replies pass none.
#[test]
fn a_meter_changed_revalidates_only_the_flows_it_meters() {
    let s = Switched::new("rm", &["--openflow", "ptcp:"]);
    let (mac_a, mac_b) = (mac_of(&s.c.ns_a, &s.c.a), mac_of(&s.c.ns_b, &s.c.b));
    permanent_neighbour(&s.c.ns_a, &s.c.a, "10.9.0.2", &mac_b);
    permanent_neighbour(&s.c.ns_b, &s.c.b, "10.9.0.1", &mac_a);
    s.ofctl_ok(&["add-meter", "meter=1,pktps,bands=type=drop,rate=1000"]);
    for flow in [
        format!("dl_dst={mac_a},actions=output:1"),
        format!("dl_dst={mac_b},actions=meter:1,output:2"),
    ] {
        s.ofctl_ok(&["add-flow", &flow]);
    }
    assert_eq!(s.ping(&s.c.ns_a, "10.9.0.2", 3), 3);
    assert_eq!(cache_state(&s).0, 2);

    s.ofctl_ok(&["add-meter", "meter=2,pktps,bands=type=drop,rate=1000"]);
    s.ofctl_ok(&["mod-meter", "meter=2,pktps,bands=type=drop,rate=2000"]);
    s.ofctl_ok(&["del-meter", "meter=2"]);
    assert_eq!(s.ping(&s.c.ns_a, "10.9.0.2", 3), 3);
    assert_eq!(
        cache_state(&s),
        (2, 0, 0),
        "meter 2 revalidated A's or B's flow"
    );

    s.ofctl_ok(&["mod-meter", "meter=1,pktps,bands=type=drop,rate=2000"]);
    assert_eq!(s.ping(&s.c.ns_a, "10.9.0.2", 2), 2);
    assert_eq!(
        cache_state(&s),
        (3, 1, 0),
        "only A's echoes to B were translated again"
    );
    let stats = s.ofctl_ok(&["meter-stats", "meter=1"]);
    assert!(stats.contains("packet_in_count:2 "), "{stats}");
}
