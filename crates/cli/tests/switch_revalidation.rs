//! Revalidation under traffic: a forwarding rule is replaced by a drop rule while packets
//! flow; no packet sent after `wirespeed ctl` returned reaches the far side.

mod common;
use common::switched::Switched;
use common::*;

use std::time::{Duration, SystemTime, UNIX_EPOCH};

#[test]
fn no_packet_sent_after_ctl_returns_is_forwarded() {
    let s = Switched::new("sr", &[]);
    s.ctl_ok(&["add-flow", "priority=100,in_port=1,actions=output:2"]);
    let file = format!("/tmp/wirespeed-reval-{}.pcap", std::process::id());
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
    s.ctl_ok(&["add-flow", "priority=100,in_port=1,actions=drop"]);
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
            "packet {} was sent {} ns after ctl returned and still arrived",
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
    assert!(
        flows.contains("priority=100,in_port=1 actions=drop"),
        "{flows}"
    );
}
