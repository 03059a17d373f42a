//! Real controllers drive `wirespeed switch --controller`: faucet (from PyPI, in the
//! project's virtual environment) switches three hosts on one VLAN, a TCP transfer arrives
//! intact, an ACL takes effect after faucet reloads, tshark's OpenFlow dissector finds
//! nothing malformed in the session, and when faucet dies a standalone switch goes on as a
//! learning switch (a secure one with faucet's flows) and reconnects when faucet is back;
//! faucet's meters rate-limit an ACL's traffic. A reactive learning switch of our own on
//! os-ken moves ping and TCP with PACKET_IN, FLOW_MOD, PACKET_OUT and barriers, over TLS
//! (`--controller ssl:`).

mod common;
use common::certs::Ca;
use common::faucet::{OpenFlowCapture, OsKen};
use common::star::NetStar;
use common::switched::{Setup, Switched, tcp_transfer_is_intact};
use common::*;
use std::time::{Duration, Instant};

/// faucet.yaml: one VLAN over ports 1-3; with `acl`, port 1 may not send ICMP to host 2.
fn faucet_yaml(dp_id: &str, acl: bool) -> String {
    let acl_rules = "acls:\n  no_icmp_to_2:\n    - rule:\n        dl_type: 0x800\n        \
                     ip_proto: 1\n        ipv4_dst: 10.9.0.2\n        actions:\n          \
                     allow: 0\n    - rule:\n        actions:\n          allow: 1\n";
    format!(
        "{}vlans:\n  office:\n    vid: 100\ndps:\n  sw1:\n    dp_id: {dp_id}\n    \
         hardware: \"Open vSwitch\"\n    interfaces:\n      1:\n        native_vlan: office\n\
         {}      2:\n        native_vlan: office\n      3:\n        native_vlan: office\n",
        if acl { acl_rules } else { "" },
        if acl {
            "        acls_in: [no_icmp_to_2]\n"
        } else {
            ""
        },
    )
}

/// Three hosts around the switch's namespace, its loopback up for OpenFlow, and the
/// datapath id the switch will take (its first port's MAC), as faucet writes it.
fn star(tag: &str) -> (NetStar, String) {
    let star = NetStar::new(tag, 3);
    must(&["ip", "-n", &star.ns_m, "link", "set", "lo", "up"]);
    let dp_id = format!("0x{}", mac_of(&star.ns_m, &star.ports[0]).replace(':', ""));
    (star, dp_id)
}

