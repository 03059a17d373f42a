//! Revalidation under traffic: a forwarding rule is replaced by a drop rule while packets
//! flow; no packet sent after `wirespeed ctl` returned reaches the far side, whether the flow
//! was forwarded in user space or by the kernel's fast path (`--offload`).

mod common;
use common::switched::Switched;
use common::*;

use std::time::{Duration, SystemTime, UNIX_EPOCH};

#[test]
fn no_packet_sent_after_ctl_returns_is_forwarded() {
    replace_forwarding_with_drop("sr", false);
}

#[test]
fn no_packet_sent_after_ctl_returns_is_forwarded_by_the_kernel() {
    replace_forwarding_with_drop("so", true);
}

fn replace_forwarding_with_drop(tag: &str, offload: bool) {
    let s = Switched::new(tag, if offload { &["--offload"] } else { &[] });
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
