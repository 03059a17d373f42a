//! VLAN actions across the switch, judged by tcpdump on the far side: mod_vlan_vid:100 tags
//! untagged frames on their way out; strip_vlan removes the tag of tagged ones. The payload
//! and checksums survive both.

mod common;
use common::switched::Switched;
use common::*;

fn ethertype(f: &[u8]) -> u16 {
    u16::from_be_bytes([f[12], f[13]])
}

#[test]
fn mod_vlan_vid_pushes_and_strip_vlan_pops() {
    let s = Switched::new("sv", &[]);
    let id = std::process::id();
    let tx_port = format!("xdp:{}", s.c.a);

    s.ctl_ok(&[
        "add-flow",
        "priority=200,in_port=1,actions=mod_vlan_vid:100,output:2",
    ]);
    let cap = Capture::tcpdump_inbound(
        &s.c.ns_b,
        &s.c.b,
        &format!("/tmp/wirespeed-vlan-{id}-1.pcap"),
    );
    run_json(
        &s.c.ns_a,
        &[
            "bench", "txpush", "--port", &tx_port, "--count", "100", "--json", "-q",
        ],
    );
    let tagged = cap.stop(false).frames;
    assert_eq!(
        tagged.len(),
        100,
        "tcpdump on B saw {} frames",
        tagged.len()
    );
    for f in &tagged {
        assert_eq!(ethertype(f), 0x8100, "untagged frame reached B");
        assert_eq!(u16::from_be_bytes([f[14], f[15]]) & 0x0fff, 100, "VID");
        assert_eq!(
            u16::from_be_bytes([f[16], f[17]]),
            0x0800,
            "inner ethertype"
        );
        assert!(
            wirespeed_packet::ipv4_udp_checksums_ok(f),
            "checksums after the push"
        );
        assert!(
            wirespeed_packet::read_test_payload(f).is_some(),
            "payload intact"
        );
    }

    s.ctl_ok(&[
        "add-flow",
        "priority=200,in_port=1,actions=strip_vlan,output:2",
    ]);
    let cap = Capture::tcpdump_inbound(
        &s.c.ns_b,
        &s.c.b,
        &format!("/tmp/wirespeed-vlan-{id}-2.pcap"),
    );
    run_json(
        &s.c.ns_a,
        &[
            "gen", "--port", &tx_port, "--vlan", "100", "--count", "100", "--json",
        ],
    );
    let untagged = cap.stop(false).frames;
    assert_eq!(
        untagged.len(),
        100,
        "tcpdump on B saw {} frames",
        untagged.len()
    );
    for f in &untagged {
        assert_eq!(ethertype(f), 0x0800, "a tag survived strip_vlan");
        assert!(
            wirespeed_packet::ipv4_udp_checksums_ok(f),
            "checksums after the pop"
        );
        assert!(
            wirespeed_packet::read_test_payload(f).is_some(),
            "payload intact"
        );
    }
}
