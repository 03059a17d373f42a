//! How many frames an AF_XDP port hands the kernel when it opens: a port that only receives
//! puts three quarters of its frames in the fill ring (what the kernel can deliver while the
//! application is not looking), one that also sends half; the fill ring is twice the RX ring,
//! at most 65536 entries. Needs root; fails with the reason otherwise.

mod common;

use common::Netns;
use wirespeed_port::{PortOptions, PortSpec};

fn fill_after_open(ns: &Netns, rx: bool, tx: bool, frames: u32, ring: u32) -> u64 {
    let spec: PortSpec = format!("xdp:{}", ns.a).parse().unwrap();
    let opts = PortOptions {
        frame_count: frames,
        ring_size: ring,
        rx,
        tx,
        ..PortOptions::default()
    };
    let port = wirespeed_port::open(&spec, &opts)
        .unwrap_or_else(|e| panic!("open {spec} ({frames} frames, ring {ring}): {e}"));
    let audit = port.audit().expect("an AF_XDP port audits its frames");
    assert!(audit.balanced(), "{audit:?}");
    // A frame the kernel took for a stray packet is still one the port handed it.
    audit.fill + audit.kernel + audit.rx
}

#[test]
fn receive_only_ports_fill_three_quarters_of_their_frames() {
    let ns = Netns::enter("receive_only_ports_fill_three_quarters_of_their_frames");
    assert_eq!(fill_after_open(&ns, true, false, 1024, 512), 768);
    assert_eq!(fill_after_open(&ns, true, true, 1024, 512), 512);
    // The fill ring (twice the RX ring) bounds it.
    assert_eq!(fill_after_open(&ns, true, false, 4096, 256), 512);
    // The largest RX ring gets a fill ring of the same size, not one the kernel refuses.
    assert_eq!(fill_after_open(&ns, true, false, 4096, 65536), 3072);
}
