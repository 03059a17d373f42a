//! A frame off a tunnel's underlay, classified as the switch pops it: any bytes, taken as a
//! whole frame or as the head of a longer chain, are a verdict and never a panic, and an
//! inner frame it finds lies inside the packet with its Ethernet header in the frame at
//! hand. The inner frame's UDP source port (what pushing it into another tunnel hashes)
//! is read inside it too.
#![no_main]

use std::net::Ipv4Addr;

use libfuzzer_sys::fuzz_target;
use wirespeed_switch::tunnel::TunnelKind;
use wirespeed_switch::tunnel::header::{Arrival, classify, source_port};

fuzz_target!(|input: &[u8]| {
    let Some((&chained, frame)) = input.split_first() else {
        return;
    };
    // The first byte says how much of the packet is past this frame (a chain), in 64-byte
    // steps; 0 is a single frame.
    let packet_len = frame.len() + usize::from(chained) * 64;
    let local = [Ipv4Addr::new(192, 0, 2, 1)];
    let ports = [(4789, TunnelKind::Vxlan), (6081, TunnelKind::Geneve)];
    let _ = source_port(frame);
    if let Arrival::Tunnel(_, _, popped) = classify(frame, packet_len, &local, &ports) {
        assert!(popped.inner_len >= 14, "{popped:?}");
        assert!(popped.inner_at + 14 <= frame.len(), "{popped:?}");
        assert!(popped.inner_at + popped.inner_len <= packet_len, "{popped:?}");
        let _ = source_port(&frame[popped.inner_at..]);
    }
});
