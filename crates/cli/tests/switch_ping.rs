//! `wirespeed switch` between two host namespaces: ping both ways and a TCP transfer through
//! the learning switch; a drop rule stops ping, removing it restores ping; bad flows are
//! refused with ovs-ofctl-like messages and leave the table as it was.

mod common;
use common::switched::Switched;
use common::*;

#[test]
fn ping_both_ways_and_a_drop_rule_stops_it() {
    let s = Switched::new("sp", &[]);
    assert_eq!(s.ping(&s.c.ns_a, "10.9.0.2", 3), 3);
    assert_eq!(s.ping(&s.c.ns_b, "10.9.0.1", 3), 3);
    // The learning table, as ovs-appctl fdb/show prints it: A behind port 1, B behind 2.
    let fdb = s.ctl_ok(&["fdb-show"]);
    let rows: Vec<Vec<&str>> = fdb
        .lines()
        .skip(1)
        .map(|l| l.split_whitespace().collect())
        .collect();
    let (mac_a, mac_b) = (mac_of(&s.c.ns_a, &s.c.a), mac_of(&s.c.ns_b, &s.c.b));
    assert_eq!(rows.len(), 2, "{fdb}");
    assert_eq!(rows[0][..3], ["1", "0", mac_a.as_str()], "{fdb}");
    assert_eq!(rows[1][..3], ["2", "0", mac_b.as_str()], "{fdb}");
    assert!(
        fdb.starts_with(" port  VLAN  MAC                Age\n"),
        "{fdb}"
    );
    s.ctl_ok(&["add-flow", "priority=100,icmp,actions=drop"]);
    assert_eq!(
        s.ping(&s.c.ns_a, "10.9.0.2", 2),
        0,
        "the drop rule must stop ping"
    );
    let flows = s.ctl_ok(&["dump-flows"]);
    assert!(flows.contains("priority=100,icmp actions=drop"), "{flows}");
    s.ctl_ok(&["del-flows", "icmp"]);
    assert_eq!(
        s.ping(&s.c.ns_a, "10.9.0.2", 3),
        3,
        "removing the rule restores ping"
    );
    let flows = s.ctl_ok(&["dump-flows"]);
    assert_eq!(
        flows.lines().count(),
        1,
        "only the default rule is left: {flows}"
    );
    assert!(
        flows.contains("priority=0 actions=NORMAL") || flows.contains("priority=0 actions=normal"),
        "{flows}"
    );
    let ports = s.ctl_ok(&["dump-ports"]);
    assert!(
        ports.contains("port  1: rx pkts=") && ports.contains("port  2: rx pkts="),
        "{ports}"
    );
    // dump-ports PORT: that port only, as in ovs-ofctl.
    let port2 = s.ctl_ok(&["dump-ports", "2"]);
    assert!(
        port2.starts_with("OFPST_PORT reply: 1 ports\n  port  2: rx pkts=")
            && !port2.contains("port  1:")
            && !port2.contains("bridge:"),
        "{port2}"
    );
    // By name too, as ovs-ofctl takes it (it said "no such port").
    let named = s.ctl_ok(&["dump-ports", &s.c.mb]);
    assert!(
        named.starts_with("OFPST_PORT reply: 1 ports\n  port  2: rx pkts="),
        "{named}"
    );
    // add-flows - reads the flows from standard input.
    let flows = b"priority=7,arp,actions=normal\npriority=8,icmp,actions=normal\n";
    let done = s.ctl_with_input(&["add-flows", "-"], flows);
    assert!(
        done.status.success(),
        "{}",
        String::from_utf8_lossy(&done.stderr)
    );
    let flows = s.ctl_ok(&["dump-flows"]);
    assert!(
        flows.contains("priority=7,arp actions=NORMAL")
            && flows.contains("priority=8,icmp actions=NORMAL"),
        "{flows}"
    );
    s.ctl_ok(&["del-flows", "arp"]);
    s.ctl_ok(&["del-flows", "icmp"]);
    let cache = s.ctl_ok(&["dump-cache"]);
    assert!(cache.starts_with("emc_hits="), "{cache}");
}

