//! Open vSwitch's registers (`reg0` to `reg15`) and its `load`, `move`, `set_field` and
//! `output:SRC` actions, driven by `ovs-ofctl` over OpenFlow 1.3: a three-table pipeline
//! steers pings by what earlier tables wrote into registers, a `load` into the packet's DSCP
//! bits arrives as tcpdump sees it, and the flows read back the same through ovs-ofctl and
//! `wirespeed ctl`.

mod common;
use common::switched::{Switched, flow_without_duration};
use common::*;

/// Table 0 notes where an echo came from in reg0 (a move from in_port, or a set_field),
/// table 1 turns that into the port it goes to in reg1, table 2 sends it there (the replies
/// out of the port reg1 holds).
const PIPELINE: [&str; 6] = [
    "table=0,priority=10,icmp,in_port=1,actions=move:NXM_OF_IN_PORT[]->NXM_NX_REG0[0..15],goto_table:1",
    "table=0,priority=10,icmp,in_port=2,actions=set_field:2->reg0,goto_table:1",
    "table=1,priority=10,reg0=1,actions=load:0x2->NXM_NX_REG1[],goto_table:2",
    "table=1,priority=10,reg0=2,actions=load:0x1->NXM_NX_REG1[],goto_table:2",
    "table=2,priority=10,ip,reg1=0x2,actions=load:0x2e->NXM_OF_IP_TOS[2..7],output:2",
    "table=2,priority=10,reg1=0x1/0xff,actions=output:NXM_NX_REG1[0..15]",
];

/// The pipeline's lines of a dump (ovs-ofctl's or ctl's), without their durations.
fn pipeline_lines(dump: &str) -> Vec<String> {
    dump.lines()
        .filter(|l| l.contains("priority=10"))
        .map(flow_without_duration)
        .collect()
}

#[test]
fn ovs_ofctl_registers_steer_a_pipeline() {
    let s = Switched::new("ofr", &["--openflow", "ptcp:"]);
    for flow in PIPELINE {
        s.ofctl_ok(&["add-flow", flow]);
    }
    let file = format!("/tmp/ws-ofr-{}.pcap", std::process::id());
    let capture = Capture::tcpdump_inbound(&s.c.ns_b, &s.c.b, &file);
    assert_eq!(s.ping(&s.c.ns_a, "10.9.0.2", 3), 3);
    let seen = capture.stop(false);
    let echo_requests: Vec<&Vec<u8>> = seen
        .frames
        .iter()
        .filter(|f| f.len() > 34 && f[12..14] == [8, 0] && f[23] == 1 && f[34] == 8)
        .collect();
    assert_eq!(echo_requests.len(), 3, "{} frames", seen.frames.len());
    for frame in echo_requests {
        assert_eq!(frame[15], 0x2e << 2, "DSCP 46, ECN untouched");
    }

    let expected = [
        "cookie=0x0, table=0, n_packets=3, n_bytes=294, priority=10,icmp,in_port=1 actions=move:NXM_OF_IN_PORT[]->NXM_NX_REG0[0..15],goto_table:1",
        "cookie=0x0, table=0, n_packets=3, n_bytes=294, priority=10,icmp,in_port=2 actions=set_field:0x2->reg0,goto_table:1",
        "cookie=0x0, table=1, n_packets=3, n_bytes=294, priority=10,reg0=0x1 actions=load:0x2->NXM_NX_REG1[],goto_table:2",
        "cookie=0x0, table=1, n_packets=3, n_bytes=294, priority=10,reg0=0x2 actions=load:0x1->NXM_NX_REG1[],goto_table:2",
        "cookie=0x0, table=2, n_packets=3, n_bytes=294, priority=10,ip,reg1=0x2 actions=load:0x2e->NXM_OF_IP_TOS[2..7],output:2",
        "cookie=0x0, table=2, n_packets=3, n_bytes=294, priority=10,reg1=0x1/0xff actions=output:NXM_NX_REG1[0..15]",
    ];
    let mut from_ovs = pipeline_lines(&s.ofctl_ok(&["dump-flows"]));
    from_ovs.sort();
    assert_eq!(from_ovs, expected, "ovs-ofctl");
    let mut from_ctl = pipeline_lines(&s.ctl_ok(&["dump-flows"]));
    from_ctl.sort();
    assert_eq!(from_ctl, expected, "ctl");

    // What ovs-ofctl writes but the switch cannot do is refused with OpenFlow's error, and
    // nothing is added.
    let (ok, text) = s.ofctl(&[
        "add-flow",
        "table=3,actions=load:0x5->NXM_OF_VLAN_TCI[0..11]",
    ]);
    assert!(!ok && text.contains("OFPBAC_BAD_SET_ARGUMENT"), "{text}");
    assert!(!s.ofctl_ok(&["dump-flows"]).contains("table=3"));
}