/// Waits until `ctl dump-flows` shows a line with `needle` (faucet's flows are in).
fn wait_for_flow(ctl: &str, needle: &str) {
    let until = Instant::now() + Duration::from_secs(30);
    let mut flows = String::new();
    while Instant::now() < until {
        let out = sh(&[wirespeed(), "ctl", "--ctl", ctl, "dump-flows"]);
        flows = String::from_utf8_lossy(&out.stdout).into_owned();
        if flows.contains(needle) {
            return;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    panic!("no flow with '{needle}': {flows}");
}

/// faucet's flood rule, the last it installs for the VLAN.
const FLOOD_RULE: &str = "priority=8192,dl_vlan=100 actions=strip_vlan,output:1,output:2,output:3";
/// The ACL as faucet installs it.
const ACL_RULE: &str = "icmp,in_port=1,nw_dst=10.9.0.2 actions=drop";
/// A switch dialing faucet that forwards by faucet's flows alone.
const SECURE_UNDER_FAUCET: [&str; 4] = [
    "--controller",
    "tcp:127.0.0.1:6653",
    "--fail-mode",
    "secure",
];

#[test]
fn faucet_switches_three_hosts_applies_an_acl_and_standalone_outlives_it() {
    let (star, dp_id) = star("fct");
    let config = ScratchFile::new("fct-faucet.yaml");
    std::fs::write(&config, faucet_yaml(&dp_id, false)).unwrap();
    let mut capture = OpenFlowCapture::start(&star.ns_m, "fct");
    let mut faucet = OsKen::faucet(&star.ns_m, &config, "fct");
    let ctl = ScratchFile::new("fct.sock");
    let switch = star.switch(&ctl, &["--controller", "tcp:127.0.0.1:6653"]);
    wait_for_flow(&ctl, FLOOD_RULE);
    let ping = |from: usize, to: usize, count| ping(&star.hosts[from], &star.ip(to), count);
    assert_eq!(ping(0, 1, 3), 3);
    assert_eq!(ping(0, 2, 3), 3);
    assert_eq!(ping(2, 1, 3), 3);
    tcp_transfer_is_intact(&star.hosts[0], &star.hosts[2], &star.ip(2), 4 << 20);

    // The ACL: after faucet reloads, host 1 cannot ping host 2, and still pings host 3.
    std::fs::write(&config, faucet_yaml(&dp_id, true)).unwrap();
    faucet.hup();
    wait_for_flow(&ctl, ACL_RULE);
    wait_for_flow(&ctl, FLOOD_RULE);
    assert_eq!(ping(0, 1, 2), 0, "the ACL drops ICMP to host 2");
    assert_eq!(ping(0, 2, 2), 2);

    // tshark's OpenFlow 1.3 dissector: every message of the session well-formed.
    capture.stop();
    let types = must(&[
        "tshark",
        "-r",
        &capture.file,
        "-Y",
        "openflow_v4",
        "-T",
        "fields",
        "-e",
        "openflow_v4.type",
    ]);
    for (kind, name) in [("0", "HELLO"), ("6", "FEATURES_REPLY"), ("10", "PACKET_IN")] {
        assert!(
            types.lines().any(|l| l.split(',').any(|t| t == kind)),
            "no {name} in the session: {types}"
        );
    }
    let malformed = must(&[
        "tshark",
        "-r",
        &capture.file,
        "-Y",
        "openflow_v4 && _ws.malformed",
    ]);
    assert!(malformed.is_empty(), "malformed OpenFlow: {malformed}");

    // faucet dies: standalone, the switch forwards as a learning switch (no ACL).
    faucet.kill();
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(ping(0, 1, 3), 3, "fail-open forwards");
    // faucet is back: the switch reconnects and the ACL holds again.
    let faucet = OsKen::faucet(&star.ns_m, &config, "fct2");
    faucet.wait_for("Cold start configuring DP", 1);
    wait_for_flow(&ctl, ACL_RULE);
    wait_for_flow(&ctl, FLOOD_RULE);
    assert_eq!(ping(0, 1, 2), 0, "the ACL again");
    assert_eq!(ping(0, 2, 2), 2);
    let (j, _) = switch.interrupt();
    assert_eq!(j["frames"]["balanced"], true, "{j}");
    let of = &j["openflow"];
    assert!(of["packet_ins"].as_u64() > Some(0), "{of}");
    assert_eq!(of["dropped"], 0, "{of}");
}

#[test]
fn secure_fail_mode_keeps_faucets_flows_when_faucet_dies() {
    let (star, dp_id) = star("fcs");
    let config = ScratchFile::new("fcs-faucet.yaml");
    std::fs::write(&config, faucet_yaml(&dp_id, true)).unwrap();
    let mut faucet = OsKen::faucet(&star.ns_m, &config, "fcs");
    let ctl = ScratchFile::new("fcs.sock");
    let switch = star.switch(&ctl, &SECURE_UNDER_FAUCET);
    wait_for_flow(&ctl, ACL_RULE);
    wait_for_flow(&ctl, FLOOD_RULE);
    let ping = |from: usize, to: usize, count| ping(&star.hosts[from], &star.ip(to), count);
    assert_eq!(ping(0, 2, 3), 3);
    assert_eq!(ping(0, 1, 2), 0);
    let flows = sh(&[wirespeed(), "ctl", "--ctl", &ctl, "dump-flows"]).stdout;
    faucet.kill();
    std::thread::sleep(Duration::from_millis(300));
    // The flows stay as faucet left them, and so does forwarding.
    let after = sh(&[wirespeed(), "ctl", "--ctl", &ctl, "dump-flows"]).stdout;
    let rules = |text: &[u8]| -> usize { String::from_utf8_lossy(text).lines().count() };
    assert_eq!(rules(&after), rules(&flows));
    assert_eq!(ping(0, 2, 3), 3);
    assert_eq!(ping(0, 1, 2), 0, "secure: the ACL stays");
    let (j, log) = switch.interrupt();
    assert_eq!(j["frames"]["balanced"], true, "{j}");
    // The controller's coming and going is said, with what the fail mode does.
    assert!(
        log.contains("OpenFlow: connected to controller 127.0.0.1:")
            && log.contains("went away after")
            && log.contains("fail mode secure: the rules stay as they are"),
        "{log}"
    );
}

/// faucet meters an ACL: ICMP from host 1 passes a meter of one packet a second (faucet's
/// `meters:`, sent as a METER_MOD, and `meter:` in the ACL's instructions). Of ten pings
/// in a tenth of a second one is answered; the switch counts the other nine as metered,
/// and faucet's log has no error from the switch, which also takes faucet's meter on
/// packet-ins (`packetin_pps`, the controller's meter).
#[test]
fn faucet_meters_an_acl() {
    let (star, dp_id) = star("fcm");
    let meter = "meters:\n  icmp_1pps:\n    meter_id: 1\n    entry:\n      flags: \"PKTPS\"\n      \
                 bands:\n        - {type: \"DROP\", rate: 1}\n\
                 acls:\n  slow_icmp:\n    - rule:\n        dl_type: 0x800\n        ip_proto: 1\n        \
                 actions:\n          meter: icmp_1pps\n          allow: 1\n    - rule:\n        \
                 actions:\n          allow: 1\n";
    // packetin_pps: faucet's guard on its own CPU, the controller's meter.
    let yaml = faucet_yaml(&dp_id, false)
        .replacen(
            "      1:\n        native_vlan: office\n",
            "      1:\n        native_vlan: office\n        acls_in: [slow_icmp]\n",
            1,
        )
        .replacen(
            "    hardware: \"Open vSwitch\"\n",
            "    hardware: \"Open vSwitch\"\n    packetin_pps: 100\n",
            1,
        );
    let config = ScratchFile::new("fcm-faucet.yaml");
    std::fs::write(&config, format!("{meter}{yaml}")).unwrap();
    let faucet = OsKen::faucet(&star.ns_m, &config, "fcm");
    let ctl = ScratchFile::new("fcm.sock");
    let switch = star.switch(&ctl, &SECURE_UNDER_FAUCET);
    wait_for_flow(&ctl, "icmp,in_port=1 actions=meter:1,");
    wait_for_flow(&ctl, FLOOD_RULE);
    // Neighbours first (ARP is not metered), then ten pings 10 ms apart: the bucket holds
    // one packet and earns less than another before the last.
    assert_eq!(ping(&star.hosts[0], &star.ip(1), 1), 1);
    std::thread::sleep(Duration::from_millis(1100));
    let out = sh(&[
        "ip",
        "netns",
        "exec",
        &star.hosts[0],
        "ping",
        "-n",
        "-q",
        "-c",
        "10",
        "-i",
        "0.01",
        "-W",
        "1",
        &star.ip(1),
    ]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("10 packets transmitted, 1 received"),
        "{text}"
    );
    let (j, _) = switch.interrupt();
    assert_eq!(j["bridge_drops"]["metered"], 9, "{j}");
    let log = faucet.text();
    assert!(!log.contains("OFError"), "{log}");
}

#[test]
fn an_os_ken_learning_switch_over_tls_moves_ping_and_tcp() {
    // TLS both ways: os-ken requires the switch's certificate, the switch checks os-ken's.
    let ca = Ca::new("fco");
    let (ours, theirs) = (ca.issue("switch"), ca.issue("os-ken"));
    let mut extra = vec![
        "--controller",
        "ssl:127.0.0.1:6653",
        "--fail-mode",
        "secure",
    ];
    let options = ours.options(&ca);
    extra.extend(options.iter().map(String::as_str));
    // Secure: nothing but the application's flows forwards.
    let s = Switched::with("fco", Setup::default(), &extra);
    assert_eq!(
        s.ping(&s.c.ns_a, "10.9.0.2", 1),
        0,
        "no controller, no flows"
    );
    let app = format!(
        "{}/tests/openflow/learning_switch.py",
        env!("CARGO_MANIFEST_DIR")
    );
    let tls = [&*theirs.key, &*theirs.cert, &*ca.cert];
    let osken = OsKen::app(&s.c.ns_m, &app, "fco", Some(tls));
    osken.wait_for("connected dpid=", 1);
    osken.wait_for("barrier reply", 1);
    // The ping above left a failed neighbour entry behind; resolve afresh.
    must(&["ip", "-n", &s.c.ns_a, "neigh", "flush", "all"]);
    assert_eq!(s.ping(&s.c.ns_a, "10.9.0.2", 3), 3, "{}", osken.text());
    s.tcp_transfer_is_intact(2 << 20);
    osken.wait_for("flow stats: 3 flows", 1);
    let log = osken.text();
    assert!(
        log.contains("packet_in reason=0 table=0 in_port=1"),
        "{log}"
    );
    assert!(!log.contains("error type="), "{log}");
    let flows = s.ctl_ok(&["dump-flows"]);
    assert!(
        flows.contains("priority=1,in_port=1,dl_dst=")
            && flows.contains("priority=0 actions=CONTROLLER:65535"),
        "{flows}"
    );
}