#[test]
fn tcp_transfer_through_the_switch_is_intact() {
    let s = Switched::new("st", &[]);
    // The hosts keep veth's defaults: transmit checksum offload on, so their TCP segments
    // arrive with partial checksums, which the switch completes.
    for (ns, dev) in [(&s.c.ns_a, &s.c.a), (&s.c.ns_b, &s.c.b)] {
        let features = sh(&["ip", "netns", "exec", ns, "ethtool", "-k", dev]);
        let features = String::from_utf8_lossy(&features.stdout);
        assert!(
            features.contains("tx-checksumming: on"),
            "{dev}: {features}"
        );
    }
    s.tcp_transfer_is_intact(10 * 1024 * 1024);
}

#[test]
fn bad_flows_are_refused_and_the_table_is_unchanged() {
    let s = Switched::new("sb", &[]);
    let before = s.ctl_ok(&["dump-flows"]);
    for (flow, needle) in [
        ("priority=1,foo=1,actions=drop", "unknown field 'foo'"),
        (
            "priority=1,tp_src=80,actions=drop",
            "tp_src requires tcp or udp",
        ),
        (
            "priority=1,in_port=1,actions=output:7",
            "output:7: no such port",
        ),
        ("priority=1,in_port=1", "must specify an action"),
    ] {
        let out = s.ctl(&["add-flow", flow]);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{flow} was accepted");
        assert!(err.contains(needle), "{flow}: expected '{needle}' in {err}");
    }
    // Selectors that would select by something del-flows / mod-flows cannot select by are
    // refused, not widened to every rule.
    for (command, flow, needle) in [
        ("del-flows", "cookie=5", "del-flows cannot set a cookie"),
        ("del-flows", "priority=0", "not by priority"),
        (
            "mod-flows",
            "idle_timeout=5,actions=drop",
            "only add-flow sets timeouts",
        ),
    ] {
        let out = s.ctl(&[command, flow]);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{command} {flow} was accepted");
        assert!(err.contains(needle), "{flow}: expected '{needle}' in {err}");
    }
    let after = s.ctl_ok(&["dump-flows"]);
    let strip = |t: &str| {
        t.lines()
            .map(|l| l.split("duration=").next().unwrap().to_string())
            .collect::<Vec<_>>()
    };
    assert_eq!(strip(&before), strip(&after), "the table changed");
    // cookie=VALUE/MASK selects, as in ovs-ofctl; mod-flows' bare cookie= sets.
    s.ctl_ok(&["add-flow", "cookie=0x7,priority=5,icmp,actions=drop"]);
    s.ctl_ok(&["add-flow", "cookie=0x8,priority=5,arp,actions=normal"]);
    s.ctl_ok(&["mod-flows", "cookie=0x8/-1,cookie=0x9,actions=normal"]);
    s.ctl_ok(&["del-flows", "cookie=0x7/0xf"]);
    let flows = strip(&s.ctl_ok(&["dump-flows"]));
    assert_eq!(flows.len(), 2, "{flows:?}");
    assert!(flows[0].starts_with("cookie=0x9, "), "{flows:?}");
    assert!(flows[1].starts_with("cookie=0x0, "), "{flows:?}");
    // dump-flows MATCH and --strict select as in ovs-ofctl: at least as specific, or exactly
    // this match at this priority (32768 when not given).
    let arp = strip(&s.ctl_ok(&["dump-flows", "arp"]));
    assert_eq!(arp, flows[..1], "dump-flows arp");
    assert_eq!(s.ctl_ok(&["dump-flows", "table=1"]).trim(), "");
    assert_eq!(
        strip(&s.ctl_ok(&["--strict", "dump-flows", "priority=0"])),
        flows[1..]
    );
    s.ctl_ok(&["--strict", "del-flows", "arp"]);
    assert_eq!(
        strip(&s.ctl_ok(&["dump-flows"])),
        flows,
        "priority 32768 matched"
    );
    s.ctl_ok(&["--strict", "mod-flows", "priority=6,arp,actions=drop"]);
    assert_eq!(
        strip(&s.ctl_ok(&["dump-flows"])),
        flows,
        "priority 6 matched"
    );
    s.ctl_ok(&["--strict", "mod-flows", "priority=5,arp,actions=drop"]);
    let modified = s.ctl_ok(&["dump-flows", "arp"]);
    assert!(
        modified.trim_end().ends_with("arp actions=drop"),
        "{modified}"
    );
    s.ctl_ok(&["del-flows", "--strict", "priority=5,arp"]);
    assert_eq!(strip(&s.ctl_ok(&["dump-flows"])), flows[1..]);
    for (args, needle) in [
        (
            &["--strict", "show"][..],
            "--strict is for mod-flows, del-flows, dump-flows only",
        ),
        (
            &["dump-flows", "cookie=5"],
            "dump-flows cannot set a cookie",
        ),
        (
            &["dump-flows", "ip,actions=drop"],
            "dump-flows takes a match without actions=",
        ),
        (
            &["dump-ports", "9"],
            "dump-ports 9: no such port (the bridge has ports 1, 2)",
        ),
        (&["show", "x"], "show takes no argument (got 'x')"),
    ] {
        let out = s.ctl(args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{args:?} was accepted");
        assert!(
            err.contains(needle),
            "{args:?}: expected '{needle}' in {err}"
        );
    }
    let missing = sh(&[
        wirespeed(),
        "ctl",
        "--ctl",
        "/tmp/wirespeed-no-such.sock",
        "dump-flows",
    ]);
    assert!(!missing.status.success());
    assert!(String::from_utf8_lossy(&missing.stderr).contains("no switch is listening there"));
    // With --json the failure is an object on standard output too, for `| jq` (it had
    // nothing there), a refused flag's as well.
    let no_switch = sh(&[
        wirespeed(),
        "ctl",
        "--ctl",
        "/tmp/wirespeed-no-such.sock",
        "--json",
        "dump-flows",
    ]);
    let refused = s.ctl_with_input(&["--json", "add-flows", "-"], b"");
    for (out, says) in [
        (
            no_switch,
            "/tmp/wirespeed-no-such.sock: no switch is listening there",
        ),
        (refused, "--json is for dump-flows,"),
    ] {
        assert_eq!(out.status.code(), Some(1));
        let answer: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        let error = answer["error"].as_str().unwrap_or_default();
        assert!(error.starts_with(says), "{answer}");
        // The same words as on standard error.
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(err.trim(), format!("wirespeed: error: {error}"));
    }
}

#[test]
fn an_interface_is_refused_as_a_second_port() {
    for (ports, needle) in [
        (
            ["1=xdp:wsdup0", "2=xdp:wsdup0@1"],
            "--port 2=xdp:wsdup0@1: wsdup0 is already port 1 (xdp:wsdup0)",
        ),
        (
            ["1=packet:wsdup0", "7=xdp:wsdup0"],
            "--port 7=xdp:wsdup0: wsdup0 is already port 1 (packet:wsdup0)",
        ),
        (
            ["1=pipe:wsdup0", "2=pipe:wsdup0"],
            "--port 2=pipe:wsdup0: wsdup0 is already port 1 (pipe:wsdup0)",
        ),
    ] {
        let (code, _, err) = common::pcaps::wirespeed_out(&[
            "switch",
            "--port",
            ports[0],
            "--port",
            ports[1],
            "--ctl",
            "/tmp/wsdup.sock",
        ]);
        assert_eq!(code, Some(1), "{ports:?} was accepted: {err}");
        assert!(
            err.contains(needle),
            "{ports:?}: expected '{needle}' in {err}"
        );
    }
}
